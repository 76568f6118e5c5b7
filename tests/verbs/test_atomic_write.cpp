// ATOMIC WRITE and FLUSH (IBTA 1.5 annex A19) through the drop-in libibverbs, on softroce0: an
// atomic write stores its 8 bytes and nothing else, a misaligned one or one through a bad key
// writes nothing and fails on both sides, a FLUSH completes after the writes before it and
// needs the region's FLUSH access. Guard bytes surround every target. softiwarp0 has neither
// operation (RFC 7306 defines no such thing) and says so.
#include <gtest/gtest.h>
#include <infiniband/verbs.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "../../verbs/ibta15.h"
#include "verbs_helpers.h"

namespace {

using softrdma::verbs::kIbvAccessFlushGlobal;
using softrdma::verbs::kIbvAccessFlushPersistent;
using softrdma::verbs::kIbvDeviceAtomicWrite;
using softrdma::verbs::kIbvDeviceFlushGlobal;
using softrdma::verbs::kIbvDeviceFlushPersistent;
using softrdma::verbs::kIbvFlushGlobal;
using softrdma::verbs::kIbvFlushMr;
using softrdma::verbs::kIbvFlushPersistent;
using softrdma::verbs::kIbvFlushRange;
using softrdma::verbs::kIbvQpExWithFlush;
using softrdma::verbs::kIbvWcFlush;
using softrdma::verbs::kIbvWrFlush;
using namespace softrdma::verbs::test;

constexpr std::size_t kTarget = 65536;         // the second half of the buffer: QP 1's memory
constexpr std::size_t kSpot = kTarget + 4096;  // 8-byte aligned (the buffer is)
constexpr std::uint8_t kGuard = 0xA5;
constexpr std::uint64_t kValue = 0x0123456789ABCDEFull;

struct Placement : ::testing::Test {
  Loop l;
  void SetUp() override {
    l.mr_access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | kIbvAccessFlushGlobal;
    l.qp_access = IBV_ACCESS_REMOTE_WRITE;
    ASSERT_TRUE(l.open(open_by_name("softroce0")));
    ASSERT_TRUE(l.connect());
    ASSERT_EQ(reinterpret_cast<std::uintptr_t>(l.buf.data() + kSpot) & 7, 0u);
    std::fill(l.buf.begin() + kTarget, l.buf.end(), kGuard);
  }
  void TearDown() override { l.close(); }

  std::uint64_t addr(std::size_t off) {
    return reinterpret_cast<std::uint64_t>(l.buf.data() + off);
  }
  // Every byte of QP 1's half outside [from, from + len) is still a guard byte.
  bool guards_intact(std::size_t from, std::size_t len) {
    for (std::size_t i = kTarget; i < l.buf.size(); ++i) {
      if ((i < from || i >= from + len) && l.buf[i] != kGuard) return false;
    }
    return true;
  }
  bool untouched() { return guards_intact(0, 0); }
  std::uint64_t at(std::size_t off) {
    std::uint64_t v;
    std::memcpy(&v, l.buf.data() + off, 8);
    return v;
  }

