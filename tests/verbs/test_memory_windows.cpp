// Memory windows through the drop-in libibverbs (IBTA 10.6.7): type 1 bound by ibv_bind_mw,
// type 2 bound by a BIND_MW work request to one QP and freed by LOCAL_INV or SEND_WITH_INV.
// A remote access through a window reaches the bound part of its region and nothing else;
// every refused access leaves the guard bytes around the window untouched.
#include <gtest/gtest.h>
#include <infiniband/verbs.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "verbs_helpers.h"

namespace {

using namespace softrdma::verbs::test;

constexpr std::size_t kTarget = 65536;  // the second half of the buffer: QP 1's memory
constexpr std::size_t kWinOff = kTarget + 8192, kWinLen = 4096;
constexpr std::uint8_t kGuard = 0xA5;

// A connected loop whose region allows binding windows but no remote access of its own.
struct Windows : ::testing::Test {
  Loop l;
  void SetUp() override {
    l.mr_access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND;
    l.qp_access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    ASSERT_TRUE(l.open(open_by_name("softroce0")));
    ASSERT_TRUE(l.connect());
    std::fill(l.buf.begin() + kTarget, l.buf.end(), kGuard);
    for (std::size_t i = 0; i < kWinLen; ++i) l.buf[i] = static_cast<std::uint8_t>(i * 7 + 1);
  }
  void TearDown() override { l.close(); }

  std::uint64_t addr(std::size_t off) {
    return reinterpret_cast<std::uint64_t>(l.buf.data() + off);
  }
  ibv_mw_bind_info info(std::size_t off, std::size_t len, unsigned access) {
    return ibv_mw_bind_info{l.mr, addr(off), len, access};
  }

