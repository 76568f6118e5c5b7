// On-demand paging through the drop-in libibverbs: explicit ODP regions over memory mapped
// later or unmapped after registration, implicit ODP (the whole address space), ibv_advise_mr
// and the odp_caps. Memory that is gone gives the requester REM_ACCESS_ERR (remote access) or
// LOC_PROT_ERR (its own gather or scatter), never a crash; the guard pages around it keep their
// bytes, and the responder's counters count each refusal.
#include <gtest/gtest.h>
#include <infiniband/verbs.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <regex>
#include <string>

#include "verbs_helpers.h"

namespace {

using namespace softrdma::verbs::test;

constexpr unsigned kAll = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                          IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
constexpr std::uint8_t kGuard = 0x5A;
const std::size_t kPage = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));

// Takes [p, p + len) away under a registered region. A plain munmap would leave a hole that the
// process's next mapping (a thread stack, the sanitizer's allocator) may fill, and the device
// would then rightly write there, as a NIC that follows the mappings would (about one run in ten
// under ASan saw that). An inaccessible mapping in its place faults every access the same way
// (EFAULT), and nothing else can take the address.
bool take_away(void* p, std::size_t len) {
  return mmap(p, len, PROT_NONE, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) == p;
}

// A counter of the softroce0 of process `pid` (default: this one) as `softrdma stat` reads it
// (docs/monitoring.md), or -1.
long long counter(const char* name, pid_t pid = getpid()) {
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  // monitor/endpoint.h: /tmp/.softrdma-mon-<uid>/<pid>
  const std::string path =
      "/tmp/.softrdma-mon-" + std::to_string(getuid()) + "/" + std::to_string(pid);
  std::memcpy(a.sun_path, path.data(), path.size());
  const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size());
  std::string report;
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), len) == 0) {
    char buf[4096];
    for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;)
      report.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  if (report.find("softroce0") == std::string::npos) return -1;
  std::smatch m;  // a report may leave out the counters that are 0
  if (!std::regex_search(report, m, std::regex("\"" + std::string(name) + "\": ?([0-9]+)"))) {
    return 0;
  }
  return std::stoll(m[1]);
}

// Three pages filled with guard bytes; tests take the middle one away or write into it, and the
// first and last stay guards.
struct GuardPages {
  std::uint8_t* pages = nullptr;

  bool map() {
    void* p = mmap(nullptr, 3 * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return false;
    pages = static_cast<std::uint8_t*>(p);
    std::memset(pages, kGuard, 3 * kPage);
    return true;
  }
  void unmap() {
    if (pages) munmap(pages, 3 * kPage);
    pages = nullptr;
  }
  std::uint8_t* middle() { return pages + kPage; }
  // The first and last pages hold guard bytes only.
  bool guards_intact() {
    for (std::size_t i = 0; i < kPage; ++i) {
      if (pages[i] != kGuard || pages[2 * kPage + i] != kGuard) return false;
    }
    return true;
  }
};

// Three guard pages registered on demand, and a connected RC pair; the middle page unmapped or
// read-only when a test says so.
struct Odp : ::testing::Test, GuardPages {
  Loop l;
  ibv_mr* odp = nullptr;

  void SetUp() override {
    l.mr_access = kAll;
    l.qp_access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
    ASSERT_TRUE(l.open(open_by_name("softroce0")));
    ASSERT_TRUE(l.connect());
    ASSERT_TRUE(map());
    odp = ibv_reg_mr(l.pd, pages, 3 * kPage, static_cast<int>(kAll | IBV_ACCESS_ON_DEMAND));
    ASSERT_NE(odp, nullptr) << std::strerror(errno);
    for (std::size_t i = 0; i < 4096; ++i) l.buf[i] = static_cast<std::uint8_t>(i * 3 + 1);
  }
  void TearDown() override {
    if (odp) ibv_dereg_mr(odp);
    l.close();
    unmap();
  }

  void unmap_middle() { ASSERT_TRUE(take_away(middle(), kPage)); }
  static std::uint64_t at(const void* p) { return reinterpret_cast<std::uint64_t>(p); }