  // One work request built through ibv_qp_ex on QP 0, signaled; its completion.
  template <class Build>
  ibv_wc one_ex(Build build) {
    ibv_qp_ex* qx = ibv_qp_to_qp_ex(l.qp[0]);
    ibv_wr_start(qx);
    qx->wr_id = 77;
    qx->wr_flags = IBV_SEND_SIGNALED;
    build(qx);
    EXPECT_EQ(ibv_wr_complete(qx), 0);
    const auto wcs = poll_n(l.cq, 1);
    ibv_wc none{};
    none.status = IBV_WC_GENERAL_ERR;  // no completion came
    return wcs.size() == 1 ? wcs[0] : none;
  }
  ibv_wc atomic_write(std::uint32_t rkey, std::uint64_t remote, std::uint64_t value) {
    return one_ex([&](ibv_qp_ex* qx) { ibv_wr_atomic_write(qx, rkey, remote, &value); });
  }
  ibv_wc flush(std::uint32_t rkey, std::uint64_t remote, std::size_t len, std::uint8_t type,
               std::uint8_t level) {
    return one_ex(
        [&](ibv_qp_ex* qx) { softrdma::verbs::wr_flush(qx, rkey, remote, len, type, level); });
  }
  ibv_qp_state state(int q) {
    ibv_qp_attr a{};
    ibv_qp_init_attr ia{};
    EXPECT_EQ(ibv_query_qp(l.qp[q], &a, IBV_QP_STATE, &ia), 0);
    return a.qp_state;
  }
};

TEST(PlacementDevice, SoftroceReportsAtomicWriteAndGlobalFlushOnly) {
  ibv_context* roce = open_by_name("softroce0");
  ASSERT_NE(roce, nullptr);
  ibv_device_attr_ex a{};
  ASSERT_EQ(ibv_query_device_ex(roce, nullptr, &a), 0);
  EXPECT_TRUE(a.device_cap_flags_ex & kIbvDeviceAtomicWrite);
  EXPECT_TRUE(a.device_cap_flags_ex & kIbvDeviceFlushGlobal);
  EXPECT_FALSE(a.device_cap_flags_ex & kIbvDeviceFlushPersistent);
  // Persistence cannot be promised for process memory: a region asking for it is refused.
  ibv_pd* pd = ibv_alloc_pd(roce);
  std::vector<std::uint8_t> mem(4096);
  errno = 0;
  EXPECT_EQ(ibv_reg_mr(pd, mem.data(), mem.size(),
                       static_cast<int>(IBV_ACCESS_LOCAL_WRITE | kIbvAccessFlushPersistent)),
            nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
  ibv_mr* mr = ibv_reg_mr(pd, mem.data(), mem.size(),
                          static_cast<int>(IBV_ACCESS_LOCAL_WRITE | kIbvAccessFlushGlobal));
  ASSERT_NE(mr, nullptr);
  // Nor can it be had by re-registering.
  EXPECT_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr, 0,
                         static_cast<int>(IBV_ACCESS_LOCAL_WRITE | kIbvAccessFlushPersistent)),
            IBV_REREG_MR_ERR_INPUT);
  ibv_dereg_mr(mr);
  ibv_dealloc_pd(pd);
  ibv_close_device(roce);

  ibv_context* iw = open_by_name("softiwarp0");
  ASSERT_NE(iw, nullptr);
  ASSERT_EQ(ibv_query_device_ex(iw, nullptr, &a), 0);
  EXPECT_FALSE(a.device_cap_flags_ex & (kIbvDeviceAtomicWrite | kIbvDeviceFlushGlobal));
  pd = ibv_alloc_pd(iw);
  errno = 0;
  EXPECT_EQ(ibv_reg_mr(pd, mem.data(), mem.size(),
                       static_cast<int>(IBV_ACCESS_LOCAL_WRITE | kIbvAccessFlushGlobal)),
            nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
  ibv_cq* cq = ibv_create_cq(iw, 4, nullptr, nullptr, 0);
  for (std::uint64_t op : {std::uint64_t{IBV_QP_EX_WITH_ATOMIC_WRITE}, kIbvQpExWithFlush}) {
    ibv_qp_init_attr_ex qa{};
    qa.qp_type = IBV_QPT_RC;
    qa.send_cq = qa.recv_cq = cq;
    qa.cap.max_send_wr = qa.cap.max_recv_wr = 4;
    qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
    qa.pd = pd;
    qa.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
    qa.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | op;
    errno = 0;
    EXPECT_EQ(ibv_create_qp_ex(iw, &qa), nullptr);
    EXPECT_EQ(errno, EOPNOTSUPP);
  }
  ibv_destroy_cq(cq);
  ibv_dealloc_pd(pd);
  ibv_close_device(iw);
}

TEST_F(Placement, AnAtomicWriteStoresItsEightBytesAndNothingElse) {
  const ibv_wc wc = atomic_write(l.mr->rkey, addr(kSpot), kValue);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc.opcode, IBV_WC_ATOMIC_WRITE);
  EXPECT_EQ(wc.wr_id, 77u);
  EXPECT_EQ(wc.byte_len, 8u);
  EXPECT_EQ(at(kSpot), kValue);  // the requester's bytes as they were, no byte swap
  EXPECT_TRUE(guards_intact(kSpot, 8));