  // One signaled WR on QP `q`; its completion's status (or -1 when none came).
  int one(int q, const ibv_send_wr& w) { return complete_one(l.qp[q], l.cq, w); }
  // RDMA WRITE of `len` bytes from the start of QP 0's half to `remote` through `rkey`.
  int write(std::uint32_t rkey, std::uint64_t remote, std::uint32_t len) {
    ibv_sge s{addr(0), len, l.mr->lkey};
    ibv_send_wr w = rdma_wr(IBV_WR_RDMA_WRITE, &s, remote, rkey, 1, 0);
    return one(0, w);
  }
  // Type 2: binds `mw` with key `rkey` on QP `q`.
  int bind2(int q, ibv_mw* mw, std::uint32_t rkey, const ibv_mw_bind_info& bi) {
    ibv_send_wr w{};
    w.wr_id = 2;
    w.opcode = IBV_WR_BIND_MW;
    w.bind_mw.mw = mw;
    w.bind_mw.rkey = rkey;
    w.bind_mw.bind_info = bi;
    return one(q, w);
  }
  // Type 1: binds `mw` on QP 1 and waits for the bind's completion (a bind posted is not yet a
  // bind done: a remote access may overtake it). Its status, or -1 when none came.
  int bind1(ibv_mw* mw, const ibv_mw_bind_info& bi) {
    ibv_mw_bind b{};
    b.wr_id = 1;
    b.send_flags = IBV_SEND_SIGNALED;
    b.bind_info = bi;
    if (ibv_bind_mw(l.qp[1], mw, &b) != 0) return -1;
    const auto wcs = poll_n(l.cq, 1);
    return wcs.size() == 1 ? static_cast<int>(wcs[0].status) : -1;
  }
  bool window_holds_data() {
    return std::memcmp(l.buf.data() + kWinOff, l.buf.data(), kWinLen) == 0;
  }
  // Every byte of QP 1's half outside [from, from + len) is still a guard byte.
  bool guards_intact(std::size_t from, std::size_t len) {
    for (std::size_t i = kTarget; i < l.buf.size(); ++i) {
      if ((i < from || i >= from + len) && l.buf[i] != kGuard) return false;
    }
    return true;
  }
  bool untouched() { return guards_intact(0, 0); }
};

TEST(MemoryWindowsDevice, SoftroceOffersBothTypesAndSoftiwarpNone) {
  ibv_context* roce = open_by_name("softroce0");
  ASSERT_NE(roce, nullptr);
  ibv_device_attr a{};
  ASSERT_EQ(ibv_query_device(roce, &a), 0);
  EXPECT_GT(a.max_mw, 0);
  EXPECT_TRUE(a.device_cap_flags & IBV_DEVICE_MEM_WINDOW);
  EXPECT_TRUE(a.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B);
  EXPECT_TRUE(a.device_cap_flags & IBV_DEVICE_MEM_MGT_EXTENSIONS);
  ibv_pd* pd = ibv_alloc_pd(roce);
  ibv_mw* mw = ibv_alloc_mw(pd, IBV_MW_TYPE_1);
  ASSERT_NE(mw, nullptr);
  EXPECT_EQ(mw->pd, pd);
  EXPECT_EQ(mw->handle, mw->rkey >> 8);
  EXPECT_EQ(ibv_dealloc_pd(pd), EBUSY);  // the window uses it
  EXPECT_EQ(ibv_dealloc_mw(mw), 0);
  EXPECT_EQ(ibv_dealloc_pd(pd), 0);
  ibv_close_device(roce);

  ibv_context* iw = open_by_name("softiwarp0");
  ASSERT_NE(iw, nullptr);
  ASSERT_EQ(ibv_query_device(iw, &a), 0);
  EXPECT_EQ(a.max_mw, 0);
  pd = ibv_alloc_pd(iw);
  errno = 0;
  EXPECT_EQ(ibv_alloc_mw(pd, IBV_MW_TYPE_1), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
  ibv_dealloc_pd(pd);
  ibv_close_device(iw);
}

TEST_F(Windows, Type1OpensTheBoundPartOfItsRegionOnly) {
  ibv_mw* mw = ibv_alloc_mw(l.pd, IBV_MW_TYPE_1);
  ASSERT_NE(mw, nullptr);
  const std::uint32_t unbound = mw->rkey;
  ibv_mw_bind b{};
  b.wr_id = 5;
  b.send_flags = IBV_SEND_SIGNALED;
  b.bind_info = info(kWinOff, kWinLen, IBV_ACCESS_REMOTE_WRITE);
  ASSERT_EQ(ibv_bind_mw(l.qp[1], mw, &b), 0);
  const auto wcs = poll_n(l.cq, 1);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(wcs[0].opcode, IBV_WC_BIND_MW);
  EXPECT_EQ(wcs[0].wr_id, 5u);
  EXPECT_EQ(mw->rkey, ibv_inc_rkey(unbound));  // the key moved on; its handle stayed
  EXPECT_EQ(mw->rkey >> 8, unbound >> 8);
  // The whole window, through its key.
  EXPECT_EQ(write(mw->rkey, addr(kWinOff), kWinLen), IBV_WC_SUCCESS);
  EXPECT_TRUE(window_holds_data());
  EXPECT_TRUE(guards_intact(kWinOff, kWinLen));
  // One byte past its end: refused, and nothing of it written.
  std::fill(l.buf.begin() + kTarget, l.buf.end(), kGuard);
  EXPECT_EQ(write(mw->rkey, addr(kWinOff + 1), kWinLen), IBV_WC_REM_ACCESS_ERR);
  EXPECT_TRUE(untouched());
  EXPECT_EQ(ibv_dealloc_mw(mw), 0);
}

TEST_F(Windows, Type1RefusesItsOldKey) {
  ibv_mw* mw = ibv_alloc_mw(l.pd, IBV_MW_TYPE_1);
  ASSERT_NE(mw, nullptr);
  const std::uint32_t old_key = mw->rkey;
  ASSERT_EQ(bind1(mw, info(kWinOff, kWinLen, IBV_ACCESS_REMOTE_WRITE)), IBV_WC_SUCCESS);
  EXPECT_EQ(write(old_key, addr(kWinOff), 64), IBV_WC_REM_ACCESS_ERR);
  EXPECT_TRUE(untouched());
  ibv_dealloc_mw(mw);
}

TEST_F(Windows, TheRegionsOwnKeyHasNoRemoteAccess) {
  EXPECT_EQ(write(l.mr->rkey, addr(kWinOff), 64), IBV_WC_REM_ACCESS_ERR);
  EXPECT_TRUE(untouched());
}

TEST_F(Windows, Type1UnboundByABindOfLengthZero) {
  ibv_mw* mw = ibv_alloc_mw(l.pd, IBV_MW_TYPE_1);
  ASSERT_NE(mw, nullptr);
  ASSERT_EQ(bind1(mw, info(kWinOff, kWinLen, IBV_ACCESS_REMOTE_WRITE)), IBV_WC_SUCCESS);
  EXPECT_EQ(ibv_dereg_mr(l.mr), EBUSY);  // a window is bound to it
  ibv_mw_bind b{};
  b.bind_info = ibv_mw_bind_info{nullptr, 0, 0, 0};
  b.send_flags = IBV_SEND_SIGNALED;
  ASSERT_EQ(ibv_bind_mw(l.qp[1], mw, &b), 0);
  const auto wcs = poll_n(l.cq, 1);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(write(mw->rkey, addr(kWinOff), 64), IBV_WC_REM_ACCESS_ERR);
  EXPECT_TRUE(untouched());
  ibv_dealloc_mw(mw);
}

TEST_F(Windows, Type2InvalidatedByLocalInvalidate) {
  ibv_mw* mw = ibv_alloc_mw(l.pd, IBV_MW_TYPE_2);
  ASSERT_NE(mw, nullptr);
  const std::uint32_t key = ibv_inc_rkey(mw->rkey);
  ASSERT_EQ(bind2(1, mw, key, info(kWinOff, kWinLen, IBV_ACCESS_REMOTE_WRITE)), IBV_WC_SUCCESS);
  EXPECT_EQ(write(key, addr(kWinOff), kWinLen), IBV_WC_SUCCESS);
  EXPECT_TRUE(window_holds_data());
  ibv_send_wr inv{};
  inv.wr_id = 3;
  inv.opcode = IBV_WR_LOCAL_INV;
  inv.invalidate_rkey = key;
  ASSERT_EQ(one(1, inv), IBV_WC_SUCCESS);
  std::fill(l.buf.begin() + kTarget, l.buf.end(), kGuard);
  EXPECT_EQ(write(key, addr(kWinOff), kWinLen), IBV_WC_REM_ACCESS_ERR);
  EXPECT_TRUE(untouched());
  ibv_dealloc_mw(mw);
}

TEST_F(Windows, Type2InvalidatedBySendWithInvalidate) {
  ibv_mw* mw = ibv_alloc_mw(l.pd, IBV_MW_TYPE_2);
  ASSERT_NE(mw, nullptr);
  const std::uint32_t key = ibv_inc_rkey(mw->rkey);
  ASSERT_EQ(bind2(1, mw, key, info(kWinOff, kWinLen, IBV_ACCESS_REMOTE_WRITE)), IBV_WC_SUCCESS);
  ASSERT_EQ(l.post_recv(1, 9, kTarget, 64), 0);
  ibv_sge s{addr(0), 64, l.mr->lkey};
  ibv_send_wr w = one_sge_wr(IBV_WR_SEND_WITH_INV, &s, 4);
  w.invalidate_rkey = key;
  ASSERT_EQ(post_wr(l.qp[0], w), 0);
  const auto wcs = poll_n(l.cq, 2);
  ASSERT_EQ(wcs.size(), 2u);
  bool saw_recv = false;
  for (const ibv_wc& wc : wcs) {
    EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
    if (wc.opcode == IBV_WC_RECV) {
      saw_recv = true;
      EXPECT_TRUE(wc.wc_flags & IBV_WC_WITH_INV);
      EXPECT_EQ(wc.invalidated_rkey, key);
    }
  }
  EXPECT_TRUE(saw_recv);
  std::fill(l.buf.begin() + kTarget, l.buf.end(), kGuard);
  EXPECT_EQ(write(key, addr(kWinOff), kWinLen), IBV_WC_REM_ACCESS_ERR);
  EXPECT_TRUE(untouched());
  ibv_dealloc_mw(mw);
}

TEST_F(Windows, Type2ServesOnlyTheQpItIsBoundTo) {
  ibv_mw* mw = ibv_alloc_mw(l.pd, IBV_MW_TYPE_2);
  ASSERT_NE(mw, nullptr);
  const std::uint32_t key = ibv_inc_rkey(mw->rkey);
  // Bound to QP 0; QP 0's write arrives at QP 1, which the window does not serve.
  ASSERT_EQ(bind2(0, mw, key, info(kWinOff, kWinLen, IBV_ACCESS_REMOTE_WRITE)), IBV_WC_SUCCESS);
  EXPECT_EQ(write(key, addr(kWinOff), 64), IBV_WC_REM_ACCESS_ERR);
  EXPECT_TRUE(untouched());
  ibv_dealloc_mw(mw);
}

TEST_F(Windows, BindsThatBreakTheRulesFailWithMwBindError) {
  // A window past the end of its region.
  ibv_mw* mw = ibv_alloc_mw(l.pd, IBV_MW_TYPE_2);
  ASSERT_NE(mw, nullptr);
  EXPECT_EQ(
      bind2(1, mw, ibv_inc_rkey(mw->rkey), info(l.buf.size() - 16, 32, IBV_ACCESS_REMOTE_WRITE)),
      IBV_WC_MW_BIND_ERR);
  ibv_dealloc_mw(mw);
}

TEST_F(Windows, AType2WindowIsBoundOnceUntilInvalidated) {
  ibv_mw* mw = ibv_alloc_mw(l.pd, IBV_MW_TYPE_2);
  ASSERT_NE(mw, nullptr);
  const std::uint32_t key = ibv_inc_rkey(mw->rkey);
  ASSERT_EQ(bind2(1, mw, key, info(kWinOff, kWinLen, IBV_ACCESS_REMOTE_WRITE)), IBV_WC_SUCCESS);
  EXPECT_EQ(bind2(1, mw, ibv_inc_rkey(key), info(kTarget, kWinLen, IBV_ACCESS_REMOTE_WRITE)),
            IBV_WC_MW_BIND_ERR);
  ibv_dealloc_mw(mw);
}

TEST_F(Windows, AWindowAllowsOnlyTheAccessItWasBoundWith) {
  ibv_mw* mw = ibv_alloc_mw(l.pd, IBV_MW_TYPE_1);
  ASSERT_NE(mw, nullptr);
  ASSERT_EQ(bind1(mw, info(kWinOff, kWinLen, IBV_ACCESS_REMOTE_READ)), IBV_WC_SUCCESS);
  // Read: allowed; the bytes come from the window.
  ibv_sge s{addr(0), 64, l.mr->lkey};
  ibv_send_wr r = rdma_wr(IBV_WR_RDMA_READ, &s, addr(kWinOff), mw->rkey, 0, 0);
  ASSERT_EQ(one(0, r), IBV_WC_SUCCESS);
  EXPECT_EQ(l.buf[0], kGuard);
  // Write: not allowed.
  for (std::size_t i = 0; i < 64; ++i) l.buf[i] = 1;
  EXPECT_EQ(write(mw->rkey, addr(kWinOff), 64), IBV_WC_REM_ACCESS_ERR);
  EXPECT_TRUE(untouched());
  ibv_dealloc_mw(mw);
}

TEST_F(Windows, ARegionWithoutMwBindAccessCannotBeBound) {
  ibv_mr* plain = ibv_reg_mr(l.pd, l.buf.data() + kTarget, 4096, IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(plain, nullptr);
  ibv_mw* mw = ibv_alloc_mw(l.pd, IBV_MW_TYPE_2);
  ASSERT_NE(mw, nullptr);
  ibv_mw_bind_info bi{plain, addr(kTarget), 4096, IBV_ACCESS_REMOTE_WRITE};
  EXPECT_EQ(bind2(1, mw, ibv_inc_rkey(mw->rkey), bi), IBV_WC_MW_BIND_ERR);
  ibv_dealloc_mw(mw);
  EXPECT_EQ(ibv_dereg_mr(plain), 0);
}

TEST_F(Windows, PostingTheWrongTypeIsRefusedAtOnce) {
  ibv_mw* t1 = ibv_alloc_mw(l.pd, IBV_MW_TYPE_1);
  ibv_mw* t2 = ibv_alloc_mw(l.pd, IBV_MW_TYPE_2);
  ASSERT_TRUE(t1 && t2);
  // A type 1 window is not bound by a work request, nor a type 2 one by ibv_bind_mw.
  ibv_send_wr w{};
  w.opcode = IBV_WR_BIND_MW;
  w.bind_mw.mw = t1;
  w.bind_mw.rkey = ibv_inc_rkey(t1->rkey);
  w.bind_mw.bind_info = info(kWinOff, kWinLen, IBV_ACCESS_REMOTE_WRITE);
  EXPECT_EQ(post_wr(l.qp[1], w), EINVAL);
  ibv_mw_bind b{};
  b.bind_info = info(kWinOff, kWinLen, IBV_ACCESS_REMOTE_WRITE);
  EXPECT_EQ(ibv_bind_mw(l.qp[1], t2, &b), EINVAL);
  // The QP goes on working.
  EXPECT_TRUE(l.transfer(4));
  ibv_dealloc_mw(t1);
  ibv_dealloc_mw(t2);
}

TEST_F(Windows, TheExtendedQpBindsAType2Window) {
  ibv_qp_init_attr_ex a{};
  a.send_cq = a.recv_cq = l.cq;
  a.qp_type = IBV_QPT_RC;
  a.cap.max_send_sge = a.cap.max_recv_sge = 1;
  a.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
  a.pd = l.pd;
  a.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_BIND_MW;
  a.cap.max_send_wr = a.cap.max_recv_wr = 32;
  ibv_qp* q = ibv_create_qp_ex(l.ctx, &a);
  ASSERT_NE(q, nullptr);
  // It takes QP 1's place in the loop.
  ibv_qp_attr reset{};
  reset.qp_state = IBV_QPS_RESET;
  ASSERT_EQ(ibv_modify_qp(l.qp[0], &reset, IBV_QP_STATE), 0);
  ASSERT_EQ(ibv_destroy_qp(l.qp[1]), 0);
  l.qp[1] = q;
  ASSERT_TRUE(l.connect());
  ibv_qp_ex* qx = ibv_qp_to_qp_ex(q);
  ASSERT_NE(qx, nullptr);
  ibv_mw* mw = ibv_alloc_mw(l.pd, IBV_MW_TYPE_2);
  ASSERT_NE(mw, nullptr);
  const std::uint32_t key = ibv_inc_rkey(mw->rkey);
  const ibv_mw_bind_info bi = info(kWinOff, kWinLen, IBV_ACCESS_REMOTE_WRITE);
  ibv_wr_start(qx);
  qx->wr_id = 6;
  qx->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_bind_mw(qx, mw, key, &bi);
  ASSERT_EQ(ibv_wr_complete(qx), 0);
  const auto wcs = poll_n(l.cq, 1);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(wcs[0].opcode, IBV_WC_BIND_MW);
  EXPECT_EQ(write(key, addr(kWinOff), kWinLen), IBV_WC_SUCCESS);
  EXPECT_TRUE(window_holds_data());
  ibv_dealloc_mw(mw);
}

}  // namespace