  // One signaled work request on QP 0; its completion's status (-1: none, -2: not posted).
  int one(const ibv_send_wr& w) { return complete_one(l.qp[0], l.cq, w); }
  // RDMA WRITE/READ of `len` bytes between QP 0's buffer (ordinary region) and `remote`.
  int rdma(ibv_wr_opcode op, std::uint32_t rkey, std::uint64_t remote, std::uint32_t len) {
    ibv_sge s{at(l.buf.data()), len, l.mr->lkey};
    ibv_send_wr w = rdma_wr(op, &s, remote, rkey, 0, 0);
    return one(w);
  }
  // FETCH_AND_ADD of `add` at `remote`, the old value to QP 0's buffer.
  int fetch_add(std::uint32_t rkey, std::uint64_t remote, std::uint64_t add) {
    ibv_sge s{at(l.buf.data()), 8, l.mr->lkey};
    ibv_send_wr w = one_sge_wr(IBV_WR_ATOMIC_FETCH_AND_ADD, &s, 0, 0);
    w.wr.atomic.remote_addr = remote;
    w.wr.atomic.rkey = rkey;
    w.wr.atomic.compare_add = add;
    return one(w);
  }
};

TEST(OdpCaps, SoftroceReportsWhatItImplementsAndSoftiwarpNothing) {
  ibv_context* roce = open_by_name("softroce0");
  ASSERT_NE(roce, nullptr);
  ibv_device_attr_ex a{};
  ASSERT_EQ(ibv_query_device_ex(roce, nullptr, &a), 0);
  EXPECT_EQ(a.odp_caps.general_caps, IBV_ODP_SUPPORT | IBV_ODP_SUPPORT_IMPLICIT);
  const auto& t = a.odp_caps.per_transport_caps;
  EXPECT_EQ(t.rc_odp_caps, IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_WRITE |
                               IBV_ODP_SUPPORT_READ | IBV_ODP_SUPPORT_ATOMIC |
                               IBV_ODP_SUPPORT_SRQ_RECV);
  EXPECT_EQ(t.uc_odp_caps, IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_WRITE);
  EXPECT_EQ(t.ud_odp_caps, IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV);
  EXPECT_EQ(a.xrc_odp_caps, 0u);
  ibv_close_device(roce);

  ibv_context* iw = open_by_name("softiwarp0");
  ASSERT_NE(iw, nullptr);
  a = {};
  ASSERT_EQ(ibv_query_device_ex(iw, nullptr, &a), 0);
  EXPECT_EQ(a.odp_caps.general_caps, 0u);
  EXPECT_EQ(a.odp_caps.per_transport_caps.rc_odp_caps, 0u);
  ibv_pd* pd = ibv_alloc_pd(iw);
  std::vector<std::uint8_t> buf(4096);
  errno = 0;
  EXPECT_EQ(ibv_reg_mr(pd, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ON_DEMAND),
            nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
  ibv_sge s{Odp::at(buf.data()), 64, 0};
  EXPECT_EQ(ibv_advise_mr(pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &s, 1), EOPNOTSUPP);
  ibv_dealloc_pd(pd);
  ibv_close_device(iw);
}

TEST_F(Odp, ExplicitRegionCarriesWriteReadAtomicAndSend) {
  ASSERT_EQ(rdma(IBV_WR_RDMA_WRITE, odp->rkey, at(middle() + 100), 3000), IBV_WC_SUCCESS);
  EXPECT_EQ(std::memcmp(middle() + 100, l.buf.data(), 3000), 0);
  EXPECT_EQ(middle()[99], kGuard);
  EXPECT_EQ(middle()[3100], kGuard);
  EXPECT_TRUE(guards_intact());
  std::memset(middle() + 200, 0x11, 1000);
  ASSERT_EQ(rdma(IBV_WR_RDMA_READ, odp->rkey, at(middle() + 200), 1000), IBV_WC_SUCCESS);
  EXPECT_EQ(l.buf[0], 0x11);
  EXPECT_EQ(l.buf[999], 0x11);
  std::uint64_t v = 40;
  std::memcpy(middle() + 8, &v, 8);
  ASSERT_EQ(fetch_add(odp->rkey, at(middle() + 8), 2), IBV_WC_SUCCESS);
  std::memcpy(&v, middle() + 8, 8);
  EXPECT_EQ(v, 42u);
  // A SEND gathered from the ODP region, received into the ordinary one.
  ASSERT_EQ(l.post_recv(1, 7, 65536, 4000), 0);
  ibv_sge s{at(middle() + 100), 3000, odp->lkey};
  ibv_send_wr w = one_sge_wr(IBV_WR_SEND, &s);
  ASSERT_EQ(post_wr(l.qp[0], w), 0);
  const auto wcs = poll_n(l.cq, 2);
  ASSERT_EQ(wcs.size(), 2u);
  for (const ibv_wc& wc : wcs) EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(std::memcmp(l.buf.data() + 65536, middle() + 100, 3000), 0);
}

TEST_F(Odp, ImplicitRegionReachesMemoryMappedAfterIt) {
  ibv_mr* all = ibv_reg_mr(l.pd, nullptr, SIZE_MAX, static_cast<int>(kAll | IBV_ACCESS_ON_DEMAND));
  ASSERT_NE(all, nullptr) << std::strerror(errno);
  EXPECT_EQ(all->addr, nullptr);
  EXPECT_EQ(all->length, SIZE_MAX);
  // Lazy: mapped after the registration, never touched before the write.
  void* p = mmap(nullptr, 2 * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(p, MAP_FAILED);
  auto* lazy = static_cast<std::uint8_t*>(p);
  EXPECT_EQ(rdma(IBV_WR_RDMA_WRITE, all->rkey, at(lazy + kPage - 500), 1000), IBV_WC_SUCCESS);
  EXPECT_EQ(std::memcmp(lazy + kPage - 500, l.buf.data(), 1000), 0);
  EXPECT_EQ(lazy[kPage - 501], 0);  // anonymous memory: zero around it
  EXPECT_EQ(lazy[kPage + 500], 0);
  EXPECT_EQ(fetch_add(all->rkey, at(lazy + 16), 5), IBV_WC_SUCCESS);
  EXPECT_EQ(lazy[16], 5);
  // The implicit region's lkey gathers from anywhere too: a READ into the lazy pages.
  std::memset(l.buf.data() + 65536, 0x77, 256);
  ibv_sge s{at(lazy + 1024), 256, all->lkey};
  ibv_send_wr w = rdma_wr(IBV_WR_RDMA_READ, &s, at(l.buf.data() + 65536), l.mr->rkey, 0, 0);
  EXPECT_EQ(one(w), IBV_WC_SUCCESS);
  EXPECT_EQ(lazy[1024], 0x77);
  EXPECT_EQ(lazy[1279], 0x77);
  EXPECT_EQ(lazy[1280], 0);
  ASSERT_TRUE(take_away(p, 2 * kPage));
  // Unmapped again: an access error, nothing else.
  EXPECT_EQ(rdma(IBV_WR_RDMA_WRITE, all->rkey, at(lazy), 64), IBV_WC_REM_ACCESS_ERR);
  EXPECT_EQ(ibv_dereg_mr(all), 0);
  munmap(p, 2 * kPage);
}

TEST_F(Odp, RemoteWriteToUnmappedMemoryIsARemoteAccessError) {
  const long long naks = counter("resp_remote_access_errors");
  const long long faults = counter("odp_faults");
  ASSERT_GE(naks, 0);
  unmap_middle();
  // Two packets into the unmapped page: the first is refused, the QP stops, and the responder
  // (this process) goes on; the pages around it keep their bytes.
  EXPECT_EQ(rdma(IBV_WR_RDMA_WRITE, odp->rkey, at(middle() + 64), 2000), IBV_WC_REM_ACCESS_ERR);
  EXPECT_TRUE(guards_intact());
  EXPECT_EQ(counter("resp_remote_access_errors"), naks + 1);
  EXPECT_EQ(counter("odp_faults"), faults + 1);
}

TEST_F(Odp, RemoteReadOfUnmappedMemoryIsARemoteAccessError) {
  const long long naks = counter("resp_remote_access_errors");
  unmap_middle();
  std::memset(l.buf.data(), 0xEE, 64);
  EXPECT_EQ(rdma(IBV_WR_RDMA_READ, odp->rkey, at(middle()), 64), IBV_WC_REM_ACCESS_ERR);
  EXPECT_EQ(l.buf[0], 0xEE);  // nothing read into the requester's buffer
  EXPECT_EQ(counter("resp_remote_access_errors"), naks + 1);
}

TEST_F(Odp, AtomicOnUnmappedMemoryIsARemoteAccessError) {
  const long long naks = counter("resp_remote_access_errors");
  unmap_middle();
  EXPECT_EQ(fetch_add(odp->rkey, at(middle() + 8), 1), IBV_WC_REM_ACCESS_ERR);
  EXPECT_EQ(counter("resp_remote_access_errors"), naks + 1);
  EXPECT_TRUE(guards_intact());
}

// IBTA 1.5's ATOMIC WRITE into an ODP page unmapped under it: probed as an atomic is, refused.
TEST_F(Odp, AtomicWriteToUnmappedMemoryIsARemoteAccessError) {
  EXPECT_EQ(rdma(IBV_WR_ATOMIC_WRITE, odp->rkey, at(middle() + 8), 8), IBV_WC_SUCCESS);
  const long long naks = counter("resp_remote_access_errors");
  unmap_middle();
  EXPECT_EQ(rdma(IBV_WR_ATOMIC_WRITE, odp->rkey, at(middle() + 16), 8), IBV_WC_REM_ACCESS_ERR);
  EXPECT_EQ(counter("resp_remote_access_errors"), naks + 1);
  EXPECT_TRUE(guards_intact());
}

TEST_F(Odp, AtomicOnReadOnlyMemoryChangesNothing) {
  ASSERT_EQ(mprotect(middle(), kPage, PROT_READ), 0);
  EXPECT_EQ(fetch_add(odp->rkey, at(middle() + 8), 1), IBV_WC_REM_ACCESS_ERR);
  for (std::size_t i = 0; i < kPage; ++i) ASSERT_EQ(middle()[i], kGuard) << i;
}

TEST_F(Odp, WriteToReadOnlyMemoryChangesNothing) {
  ASSERT_EQ(mprotect(middle(), kPage, PROT_READ), 0);
  EXPECT_EQ(rdma(IBV_WR_RDMA_WRITE, odp->rkey, at(middle()), 512), IBV_WC_REM_ACCESS_ERR);
  for (std::size_t i = 0; i < kPage; ++i) ASSERT_EQ(middle()[i], kGuard) << i;
  EXPECT_TRUE(guards_intact());
}

TEST_F(Odp, SendFromUnmappedMemoryIsALocalProtectionError) {
  const long long faults = counter("odp_faults");
  unmap_middle();
  ASSERT_EQ(l.post_recv(1, 7, 65536, 4000), 0);
  ibv_sge s{at(middle()), 100, odp->lkey};
  ibv_send_wr w = one_sge_wr(IBV_WR_SEND, &s, 0, 0);
  EXPECT_EQ(one(w), IBV_WC_LOC_PROT_ERR);
  EXPECT_EQ(counter("odp_faults"), faults + 1);
}

TEST_F(Odp, ReadResponseIntoUnmappedMemoryIsALocalProtectionError) {
  unmap_middle();
  ibv_sge s{at(middle()), 100, odp->lkey};
  ibv_send_wr w = rdma_wr(IBV_WR_RDMA_READ, &s, at(l.buf.data()), l.mr->rkey, 0, 0);
  EXPECT_EQ(one(w), IBV_WC_LOC_PROT_ERR);
  EXPECT_TRUE(guards_intact());
}

TEST_F(Odp, ReceiveIntoUnmappedMemoryFailsBothSidesCleanly) {
  unmap_middle();
  ibv_sge r{at(middle()), 1000, odp->lkey};
  ASSERT_EQ(post_recv_sge(l.qp[1], &r, 9), 0);
  ASSERT_EQ(l.send(0, 8, 0, 1000), 0);
  const auto wcs = poll_n(l.cq, 2);
  ASSERT_EQ(wcs.size(), 2u);
  for (const ibv_wc& wc : wcs) {
    EXPECT_EQ(wc.status, wc.wr_id == 9 ? IBV_WC_LOC_PROT_ERR : IBV_WC_REM_OP_ERR) << wc.wr_id;
  }
  EXPECT_TRUE(guards_intact());
}

TEST_F(Odp, AdviseMrChecksItsRangesAndFaultsThemIn) {
  ibv_sge good{at(middle() + 10), 100, odp->lkey};
  EXPECT_EQ(ibv_advise_mr(l.pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &good, 1), 0);
  EXPECT_EQ(
      ibv_advise_mr(l.pd, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, IBV_ADVISE_MR_FLAG_FLUSH, &good, 1),
      0);
  EXPECT_EQ(ibv_advise_mr(l.pd, IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT, 0, &good, 1), 0);
  EXPECT_TRUE(guards_intact());  // a prefetch changes no byte
  ibv_sge outside{at(pages + 3 * kPage - 10), 100, odp->lkey};
  EXPECT_EQ(ibv_advise_mr(l.pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &outside, 1), EFAULT);
  ibv_sge bad_key{at(middle()), 100, odp->lkey ^ 0x100};
  EXPECT_EQ(ibv_advise_mr(l.pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &bad_key, 1), EFAULT);
  ibv_sge not_odp{at(l.buf.data()), 100, l.mr->lkey};
  EXPECT_EQ(ibv_advise_mr(l.pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &not_odp, 1), EINVAL);
  EXPECT_EQ(ibv_advise_mr(l.pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0x80, &good, 1), EINVAL);
  EXPECT_EQ(ibv_advise_mr(l.pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &good, 0), EINVAL);
  // Read-only memory: readable, not writable.
  ASSERT_EQ(mprotect(middle(), kPage, PROT_READ), 0);
  EXPECT_EQ(ibv_advise_mr(l.pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &good, 1), 0);
  EXPECT_EQ(ibv_advise_mr(l.pd, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, 0, &good, 1), EFAULT);
  // Unmapped: PREFETCH cannot fault it in; NO_FAULT does not try.
  unmap_middle();
  EXPECT_EQ(ibv_advise_mr(l.pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &good, 1), EFAULT);
  EXPECT_EQ(ibv_advise_mr(l.pd, IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT, 0, &good, 1), 0);
}

TEST_F(Odp, ReregKeepsAnOdpRegionOnDemand) {
  EXPECT_EQ(
      ibv_rereg_mr(odp, IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr, 0, static_cast<int>(kAll)),
      IBV_REREG_MR_ERR_INPUT);
  EXPECT_EQ(ibv_rereg_mr(odp, IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr, 0,
                         IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ON_DEMAND),
            0);
  EXPECT_EQ(ibv_rereg_mr(l.mr, IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr, 0,
                         static_cast<int>(kAll | IBV_ACCESS_ON_DEMAND)),
            IBV_REREG_MR_ERR_INPUT);
}

// Two QPs of `Type` on one device, both in RTS: UC QPs connected to each other, UD QPs with Q_Key
// kQkey and an address handle to the device itself; and three guard pages.
template <ibv_qp_type Type>
struct OdpPair : ::testing::Test, GuardPages {
  static constexpr std::uint32_t kQkey = 0x11111111;
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_cq* cq = nullptr;
  ibv_qp* qp[2] = {};
  ibv_ah* ah = nullptr;                 // UD
  std::vector<ibv_mr*> mrs;             // what reg() registered

  void SetUp() override {
    ctx = open_by_name("softroce0");
    ASSERT_NE(ctx, nullptr);
    pd = ibv_alloc_pd(ctx);
    cq = ibv_create_cq(ctx, 64, nullptr, nullptr, 0);
    ASSERT_TRUE(pd && cq);
    ibv_gid gid;
    ASSERT_EQ(ibv_query_gid(ctx, 1, 1, &gid), 0);
    ibv_ah_attr av{};
    av.is_global = 1;
    av.grh.dgid = gid;
    av.grh.sgid_index = 1;
    av.grh.hop_limit = 64;
    av.port_num = 1;
    for (auto& q : qp) {
      ibv_qp_init_attr a{};
      a.send_cq = a.recv_cq = cq;
      a.qp_type = Type;
      a.cap.max_send_wr = a.cap.max_recv_wr = 8;
      a.cap.max_send_sge = a.cap.max_recv_sge = 1;
      q = ibv_create_qp(pd, &a);
      ASSERT_NE(q, nullptr);
    }
    for (int i = 0; i < 2; ++i) {
      ibv_qp_attr a{};
      a.qp_state = IBV_QPS_INIT;
      a.port_num = 1;
      a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
      a.qkey = kQkey;
      const int last = Type == IBV_QPT_UD ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS;
      ASSERT_EQ(ibv_modify_qp(qp[i], &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | last), 0);
      a = {};
      a.qp_state = IBV_QPS_RTR;
      a.path_mtu = IBV_MTU_1024;
      a.dest_qp_num = qp[1 - i]->qp_num;
      a.ah_attr = av;
      const int connect = IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
      ASSERT_EQ(ibv_modify_qp(qp[i], &a, IBV_QP_STATE | (Type == IBV_QPT_UD ? 0 : connect)), 0);
      a = {};
      a.qp_state = IBV_QPS_RTS;
      ASSERT_EQ(ibv_modify_qp(qp[i], &a, IBV_QP_STATE | IBV_QP_SQ_PSN), 0);
    }
    if (Type == IBV_QPT_UD) {
      ah = ibv_create_ah(pd, &av);
      ASSERT_NE(ah, nullptr);
    }
    ASSERT_TRUE(map());
  }
  void TearDown() override {
    for (auto& q : qp) {
      if (q) ibv_destroy_qp(q);
    }
    if (ah) ibv_destroy_ah(ah);
    for (ibv_mr* mr : mrs) ibv_dereg_mr(mr);
    if (cq) ibv_destroy_cq(cq);
    if (pd) ibv_dealloc_pd(pd);
    if (ctx) ibv_close_device(ctx);
    unmap();
  }
  ibv_mr* reg(void* addr, std::size_t len, int access) {
    ibv_mr* mr = ibv_reg_mr(pd, addr, len, access);
    if (mr) mrs.push_back(mr);
    return mr;
  }
};

// The UC pair, the guard pages registered on demand and the whole address space (implicit).
struct OdpUc : OdpPair<IBV_QPT_UC> {
  ibv_mr* odp = nullptr;
  ibv_mr* all = nullptr;  // implicit
  std::vector<std::uint8_t> src = std::vector<std::uint8_t>(4096);

  void SetUp() override {
    OdpPair::SetUp();
    if (HasFatalFailure()) return;
    constexpr int kAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_ON_DEMAND;
    odp = reg(pages, 3 * kPage, kAccess);
    all = reg(nullptr, SIZE_MAX, kAccess);
    ASSERT_TRUE(odp && all);
    for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<std::uint8_t>(i * 5 + 3);
  }
  // A signaled WRITE (or SEND) of `len` bytes of `src`, gathered through the implicit region.
  int post(ibv_wr_opcode op, std::uint64_t remote, std::uint32_t len) {
    ibv_sge s{Odp::at(src.data()), len, all->lkey};
    ibv_send_wr w = rdma_wr(op, &s, remote, odp->rkey);
    return post_wr(qp[0], w);
  }
  ibv_qp_state state(int i) {
    ibv_qp_attr a{};
    ibv_qp_init_attr init{};
    ibv_query_qp(qp[i], &a, IBV_QP_STATE, &init);
    return a.qp_state;
  }
};

TEST_F(OdpUc, WriteSendAndReceiveThroughOdpRegions) {
  ASSERT_EQ(post(IBV_WR_RDMA_WRITE, Odp::at(middle() + 10), 3000), 0);
  auto wcs = poll_n(cq, 1);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, IBV_WC_SUCCESS);
  ASSERT_TRUE(softrdma::test::wait_until([&] { return middle()[3009] == src[2999]; }));
  EXPECT_EQ(std::memcmp(middle() + 10, src.data(), 3000), 0);
  EXPECT_EQ(middle()[9], kGuard);
  EXPECT_EQ(middle()[3010], kGuard);
  // A SEND into a receive buffer of the explicit region.
  ibv_sge r{Odp::at(pages + 2 * kPage), 2000, odp->lkey};
  ASSERT_EQ(post_recv_sge(qp[1], &r, 5), 0);
  ASSERT_EQ(post(IBV_WR_SEND, 0, 2000), 0);
  wcs = poll_n(cq, 2);
  ASSERT_EQ(wcs.size(), 2u);
  for (const ibv_wc& wc : wcs) EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(std::memcmp(pages + 2 * kPage, src.data(), 2000), 0);
  EXPECT_EQ(pages[2 * kPage + 2000], kGuard);
}

TEST_F(OdpUc, WriteToUnmappedMemoryFailsTheResponderQpOnly) {
  const long long faults = counter("odp_faults");
  ASSERT_TRUE(take_away(middle(), kPage));
  ASSERT_EQ(post(IBV_WR_RDMA_WRITE, Odp::at(middle()), 500), 0);
  const auto wcs = poll_n(cq, 1);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, IBV_WC_SUCCESS);  // UC: complete once sent
  // UC has no NAK: the receiving QP fails, as on a bad rkey; nothing around the hole changes.
  EXPECT_TRUE(softrdma::test::wait_until([&] { return state(1) == IBV_QPS_ERR; }));
  EXPECT_EQ(counter("odp_faults"), faults + 1);
  EXPECT_TRUE(guards_intact());
  EXPECT_EQ(state(0), IBV_QPS_RTS);
}

TEST_F(OdpUc, SendFromUnmappedMemoryIsALocalProtectionError) {
  ASSERT_TRUE(take_away(middle(), kPage));
  ibv_sge s{Odp::at(middle()), 64, odp->lkey};
  ibv_send_wr w = one_sge_wr(IBV_WR_SEND, &s);
  ASSERT_EQ(post_wr(qp[0], w), 0);
  const auto wcs = poll_n(cq, 1);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, IBV_WC_LOC_PROT_ERR);
}