  // Through ibv_post_send: the 8 bytes come from the SGE.
  std::memcpy(l.buf.data(), &kValue, 8);
  l.buf[0] ^= 0xFF;
  ibv_sge s{addr(0), 8, l.mr->lkey};
  ibv_send_wr w = rdma_wr(IBV_WR_ATOMIC_WRITE, &s, addr(kSpot + 8), l.mr->rkey, 78);
  ASSERT_EQ(post_wr(l.qp[0], w), 0);
  const auto wcs = poll_n(l.cq, 1);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(wcs[0].opcode, IBV_WC_ATOMIC_WRITE);
  EXPECT_EQ(std::memcmp(l.buf.data() + kSpot + 8, l.buf.data(), 8), 0);
  EXPECT_TRUE(guards_intact(kSpot, 16));

  // Not 8 bytes: refused at post.
  s.length = 4;
  EXPECT_EQ(post_wr(l.qp[0], w), EINVAL);
}

TEST_F(Placement, AMisalignedAtomicWriteFailsOnBothSidesAndWritesNothing) {
  ASSERT_EQ(l.post_recv(1, 9, kTarget, 64), 0);
  // The requester's completion, and the responder's: it NAKed the request as invalid and went
  // to the error state, which flushed its receive. (Both QPs share the CQ: in either order.)
  std::uint64_t value = kValue;
  ibv_qp_ex* qx = ibv_qp_to_qp_ex(l.qp[0]);
  ibv_wr_start(qx);
  qx->wr_id = 77;
  qx->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_atomic_write(qx, l.mr->rkey, addr(kSpot + 4), &value);
  ASSERT_EQ(ibv_wr_complete(qx), 0);
  auto wcs = poll_n(l.cq, 2);
  ASSERT_EQ(wcs.size(), 2u);
  std::sort(wcs.begin(), wcs.end(),
            [](const ibv_wc& a, const ibv_wc& b) { return a.wr_id < b.wr_id; });
  EXPECT_EQ(wcs[0].wr_id, 9u);
  EXPECT_EQ(wcs[0].status, IBV_WC_WR_FLUSH_ERR);
  EXPECT_EQ(wcs[1].wr_id, 77u);
  EXPECT_EQ(wcs[1].status, IBV_WC_REM_INV_REQ_ERR);
  EXPECT_EQ(state(1), IBV_QPS_ERR);
  EXPECT_EQ(state(0), IBV_QPS_ERR);
  // (The receive buffer at kTarget was never written either.)
  EXPECT_TRUE(untouched());
}

TEST_F(Placement, AnAtomicWriteThroughABadKeyOrWithoutRemoteWriteIsRefused) {
  EXPECT_EQ(atomic_write(l.mr->rkey ^ 0x1000, addr(kSpot), kValue).status, IBV_WC_REM_ACCESS_ERR);
  EXPECT_TRUE(untouched());
  l.close();

  // A region open to remote reads only.
  l = Loop{};
  l.mr_access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ;
  l.qp_access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  ASSERT_TRUE(l.open(open_by_name("softroce0")));
  ASSERT_TRUE(l.connect());
  std::fill(l.buf.begin() + kTarget, l.buf.end(), kGuard);
  EXPECT_EQ(atomic_write(l.mr->rkey, addr(kSpot), kValue).status, IBV_WC_REM_ACCESS_ERR);
  EXPECT_TRUE(untouched());
  EXPECT_EQ(state(1), IBV_QPS_ERR);
}

