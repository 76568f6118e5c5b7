// softroce0's GID table through the drop-in libibverbs, laid out as the kernel lays out rxe's
// (verbs/gid_table.h): 0 = the IPv6 link-local default GID, 1 = the device's IPv4 address as
// ::ffff:a.b.c.d, both RoCE v2, in every query and in the sysfs view; traffic goes through
// index 1, and index 0 (which the udp backend cannot send from) is refused at RTR and by
// ibv_create_ah instead of sending from the IPv4 address.
#include <gtest/gtest.h>
#include <infiniband/verbs.h>
#include <net/if.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "verbs_helpers.h"

// Not in the installed headers (rdma-core's driver.h).
extern "C" int ibv_query_gid_type(ibv_context* context, uint8_t port_num, unsigned int index,
                                  int* type);
extern "C" int ibv_read_sysfs_file(const char* dir, const char* file, char* buf, size_t size);

namespace {

using namespace std::chrono_literals;
using namespace softrdma::verbs::test;

ibv_gid gid_at(ibv_context* ctx, int index) {
  ibv_gid g{};
  EXPECT_EQ(ibv_query_gid(ctx, 1, index, &g), 0) << index;
  return g;
}

// As sysfs prints a GID.
std::string gid_text(const ibv_gid& g) {
  std::string out;
  char buf[8];
  for (int i = 0; i < 16; i += 2) {
    std::snprintf(buf, sizeof buf, "%s%02x%02x", i ? ":" : "", g.raw[i], g.raw[i + 1]);
    out += buf;
  }
  return out;
}

std::string sysfs(const std::string& file) {
  char buf[128] = {};
  if (ibv_read_sysfs_file("/sys/class/infiniband/softroce0", file.c_str(), buf, sizeof buf) < 0) {
    return "<none>";
  }
  return buf;
}

class GidTable : public ::testing::Test {
 protected:
  void SetUp() override {
    ctx = open_by_name("softroce0");
    ASSERT_TRUE(ctx);
  }
  void TearDown() override {
    if (ctx) ibv_close_device(ctx);
  }
  ibv_context* ctx = nullptr;
};

TEST_F(GidTable, IsTheLinkLocalDefaultGidThenTheIpv4Address) {
  ibv_port_attr pa{};
  ASSERT_EQ(ibv_query_port(ctx, 1, &pa), 0);
  EXPECT_EQ(pa.gid_tbl_len, 2);
  // 1: ::ffff:127.1.x.y, the per-process address on lo.
  const ibv_gid v4 = gid_at(ctx, 1);
  const std::uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  EXPECT_EQ(std::memcmp(v4.raw, mapped, 12), 0);
  EXPECT_EQ(v4.raw[12], 127);
  // 0: fe80::/64 and the modified EUI-64 of the device's MAC, 02:00 and its IPv4 address:
  // the universal/local bit of 0x02 flipped, ff:fe in the middle.
  const ibv_gid ll = gid_at(ctx, 0);
  const std::uint8_t want[16] = {0xfe, 0x80,       0,           0,         0,          0,
                                 0,    0,          0x02 ^ 0x02, 0x00,      v4.raw[12], 0xff,
                                 0xfe, v4.raw[13], v4.raw[14],  v4.raw[15]};
  EXPECT_EQ(std::memcmp(ll.raw, want, 16), 0) << gid_text(ll);
  ibv_gid g;
  errno = 0;
  EXPECT_NE(ibv_query_gid(ctx, 1, 2, &g), 0);
  EXPECT_EQ(errno, EINVAL);
}

TEST_F(GidTable, EveryEntryIsRoceV2InEveryQuery) {
  const unsigned lo = if_nametoindex("lo");
  ibv_gid_entry table[4] = {};
  ASSERT_EQ(ibv_query_gid_table(ctx, table, 4, 0), 2);
  ibv_gid_entry small[1];
  EXPECT_LT(ibv_query_gid_table(ctx, small, 1, 0), 0);  // room for fewer than all
  for (unsigned i = 0; i < 2; ++i) {
    ibv_gid_entry e{};
    ASSERT_EQ(ibv_query_gid_ex(ctx, 1, i, &e, 0), 0) << i;
    EXPECT_EQ(e.gid_type, IBV_GID_TYPE_ROCE_V2) << i;
    EXPECT_EQ(e.gid_index, i);
    EXPECT_EQ(e.port_num, 1u);
    EXPECT_EQ(e.ndev_ifindex, lo) << i;
    const ibv_gid g = gid_at(ctx, static_cast<int>(i));
    EXPECT_EQ(std::memcmp(e.gid.raw, g.raw, 16), 0) << i;
    EXPECT_EQ(std::memcmp(&table[i], &e, sizeof e), 0) << i;
    int type = -1;
    ASSERT_EQ(ibv_query_gid_type(ctx, 1, i, &type), 0) << i;
    EXPECT_EQ(type, 1) << i;  // rdma-core's IBV_GID_TYPE_SYSFS_ROCE_V2
  }
  ibv_gid_entry e{};
  EXPECT_EQ(ibv_query_gid_ex(ctx, 1, 2, &e, 0), EINVAL);
  int type = -1;
  EXPECT_NE(ibv_query_gid_type(ctx, 1, 2, &type), 0);
}

TEST_F(GidTable, TheSysfsViewAgrees) {
  for (int i = 0; i < 2; ++i) {
    const std::string ix = std::to_string(i);
    EXPECT_EQ(sysfs("ports/1/gids/" + ix), gid_text(gid_at(ctx, i))) << i;
    EXPECT_EQ(sysfs("ports/1/gid_attrs/types/" + ix), "RoCE v2") << i;
    EXPECT_EQ(sysfs("ports/1/gid_attrs/ndevs/" + ix), "lo") << i;
  }
  EXPECT_EQ(sysfs("ports/1/gids/2"), "<none>");
  EXPECT_EQ(sysfs("ports/1/gid_attrs/types/2"), "<none>");
}

// Two RC QPs of the fixture's device, each addressed to the other through the GRH.
struct Pair : Loop {
  explicit Pair(ibv_context* c) {
    qp_access = 0;
    open(c);
  }
  ~Pair() {
    ctx = nullptr;  // the fixture's, closed by it
    close();
  }
};

TEST_F(GidTable, TrafficGoesThroughIndexOneAndIndexZeroIsRefusedAtRtr) {
  Pair p(ctx);
  ASSERT_TRUE(p.qp[0] && p.qp[1] && p.mr);
  ASSERT_TRUE(p.init(0) && p.init(1));
  const ibv_gid v4 = gid_at(ctx, 1);
  // The link-local GID as source (the backend sends from its IPv4 address only), an index
  // past the table, and the link-local GID as destination are all refused; the QP stays in INIT.
  testing::internal::CaptureStderr();
  EXPECT_EQ(p.rtr(0, v4, 0), EINVAL);
  const std::string said = testing::internal::GetCapturedStderr();
  EXPECT_NE(said.find("sgid_index 0 is softroce0's IPv6 link-local GID fe80::"), std::string::npos)
      << said;
  EXPECT_NE(said.find("(sgid_index 1"), std::string::npos) << said;
  EXPECT_EQ(p.rtr(0, v4, 2), EINVAL);
  EXPECT_EQ(p.rtr(0, gid_at(ctx, 0), 1), EINVAL);
  EXPECT_EQ(p.qp[0]->state, IBV_QPS_INIT);
  // Index 1 works, and query_qp gives it back.
  ASSERT_EQ(p.rtr(0, v4, 1), 0);
  ASSERT_EQ(p.rtr(1, v4, 1), 0);
  ASSERT_TRUE(p.rts(0) && p.rts(1));
  ibv_qp_attr qa{};
  ibv_qp_init_attr qia{};
  ASSERT_EQ(ibv_query_qp(p.qp[0], &qa, IBV_QP_AV, &qia), 0);
  EXPECT_EQ(qa.ah_attr.grh.sgid_index, 1);
  EXPECT_EQ(std::memcmp(qa.ah_attr.grh.dgid.raw, v4.raw, 16), 0);

  char* const text = reinterpret_cast<char*>(p.buf.data());
  std::strcpy(text, "through GID index 1");
  ASSERT_EQ(p.post_recv(1, 0, 4096, 4096), 0);
  ASSERT_EQ(p.send(0, 0, 0, 64), 0);
  const auto wcs = poll_n(p.cq, 2);
  for (const ibv_wc& wc : wcs) EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(wcs.size(), 2u);
  EXPECT_STREQ(text + 4096, "through GID index 1");
}

TEST_F(GidTable, AnAddressHandleFromTheLinkLocalGidIsRefused) {
  ibv_pd* pd = ibv_alloc_pd(ctx);
  ASSERT_TRUE(pd);
  ibv_ah_attr a{};
  a.is_global = 1;
  a.grh.dgid = gid_at(ctx, 1);
  a.grh.hop_limit = 64;
  a.port_num = 1;
  testing::internal::CaptureStderr();
  errno = 0;
  EXPECT_EQ(ibv_create_ah(pd, &a), nullptr);  // sgid_index 0
  EXPECT_EQ(errno, EINVAL);
  testing::internal::GetCapturedStderr();
  a.grh.sgid_index = 1;
  ibv_ah* ah = ibv_create_ah(pd, &a);
  ASSERT_TRUE(ah);
  ibv_destroy_ah(ah);
  ibv_dealloc_pd(pd);
}

// A UD datagram to ourselves: the reply's address vector from its completion is sent from the
// GID of the address the datagram came to (index 1), as the kernel's ib_init_ah_attr_from_wc.
TEST_F(GidTable, AnAddressVectorFromACompletionSendsFromIndexOne) {
  ibv_pd* pd = ibv_alloc_pd(ctx);
  ibv_cq* cq = ibv_create_cq(ctx, 8, nullptr, nullptr, 0);
  std::vector<char> buf(4096);
  ibv_mr* mr = ibv_reg_mr(pd, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE);
  ibv_qp_init_attr ia{};
  ia.send_cq = ia.recv_cq = cq;
  ia.qp_type = IBV_QPT_UD;
  ia.cap.max_send_wr = ia.cap.max_recv_wr = 4;
  ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
  ibv_qp* qp = ibv_create_qp(pd, &ia);
  ASSERT_TRUE(qp && mr);
  ibv_qp_attr qa{};
  qa.qp_state = IBV_QPS_INIT;
  qa.port_num = 1;
  qa.qkey = 0x1234;
  ASSERT_EQ(ibv_modify_qp(qp, &qa, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY),
            0);
  qa = {};
  qa.qp_state = IBV_QPS_RTR;
  ASSERT_EQ(ibv_modify_qp(qp, &qa, IBV_QP_STATE), 0);
  qa.qp_state = IBV_QPS_RTS;
  ASSERT_EQ(ibv_modify_qp(qp, &qa, IBV_QP_STATE | IBV_QP_SQ_PSN), 0);
  ibv_sge rs{reinterpret_cast<std::uintptr_t>(buf.data() + 1024), 1024, mr->lkey};
  ASSERT_EQ(post_recv_sge(qp, &rs, 0), 0);
  ibv_ah_attr aa{};
  aa.is_global = 1;
  aa.grh.dgid = gid_at(ctx, 1);
  aa.grh.sgid_index = 1;
  aa.grh.hop_limit = 64;
  aa.port_num = 1;
  ibv_ah* ah = ibv_create_ah(pd, &aa);
  ASSERT_TRUE(ah);
  ibv_sge ss{reinterpret_cast<std::uintptr_t>(buf.data()), 16, mr->lkey};
  ibv_send_wr sw = one_sge_wr(IBV_WR_SEND, &ss);
  sw.wr.ud.ah = ah;
  sw.wr.ud.remote_qpn = qp->qp_num;
  sw.wr.ud.remote_qkey = 0x1234;
  ASSERT_EQ(post_wr(qp, sw), 0);
  ibv_wc recv{};
  bool have = false;
  for (const ibv_wc& wc : poll_n(cq, 2)) {  // the send's and the receive's
    if (wc.opcode == IBV_WC_RECV) {
      recv = wc;
      have = true;
    }
  }
  ASSERT_TRUE(have);
  ASSERT_EQ(recv.status, IBV_WC_SUCCESS);
  ibv_ah_attr back{};
  ASSERT_EQ(
      ibv_init_ah_from_wc(ctx, 1, &recv, reinterpret_cast<ibv_grh*>(buf.data() + 1024), &back), 0);
  EXPECT_EQ(back.grh.sgid_index, 1);
  EXPECT_EQ(std::memcmp(back.grh.dgid.raw, aa.grh.dgid.raw, 16), 0);
  ibv_ah* reply = ibv_create_ah(pd, &back);
  EXPECT_TRUE(reply);
  if (reply) ibv_destroy_ah(reply);
  ibv_destroy_ah(ah);
  ibv_destroy_qp(qp);
  ibv_dereg_mr(mr);
  ibv_destroy_cq(cq);
  ibv_dealloc_pd(pd);
}

TEST(GidTableIwarp, SoftiwarpKeepsItsOneGid) {
  ibv_context* ctx = open_by_name("softiwarp0");
  ASSERT_TRUE(ctx);
  ibv_port_attr pa{};
  ASSERT_EQ(ibv_query_port(ctx, 1, &pa), 0);
  EXPECT_EQ(pa.gid_tbl_len, 1);
  ibv_gid_entry e{};
  ASSERT_EQ(ibv_query_gid_ex(ctx, 1, 0, &e, 0), 0);
  EXPECT_EQ(e.gid_type, IBV_GID_TYPE_IB);
  EXPECT_EQ(ibv_query_gid_ex(ctx, 1, 1, &e, 0), EINVAL);
  ibv_close_device(ctx);
}

}  // namespace