// What the two processes of the direct-placement test tell each other through their pipes.
struct Peer {
  std::uint32_t qpn = 0, rkey = 0;
  std::uint64_t addr = 0;
  ibv_gid gid{};
};

// One RC QP of `ctx`, kept as the helper's QP 0 (which connect_to moves to RTS).
ibv_qp* rc_qp(ibv_context* ctx, ibv_pd* pd, ibv_cq* cq, Loop& helper) {
  ibv_qp_init_attr a{};
  a.send_cq = a.recv_cq = cq;
  a.qp_type = IBV_QPT_RC;
  a.cap.max_send_wr = a.cap.max_recv_wr = 8;
  a.cap.max_send_sge = a.cap.max_recv_sge = 1;
  helper.ctx = ctx;
  helper.qp[0] = ibv_create_qp(pd, &a);
  helper.qp[1] = nullptr;
  return helper.qp[0];
}

// The helper's QP 0 to RTS towards `to`'s QP, remote write allowed.
bool connect_to(Loop& h, const Peer& to) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
  if (ibv_modify_qp(h.qp[0], &a,
                    IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) {
    return false;
  }
  a = {};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_1024;
  a.dest_qp_num = to.qpn;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 1;
  a.ah_attr.is_global = 1;
  a.ah_attr.grh.dgid = to.gid;
  a.ah_attr.grh.sgid_index = 1;
  a.ah_attr.grh.hop_limit = 64;
  a.ah_attr.port_num = 1;
  if (ibv_modify_qp(h.qp[0], &a,
                    IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                        IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)) {
    return false;
  }
  return h.rts(0);
}