TEST_F(Placement, AFlushCompletesAfterTheWritesBeforeIt) {
  // Three 4 KiB writes, unsignaled, then a FLUSH of their range: its completion is the only
  // one, and it comes with every byte in place.
  for (std::size_t i = 0; i < 3 * 4096; ++i) l.buf[i] = static_cast<std::uint8_t>(i * 13 + 5);
  for (int i = 0; i < 3; ++i) {
    ibv_sge s{addr(static_cast<std::size_t>(i) * 4096), 4096, l.mr->lkey};
    ibv_send_wr w = rdma_wr(IBV_WR_RDMA_WRITE, &s, addr(kSpot + static_cast<std::size_t>(i) * 4096),
                            l.mr->rkey, 10 + static_cast<std::uint64_t>(i), 0);
    ASSERT_EQ(post_wr(l.qp[0], w), 0);
  }
  const ibv_wc wc = flush(l.mr->rkey, addr(kSpot), 3 * 4096, kIbvFlushGlobal, kIbvFlushRange);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc.opcode, static_cast<ibv_wc_opcode>(kIbvWcFlush));
  EXPECT_EQ(wc.wr_id, 77u);
  EXPECT_EQ(wc.byte_len, 3u * 4096);
  EXPECT_EQ(std::memcmp(l.buf.data() + kSpot, l.buf.data(), 3 * 4096), 0);
  EXPECT_TRUE(guards_intact(kSpot, 3 * 4096));

  // The whole region (selectivity level 1): its address and length are not looked at.
  EXPECT_EQ(flush(l.mr->rkey, 0, 0, kIbvFlushGlobal, kIbvFlushMr).status, IBV_WC_SUCCESS);
  // A range outside the region: an access error.
  EXPECT_EQ(flush(l.mr->rkey, addr(l.buf.size() - 8), 64, kIbvFlushGlobal, kIbvFlushRange).status,
            IBV_WC_REM_ACCESS_ERR);
}

TEST_F(Placement, AFlushNeedsItsAccessFlag) {
  // Persistence: no region can have the access (refused at registration), so the responder
  // refuses it.
  EXPECT_EQ(flush(l.mr->rkey, addr(kSpot), 64, kIbvFlushPersistent, kIbvFlushRange).status,
            IBV_WC_REM_ACCESS_ERR);
  EXPECT_EQ(state(1), IBV_QPS_ERR);
  l.close();

  // A region without IBV_ACCESS_FLUSH_GLOBAL.
  l = Loop{};
  l.mr_access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
  ASSERT_TRUE(l.open(open_by_name("softroce0")));
  ASSERT_TRUE(l.connect());
  EXPECT_EQ(flush(l.mr->rkey, addr(kSpot), 64, kIbvFlushGlobal, kIbvFlushRange).status,
            IBV_WC_REM_ACCESS_ERR);
}

TEST_F(Placement, MalformedFlushesAreRefusedAtPost) {
  ibv_send_wr w{};
  w.opcode = static_cast<ibv_wr_opcode>(kIbvWrFlush);
  w.wr.rdma.rkey = l.mr->rkey;
  EXPECT_EQ(post_wr(l.qp[0], w), EINVAL);  // ibv_wr_flush only
  ibv_qp_ex* qx = ibv_qp_to_qp_ex(l.qp[0]);
  for (std::uint8_t type : {std::uint8_t{0}, std::uint8_t{4}}) {
    ibv_wr_start(qx);
    softrdma::verbs::wr_flush(qx, l.mr->rkey, addr(kSpot), 64, type, kIbvFlushRange);
    EXPECT_EQ(ibv_wr_complete(qx), EINVAL);
  }
  ibv_wr_start(qx);
  softrdma::verbs::wr_flush(qx, l.mr->rkey, addr(kSpot), 64, kIbvFlushGlobal, 2);
  EXPECT_EQ(ibv_wr_complete(qx), EINVAL);
  EXPECT_EQ(state(0), IBV_QPS_RTS);
}

}  // namespace