// The receiving process: an ODP region over three guard pages; unmaps the middle one when
// told ('u'), and at the end ('q') exits 0 if only the first 512 bytes changed.
[[noreturn]] void odp_receiver(int in, int out) {
  ibv_context* ctx = open_by_name("softroce0");
  ibv_pd* pd = ctx ? ibv_alloc_pd(ctx) : nullptr;
  ibv_cq* cq = pd ? ibv_create_cq(ctx, 16, nullptr, nullptr, 0) : nullptr;
  void* p = mmap(nullptr, 3 * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (!cq || p == MAP_FAILED) _exit(10);
  auto* pages = static_cast<std::uint8_t*>(p);
  std::memset(pages, kGuard, 3 * kPage);
  ibv_mr* mr = ibv_reg_mr(pd, pages, 3 * kPage,
                          IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_ON_DEMAND);
  Loop h;
  Peer me, them;
  if (!mr || !rc_qp(ctx, pd, cq, h) || ibv_query_gid(ctx, 1, 1, &me.gid)) _exit(11);
  me.qpn = h.qp[0]->qp_num;
  me.rkey = mr->rkey;
  me.addr = Odp::at(pages);
  if (write(out, &me, sizeof me) != sizeof me || read(in, &them, sizeof them) != sizeof them ||
      !connect_to(h, them) || write(out, "r", 1) != 1) {
    _exit(12);
  }
  for (char c = 0; read(in, &c, 1) == 1;) {
    if (c == 'u') {
      if (munmap(pages + kPage, kPage) != 0 || write(out, "k", 1) != 1) _exit(13);
    } else if (c == 'q') {
      for (std::size_t i = 512; i < kPage; ++i) {
        if (pages[i] != kGuard || pages[2 * kPage + i] != kGuard) _exit(14);
      }
      _exit(0);
    }
  }
  _exit(15);
}

// Two processes of one host: the sender writes RDMA WRITEs into the receiver's ODP region
// itself (direct placement, docs/sharing-a-host.md) until the receiver unmaps the target page;
// then the write goes by packet and is refused, and the receiver lives on.
TEST(OdpDirectPlacement, AWriteIntoAnUnmappedPageOfAnotherProcessIsRefused) {
  int down[2], up[2];
  ASSERT_EQ(pipe(down), 0);
  ASSERT_EQ(pipe(up), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(down[1]);
    close(up[0]);
    odp_receiver(down[0], up[1]);
  }
  close(down[0]);
  close(up[1]);
  Loop l;
  l.mr_access = IBV_ACCESS_LOCAL_WRITE;
  ASSERT_TRUE(l.open(open_by_name("softroce0")));
  Peer me, them;
  ASSERT_EQ(read(up[0], &them, sizeof them), static_cast<ssize_t>(sizeof them));
  ASSERT_EQ(ibv_query_gid(l.ctx, 1, 1, &me.gid), 0);
  me.qpn = l.qp[0]->qp_num;
  ASSERT_EQ(write(down[1], &me, sizeof me), static_cast<ssize_t>(sizeof me));
  ASSERT_TRUE(connect_to(l, them));
  char c = 0;
  ASSERT_EQ(read(up[0], &c, 1), 1);
  const long long placed = counter("placed_sent");
  auto write_to = [&](std::uint64_t remote) {
    ibv_sge s{Odp::at(l.buf.data()), 512, l.mr->lkey};
    return complete_one(l.qp[0], l.cq, rdma_wr(IBV_WR_RDMA_WRITE, &s, remote, them.rkey));
  };
  // Until the host-local ring is up the writes go by packet; then they are placed.
  EXPECT_TRUE(softrdma::test::wait_until(
      [&] { return write_to(them.addr) == IBV_WC_SUCCESS && counter("placed_sent") > placed; }));
  ASSERT_EQ(write(down[1], "u", 1), 1);
  ASSERT_EQ(read(up[0], &c, 1), 1);
  EXPECT_EQ(write_to(them.addr + kPage), IBV_WC_REM_ACCESS_ERR);
  int status = 0;
  EXPECT_EQ(waitpid(child, &status, WNOHANG), 0);  // the receiver is alive
  EXPECT_EQ(counter("resp_remote_access_errors", child), 1);
  EXPECT_EQ(counter("odp_faults", child), 1);
  EXPECT_EQ(counter("placed_refused"), 0);  // EFAULT does not stop placement on the link
  ASSERT_EQ(write(down[1], "q", 1), 1);
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  close(down[1]);
  close(up[0]);
  l.close();
}

// The UD pair, the receive buffers in an ODP region over the guard pages.
struct OdpUd : OdpPair<IBV_QPT_UD> {
  ibv_mr* odp = nullptr;
  std::vector<std::uint8_t> src = std::vector<std::uint8_t>(1000);
  ibv_mr* src_mr = nullptr;

  void SetUp() override {
    OdpPair::SetUp();
    if (HasFatalFailure()) return;
    odp = reg(pages, 3 * kPage, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ON_DEMAND);
    src_mr = reg(src.data(), src.size(), IBV_ACCESS_ON_DEMAND);
    ASSERT_TRUE(odp && src_mr);
    for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<std::uint8_t>(i * 7 + 1);
  }
  // A receive of 40 + 1000 bytes at `at` on QP 1, then a 1000-byte datagram from QP 0; the two
  // completions' statuses, the receive's first.
  std::vector<int> exchange(std::uint8_t* at) {
    ibv_sge r{Odp::at(at), 1040, odp->lkey};
    ibv_recv_wr rw{};
    rw.wr_id = 1;
    rw.sg_list = &r;
    rw.num_sge = 1;
    ibv_recv_wr* rbad = nullptr;
    ibv_sge s{Odp::at(src.data()), 1000, src_mr->lkey};
    ibv_send_wr w = one_sge_wr(IBV_WR_SEND, &s, 2);
    w.wr.ud.ah = ah;
    w.wr.ud.remote_qpn = qp[1]->qp_num;
    w.wr.ud.remote_qkey = kQkey;
    if (ibv_post_recv(qp[1], &rw, &rbad) || post_wr(qp[0], w)) return {};
    auto wcs = poll_n(cq, 2);
    std::vector<int> out(2, -1);
    for (const ibv_wc& wc : wcs) out[wc.wr_id == 1 ? 0 : 1] = wc.status;
    return out;
  }
};

TEST_F(OdpUd, DatagramsGoFromAndIntoOdpRegions) {
  EXPECT_EQ(exchange(pages + kPage), (std::vector<int>{IBV_WC_SUCCESS, IBV_WC_SUCCESS}));
  EXPECT_EQ(std::memcmp(pages + kPage + 40, src.data(), 1000), 0);
  EXPECT_EQ(pages[kPage - 1], kGuard);
  EXPECT_EQ(pages[kPage + 1040], kGuard);
}

TEST_F(OdpUd, AReceiveIntoUnmappedMemoryIsALocalProtectionError) {
  const long long faults = counter("odp_faults");
  ASSERT_TRUE(take_away(pages + kPage, kPage));
  EXPECT_EQ(exchange(pages + kPage), (std::vector<int>{IBV_WC_LOC_PROT_ERR, IBV_WC_SUCCESS}));
  EXPECT_EQ(counter("odp_faults"), faults + 1);
  EXPECT_TRUE(guards_intact());
  // The QP goes on: the next datagram lands in mapped memory.
  EXPECT_EQ(exchange(pages), (std::vector<int>{IBV_WC_SUCCESS, IBV_WC_SUCCESS}));
  EXPECT_EQ(std::memcmp(pages + 40, src.data(), 1000), 0);
}

}  // namespace
