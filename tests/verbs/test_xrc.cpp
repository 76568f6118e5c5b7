// XRC (IBTA annex A14) through the drop-in libibverbs on softroce0: XRC domains (private and
// keyed by a file, counted opens, EBUSY while used), XRC SRQs and their numbers, an initiator
// QP sending to a target QP that delivers into the SRQ each request names, every XRC opcode
// with its completion fields, requests naming an SRQ outside the target's domain refused
// with nothing delivered (guard bytes), an XRC SRQ destroyed while requests for it arrive, the
// last WQE event of a target entering the error state, the QP rules of both kinds, ibv_open_qp
// refused, and softiwarp0 without XRC.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <infiniband/verbs.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "verbs_helpers.h"

extern "C" std::size_t softrdma_unread_completions(ibv_context* context, std::uint32_t qpn);

namespace {

using namespace softrdma::verbs::test;

constexpr std::size_t kHalf = 65536;  // the buffer's second half is the target's memory
constexpr std::uint8_t kGuard = 0xA5;

ibv_xrcd* open_xrcd(ibv_context* ctx, int fd, int oflags) {
  ibv_xrcd_init_attr a{};
  a.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
  a.fd = fd;
  a.oflags = oflags;
  return ibv_open_xrcd(ctx, &a);
}

ibv_srq* xrc_srq(ibv_context* ctx, ibv_pd* pd, ibv_xrcd* xrcd, ibv_cq* cq) {
  ibv_srq_init_attr_ex a{};
  a.attr.max_wr = 16;
  a.attr.max_sge = 1;
  a.comp_mask =
      IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ | IBV_SRQ_INIT_ATTR_PD;
  a.srq_type = IBV_SRQT_XRC;
  a.xrcd = xrcd;
  a.cq = cq;
  a.pd = pd;
  return ibv_create_srq_ex(ctx, &a);
}

ibv_qp* xrc_target(ibv_context* ctx, ibv_xrcd* xrcd) {
  ibv_qp_init_attr_ex a{};
  a.qp_type = IBV_QPT_XRC_RECV;
  a.comp_mask = IBV_QP_INIT_ATTR_XRCD;
  a.xrcd = xrcd;
  return ibv_create_qp_ex(ctx, &a);
}

// A file of its own for a keyed domain, removed with the object.
struct TempFile {
  std::string path = "/tmp/softrdma-xrc-XXXXXX";
  int fd = -1;
  TempFile() { fd = mkstemp(path.data()); }
  ~TempFile() {
    if (fd >= 0) close(fd);
    unlink(path.c_str());
  }
};

// One initiator and one target on softroce0, connected to each other, with the domain's SRQ
// (`srq`, on `rcq`) and an SRQ of another domain (`foreign`); a buffer whose second half is
// the receiving side's, filled with guard bytes.
struct Xrc : ::testing::Test {
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_cq *scq = nullptr, *rcq = nullptr;
  ibv_xrcd *xrcd = nullptr, *other = nullptr;
  ibv_srq *srq = nullptr, *foreign = nullptr;
  ibv_qp *ini = nullptr, *tgt = nullptr;
  std::vector<std::uint8_t> buf = std::vector<std::uint8_t>(2 * kHalf);
  ibv_mr* mr = nullptr;

  void SetUp() override {
    ctx = open_by_name("softroce0");
    ASSERT_NE(ctx, nullptr);
    pd = ibv_alloc_pd(ctx);
    scq = ibv_create_cq(ctx, 64, nullptr, nullptr, 0);
    rcq = ibv_create_cq(ctx, 64, nullptr, nullptr, 0);
    ASSERT_TRUE(pd && scq && rcq);
    mr = ibv_reg_mr(pd, buf.data(), buf.size(),
                    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                        IBV_ACCESS_REMOTE_ATOMIC);
    ASSERT_NE(mr, nullptr);
    xrcd = open_xrcd(ctx, -1, 0);
    other = open_xrcd(ctx, -1, 0);
    ASSERT_TRUE(xrcd && other);
    srq = xrc_srq(ctx, pd, xrcd, rcq);
    foreign = xrc_srq(ctx, pd, other, rcq);
    ASSERT_TRUE(srq && foreign);
    ASSERT_NO_FATAL_FAILURE(make_pair(xrcd));
    std::fill(buf.begin() + kHalf, buf.end(), kGuard);
    for (std::size_t i = 0; i < kHalf; ++i) buf[i] = static_cast<std::uint8_t>(i * 13 + 5);
  }
  void TearDown() override {
    for (ibv_qp* q : {ini, tgt}) {
      if (q) {
        EXPECT_EQ(ibv_destroy_qp(q), 0);
      }
    }
    for (ibv_srq* s : {srq, foreign}) {
      if (s) {
        EXPECT_EQ(ibv_destroy_srq(s), 0);
      }
    }
    for (ibv_xrcd* x : {xrcd, other}) {
      if (x) {
        EXPECT_EQ(ibv_close_xrcd(x), 0);
      }
    }
    if (mr) ibv_dereg_mr(mr);
    for (ibv_cq* c : {scq, rcq}) {
      if (c) ibv_destroy_cq(c);
    }
    if (pd) ibv_dealloc_pd(pd);
    if (ctx) ibv_close_device(ctx);
  }

  // An initiator, and a target of `domain`, each taken to RTS towards the other with the
  // attribute masks ibv_xsrq_pingpong uses.
  void make_pair(ibv_xrcd* domain) {
    ibv_qp_init_attr_ex a{};
    a.qp_type = IBV_QPT_XRC_SEND;
    a.send_cq = scq;
    a.cap.max_send_wr = 32;
    a.cap.max_send_sge = 1;
    a.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
    a.pd = pd;
    a.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_WRITE;
    ini = ibv_create_qp_ex(ctx, &a);
    tgt = xrc_target(ctx, domain);
    ASSERT_TRUE(ini && tgt);
    EXPECT_EQ(a.cap.max_recv_wr, 0u);
    ibv_gid gid;
    ASSERT_EQ(ibv_query_gid(ctx, 1, 1, &gid), 0);
    ibv_qp_attr m{};
    m.qp_state = IBV_QPS_INIT;
    m.port_num = 1;
    m.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
    const int init = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
    ASSERT_EQ(ibv_modify_qp(tgt, &m, init), 0);
    m.qp_access_flags = 0;
    ASSERT_EQ(ibv_modify_qp(ini, &m, init), 0);
    for (ibv_qp* q : {tgt, ini}) {
      ibv_qp_attr r{};
      r.qp_state = IBV_QPS_RTR;
      r.path_mtu = IBV_MTU_1024;
      r.dest_qp_num = (q == tgt ? ini : tgt)->qp_num;
      r.max_dest_rd_atomic = 4;
      r.min_rnr_timer = 1;
      r.ah_attr.is_global = 1;
      r.ah_attr.grh.dgid = gid;
      r.ah_attr.grh.sgid_index = 1;
      r.ah_attr.grh.hop_limit = 64;
      r.ah_attr.port_num = 1;
      int mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
      if (q == tgt) mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
      ASSERT_EQ(ibv_modify_qp(q, &r, mask), 0);
      ibv_qp_attr s{};
      s.qp_state = IBV_QPS_RTS;
      s.timeout = 14;
      s.retry_cnt = 7;
      s.rnr_retry = 7;
      s.max_rd_atomic = 4;
      mask = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_SQ_PSN;
      if (q == ini) mask |= IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
      ASSERT_EQ(ibv_modify_qp(q, &s, mask), 0);
    }
  }

  std::uint32_t srqn(ibv_srq* s) {
    std::uint32_t n = 0;
    EXPECT_EQ(ibv_get_srq_num(s, &n), 0);
    return n;
  }
  int post_srq_recv(ibv_srq* s, std::uint64_t id, std::size_t off, std::uint32_t len) {
    ibv_sge g{reinterpret_cast<std::uint64_t>(buf.data() + off), len, mr->lkey};
    return post_srq_recv_sge(s, &g, id);
  }
  // A signaled work request on the initiator to the target's SRQ numbered `to`: `len` bytes
  // from the start of the buffer.
  ibv_send_wr request(ibv_wr_opcode op, std::uint32_t to, ibv_sge& g, std::uint32_t len) {
    g = ibv_sge{reinterpret_cast<std::uint64_t>(buf.data()), len, mr->lkey};
    ibv_send_wr w = one_sge_wr(op, &g, 100 + op);
    w.qp_type.xrc.remote_srqn = to;
    return w;
  }
  // Posts `w` and returns its completion (status IBV_WC_GENERAL_ERR when none came).
  ibv_wc run(ibv_send_wr& w) {
    ibv_wc none{};
    none.status = IBV_WC_GENERAL_ERR;
    if (post_wr(ini, w) != 0) return none;
    const auto wcs = poll_n(scq, 1);
    return wcs.empty() ? none : wcs[0];
  }
  // An RDMA WRITE of 1000 bytes to the target's half under the rkey of a region of another PD
  // than the SRQ's: the initiator's completion status.
  int write_under_another_pd() {
    ibv_pd* pd2 = ibv_alloc_pd(ctx);
    ibv_mr* mr2 = ibv_reg_mr(pd2, buf.data() + kHalf, kHalf,
                             IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    if (!mr2) return -1;
    ibv_sge g;
    ibv_send_wr w = request(IBV_WR_RDMA_WRITE, srqn(srq), g, 1000);
    w.wr.rdma.remote_addr = addr(kHalf);
    w.wr.rdma.rkey = mr2->rkey;
    const int status = run(w).status;
    ibv_dereg_mr(mr2);
    ibv_dealloc_pd(pd2);
    return status;
  }
  bool guards_intact(std::size_t from, std::size_t len) {
    for (std::size_t i = kHalf; i < buf.size(); ++i) {
      if ((i < from || i >= from + len) && buf[i] != kGuard) return false;
    }
    return true;
  }
  std::uint64_t addr(std::size_t off) { return reinterpret_cast<std::uint64_t>(buf.data() + off); }
};

TEST(XrcDomain, OpenSharesByInodeAndCountsOpens) {
  ibv_context* ctx = open_by_name("softroce0");
  ASSERT_NE(ctx, nullptr);
  TempFile f, g;
  ASSERT_GE(f.fd, 0);
  errno = 0;
  EXPECT_EQ(open_xrcd(ctx, f.fd, 0), nullptr);  // no such domain, and no O_CREAT
  EXPECT_EQ(errno, EINVAL);
  ibv_xrcd* a = open_xrcd(ctx, f.fd, O_CREAT);
  ASSERT_NE(a, nullptr);
  // The same inode through another descriptor finds it; O_EXCL refuses an existing one.
  const int fd2 = open(f.path.c_str(), O_RDONLY);
  ibv_xrcd* b = open_xrcd(ctx, fd2, 0);
  ASSERT_NE(b, nullptr);
  errno = 0;
  EXPECT_EQ(open_xrcd(ctx, f.fd, O_CREAT | O_EXCL), nullptr);
  EXPECT_EQ(errno, EINVAL);
  ibv_xrcd* c = open_xrcd(ctx, g.fd, O_CREAT | O_EXCL);  // another file: a new domain
  ASSERT_NE(c, nullptr);
  errno = 0;
  EXPECT_EQ(open_xrcd(ctx, 1000, O_CREAT), nullptr);
  EXPECT_EQ(errno, EBADF);

  // An SRQ made in `a` is in `b`'s domain: the domain stays while it is used.
  ibv_pd* pd = ibv_alloc_pd(ctx);
  ibv_cq* cq = ibv_create_cq(ctx, 8, nullptr, nullptr, 0);
  ibv_srq* s = xrc_srq(ctx, pd, a, cq);
  ASSERT_NE(s, nullptr);
  ibv_qp* t = xrc_target(ctx, b);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(ibv_close_xrcd(a), 0);  // one of two opens
  EXPECT_EQ(ibv_close_xrcd(b), EBUSY);
  EXPECT_EQ(ibv_destroy_cq(cq), EBUSY);  // the XRC SRQ completes on it
  EXPECT_EQ(ibv_destroy_srq(s), 0);
  EXPECT_EQ(ibv_close_xrcd(b), EBUSY);  // the target QP still belongs to it
  EXPECT_EQ(ibv_destroy_qp(t), 0);
  EXPECT_EQ(ibv_close_xrcd(b), 0);
  EXPECT_EQ(ibv_close_xrcd(c), 0);
  // Closed for good: opening the file without O_CREAT finds nothing.
  EXPECT_EQ(open_xrcd(ctx, f.fd, 0), nullptr);
  ibv_xrcd* p = open_xrcd(ctx, -1, O_EXCL);  // private: no file, so nothing to find
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(ibv_close_xrcd(p), 0);
  close(fd2);
  ibv_destroy_cq(cq);
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
}

// A target QP of another process cannot be opened (docs/verbs-abi.md: a target QP serves only
// its own process's SRQs): ibv_open_qp answers EOPNOTSUPP, also for a QP of this process.
TEST(XrcDomain, OpenQpIsNotSupported) {
  ibv_context* ctx = open_by_name("softroce0");
  ASSERT_NE(ctx, nullptr);
  TempFile f;
  ibv_xrcd* x = open_xrcd(ctx, f.fd, O_CREAT);
  ASSERT_NE(x, nullptr);
  ibv_qp* t = xrc_target(ctx, x);
  ASSERT_NE(t, nullptr);
  ibv_qp_open_attr a{};
  a.comp_mask = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD | IBV_QP_OPEN_ATTR_TYPE;
  a.qp_num = t->qp_num;
  a.xrcd = x;
  a.qp_type = IBV_QPT_XRC_RECV;
  errno = 0;
  EXPECT_EQ(ibv_open_qp(ctx, &a), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
  EXPECT_EQ(ibv_destroy_qp(t), 0);
  EXPECT_EQ(ibv_close_xrcd(x), 0);
  ibv_close_device(ctx);
}

TEST(XrcDomain, SoftiwarpHasNoXrc) {
  ibv_context* roce = open_by_name("softroce0");
  ibv_context* iw = open_by_name("softiwarp0");
  ASSERT_TRUE(roce && iw);
  ibv_device_attr a{};
  ASSERT_EQ(ibv_query_device(roce, &a), 0);
  EXPECT_TRUE(a.device_cap_flags & IBV_DEVICE_XRC);
  ASSERT_EQ(ibv_query_device(iw, &a), 0);
  EXPECT_FALSE(a.device_cap_flags & IBV_DEVICE_XRC);
  errno = 0;
  EXPECT_EQ(open_xrcd(iw, -1, 0), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
  ibv_pd* pd = ibv_alloc_pd(iw);
  ibv_cq* cq = ibv_create_cq(iw, 8, nullptr, nullptr, 0);
  ibv_qp_init_attr_ex q{};
  q.qp_type = IBV_QPT_XRC_SEND;
  q.send_cq = cq;
  q.comp_mask = IBV_QP_INIT_ATTR_PD;
  q.pd = pd;
  errno = 0;
  EXPECT_EQ(ibv_create_qp_ex(iw, &q), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
  ibv_destroy_cq(cq);
  ibv_dealloc_pd(pd);
  ibv_close_device(iw);
  ibv_close_device(roce);
}

TEST_F(Xrc, SrqNumbersAreDistinct) {
  EXPECT_NE(srqn(srq), 0u);
  EXPECT_NE(srqn(foreign), 0u);
  EXPECT_NE(srqn(srq), srqn(foreign));
}

// Neither side has the queue it does not use, and a target takes no part without a domain.
TEST_F(Xrc, QpKindsHaveOneSideEach) {
  ibv_recv_wr rw{};
  ibv_recv_wr* rbad = nullptr;
  EXPECT_NE(ibv_post_recv(ini, &rw, &rbad), 0);
  EXPECT_NE(ibv_post_recv(tgt, &rw, &rbad), 0);
  ibv_sge g;
  ibv_send_wr w = request(IBV_WR_SEND, srqn(srq), g, 8);
  ibv_send_wr* bad = nullptr;
  EXPECT_EQ(ibv_post_send(tgt, &w, &bad), EINVAL);
  errno = 0;
  EXPECT_EQ(xrc_target(ctx, nullptr), nullptr);
  EXPECT_EQ(errno, EINVAL);
  ibv_qp_init_attr_ex a{};
  a.qp_type = IBV_QPT_XRC_SEND;  // no send CQ
  a.comp_mask = IBV_QP_INIT_ATTR_PD;
  a.pd = pd;
  errno = 0;
  EXPECT_EQ(ibv_create_qp_ex(ctx, &a), nullptr);
  EXPECT_EQ(errno, EINVAL);
  ibv_qp_attr attr{};
  ibv_qp_init_attr init{};
  ASSERT_EQ(ibv_query_qp(tgt, &attr, IBV_QP_STATE, &init), 0);
  EXPECT_EQ(attr.qp_state, IBV_QPS_RTS);
  EXPECT_EQ(init.qp_type, IBV_QPT_XRC_RECV);
}

// SEND (one packet and several) and SEND with immediate land in the named SRQ and complete on
// its CQ with the target QP's number.
TEST_F(Xrc, SendsCompleteOnTheSrqsCq) {
  ASSERT_EQ(post_srq_recv(srq, 1, kHalf, 8192), 0);
  ASSERT_EQ(post_srq_recv(srq, 2, kHalf + 16384, 8192), 0);
  ibv_sge g;
  ibv_send_wr w = request(IBV_WR_SEND, srqn(srq), g, 5000);  // 5 packets at MTU 1024
  ibv_wc wc = run(w);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc.opcode, IBV_WC_SEND);
  auto r = poll_n(rcq, 1);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(r[0].wr_id, 1u);
  EXPECT_EQ(r[0].opcode, IBV_WC_RECV);
  EXPECT_EQ(r[0].byte_len, 5000u);
  EXPECT_EQ(r[0].qp_num, tgt->qp_num);
  EXPECT_FALSE(r[0].wc_flags & IBV_WC_WITH_IMM);
  EXPECT_EQ(std::memcmp(buf.data(), buf.data() + kHalf, 5000), 0);

  w = request(IBV_WR_SEND_WITH_IMM, srqn(srq), g, 100);
  w.imm_data = htobe32(0x1234abcd);
  wc = run(w);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  r = poll_n(rcq, 1);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].wr_id, 2u);
  EXPECT_EQ(r[0].byte_len, 100u);
  EXPECT_TRUE(r[0].wc_flags & IBV_WC_WITH_IMM);
  EXPECT_EQ(be32toh(r[0].imm_data), 0x1234abcdu);
  EXPECT_EQ(r[0].qp_num, tgt->qp_num);
  EXPECT_TRUE(guards_intact(kHalf, 16384 + 100));
}

// A target's receive completes on its SRQ's CQ, and softrdma_unread_completions (what rdma_cm
// waits on before it reports a peer's disconnect) counts it there until it is polled.
TEST_F(Xrc, UnreadCompletionsOfATargetAreOnItsSrqsCq) {
  EXPECT_EQ(softrdma_unread_completions(ctx, tgt->qp_num), 0u);
  ASSERT_EQ(post_srq_recv(srq, 1, kHalf, 8192), 0);
  ibv_sge g;
  ibv_send_wr w = request(IBV_WR_SEND, srqn(srq), g, 100);
  EXPECT_EQ(run(w).status, IBV_WC_SUCCESS);
  EXPECT_TRUE(wait_until([&] { return softrdma_unread_completions(ctx, tgt->qp_num) == 1; }));
  EXPECT_EQ(softrdma_unread_completions(ctx, ini->qp_num), 0u);  // its own was polled by run()
  const auto r = poll_n(rcq, 1);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].qp_num, tgt->qp_num);
  EXPECT_EQ(softrdma_unread_completions(ctx, tgt->qp_num), 0u);
}

// RDMA WRITE (several packets), WRITE with immediate (which takes a receive WQE of the SRQ),
// READ and both atomics, each with its completion.
TEST_F(Xrc, RdmaAndAtomics) {
  ibv_sge g;
  ibv_send_wr w = request(IBV_WR_RDMA_WRITE, srqn(srq), g, 3000);
  w.wr.rdma.remote_addr = addr(kHalf + 100);
  w.wr.rdma.rkey = mr->rkey;
  ibv_wc wc = run(w);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc.opcode, IBV_WC_RDMA_WRITE);
  EXPECT_EQ(std::memcmp(buf.data(), buf.data() + kHalf + 100, 3000), 0);
  EXPECT_TRUE(guards_intact(kHalf + 100, 3000));

  ASSERT_EQ(post_srq_recv(srq, 9, kHalf, 0), 0);
  w = request(IBV_WR_RDMA_WRITE_WITH_IMM, srqn(srq), g, 64);
  w.imm_data = htobe32(77);
  w.wr.rdma.remote_addr = addr(kHalf + 8192);
  w.wr.rdma.rkey = mr->rkey;
  wc = run(w);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  auto r = poll_n(rcq, 1);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].wr_id, 9u);
  EXPECT_EQ(r[0].opcode, IBV_WC_RECV_RDMA_WITH_IMM);
  EXPECT_EQ(r[0].byte_len, 64u);
  EXPECT_EQ(be32toh(r[0].imm_data), 77u);
  EXPECT_EQ(r[0].qp_num, tgt->qp_num);

  // READ: 2500 bytes of the target's memory into the initiator's half, at offset 20000.
  std::memset(buf.data() + 20000, 0, 2500);
  w = request(IBV_WR_RDMA_READ, srqn(srq), g, 2500);
  g.addr = addr(20000);
  w.wr.rdma.remote_addr = addr(kHalf + 100);
  w.wr.rdma.rkey = mr->rkey;
  wc = run(w);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc.opcode, IBV_WC_RDMA_READ);
  EXPECT_EQ(wc.byte_len, 2500u);
  EXPECT_EQ(std::memcmp(buf.data() + 20000, buf.data() + kHalf + 100, 2500), 0);

  std::uint64_t word = 40;
  std::memcpy(buf.data() + kHalf + 32768, &word, 8);
  w = request(IBV_WR_ATOMIC_FETCH_AND_ADD, srqn(srq), g, 8);
  g.addr = addr(30000);
  w.wr.atomic.remote_addr = addr(kHalf + 32768);
  w.wr.atomic.rkey = mr->rkey;
  w.wr.atomic.compare_add = 2;
  wc = run(w);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc.opcode, IBV_WC_FETCH_ADD);
  std::uint64_t got = 0;
  std::memcpy(&got, buf.data() + 30000, 8);
  EXPECT_EQ(got, 40u);
  w = request(IBV_WR_ATOMIC_CMP_AND_SWP, srqn(srq), g, 8);
  g.addr = addr(30000);
  w.wr.atomic.remote_addr = addr(kHalf + 32768);
  w.wr.atomic.rkey = mr->rkey;
  w.wr.atomic.compare_add = 42;
  w.wr.atomic.swap = 7;
  wc = run(w);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc.opcode, IBV_WC_COMP_SWAP);
  std::memcpy(&got, buf.data() + 30000, 8);
  EXPECT_EQ(got, 42u);
  std::memcpy(&got, buf.data() + kHalf + 32768, 8);
  EXPECT_EQ(got, 7u);
}

// A request naming an SRQ of another domain, or none: an invalid request NAK, nothing placed
// or received anywhere.
TEST_F(Xrc, SrqOutsideTheDomainIsRefused) {
  ASSERT_EQ(post_srq_recv(foreign, 1, kHalf, 4096), 0);
  ASSERT_EQ(post_srq_recv(srq, 2, kHalf + 4096, 4096), 0);
  ibv_sge g;
  ibv_send_wr w = request(IBV_WR_SEND, srqn(foreign), g, 1000);
  const ibv_wc wc = run(w);
  EXPECT_EQ(wc.status, IBV_WC_REM_INV_REQ_ERR);
  // The target failed; its domain's SRQ still holds its WQE (flushed only when one was taken).
  ibv_wc r[4];
  EXPECT_EQ(ibv_poll_cq(rcq, 4, r), 0);
  EXPECT_TRUE(guards_intact(0, 0));
}

TEST_F(Xrc, UnknownSrqnAndWriteAreRefused) {
  ibv_sge g;
  ibv_send_wr w = request(IBV_WR_RDMA_WRITE, 0xFFFFFF, g, 1000);
  w.wr.rdma.remote_addr = addr(kHalf);
  w.wr.rdma.rkey = mr->rkey;
  EXPECT_EQ(run(w).status, IBV_WC_REM_INV_REQ_ERR);
  EXPECT_TRUE(guards_intact(0, 0));
}

// RDMA and atomics check the rkey against the PD of the XRC SRQ the request names (the
// target QP has none): a region of another PD is a remote access error, memory untouched.
TEST_F(Xrc, RkeyMustBeInTheSrqsPd) {
  EXPECT_EQ(write_under_another_pd(), IBV_WC_REM_ACCESS_ERR);
  EXPECT_TRUE(guards_intact(0, 0));
}

// An XRC target takes receive WQEs from its domain's SRQs, so it reports its last WQE
// (IBV_EVENT_QP_LAST_WQE_REACHED, which SPDK waits for) when it enters the error state: by a
// request it fails (a remote access error) and by ibv_modify_qp to ERR, once each time; the
// initiator, which takes none, does not.
TEST_F(Xrc, TargetEnteringErrorReportsItsLastWqe) {
  using namespace std::chrono_literals;
  EXPECT_EQ(write_under_another_pd(), IBV_WC_REM_ACCESS_ERR);
  ibv_qp_attr err{};
  err.qp_state = IBV_QPS_ERR;
  ASSERT_EQ(ibv_modify_qp(tgt, &err, IBV_QP_STATE), 0);  // already there: no second event
  std::vector<ibv_async_event> events = async_events(ctx, 300ms);
  EXPECT_EQ(count_qp_events(events, IBV_EVENT_QP_ACCESS_ERR, tgt), 1u);
  EXPECT_EQ(count_qp_events(events, IBV_EVENT_QP_LAST_WQE_REACHED, tgt), 1u);
  EXPECT_EQ(count_qp_events(events, IBV_EVENT_QP_LAST_WQE_REACHED, ini), 0u);

  for (ibv_qp** q : {&ini, &tgt}) {
    ASSERT_EQ(ibv_destroy_qp(*q), 0);
    *q = nullptr;
  }
  ASSERT_NO_FATAL_FAILURE(make_pair(xrcd));
  ASSERT_EQ(ibv_modify_qp(tgt, &err, IBV_QP_STATE), 0);
  events = async_events(ctx, 300ms);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].event_type, IBV_EVENT_QP_LAST_WQE_REACHED);
  EXPECT_EQ(events[0].element.qp, tgt);
}

// ibv_qp_ex: wr_set_xrc_srqn names the SRQ of a SEND built with the wr_* calls.
TEST_F(Xrc, QpExSetsTheSrqn) {
  ASSERT_EQ(post_srq_recv(srq, 5, kHalf, 4096), 0);
  ibv_qp_ex* q = ibv_qp_to_qp_ex(ini);
  ibv_wr_start(q);
  q->wr_id = 55;
  q->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_send(q);
  ibv_wr_set_xrc_srqn(q, srqn(srq));
  ibv_wr_set_sge(q, mr->lkey, addr(0), 300);
  ASSERT_EQ(ibv_wr_complete(q), 0);
  const auto s = poll_n(scq, 1);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(s[0].wr_id, 55u);
  const auto r = poll_n(rcq, 1);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].byte_len, 300u);
  EXPECT_EQ(std::memcmp(buf.data(), buf.data() + kHalf, 300), 0);
}

// ibv_destroy_srq of an XRC SRQ while requests for it keep arriving. The target finds the SRQ
// by the XRCETH's number on every packet, on the progress thread, so destroying it must wait
// until no packet uses it (ASan's heap-use-after-free before). Each round destroys an SRQ at
// another moment of a stream of 16-packet SENDs, 8 of them outstanding (after 0 to 16 of them
// completed; at 16 its WQEs are used up and the initiator retries on RNR NAKs), then its CQ at
// once. The stream ends with a remote invalid request error, and every message the initiator
// saw acknowledged completed on the SRQ's CQ, whole and in order, before ibv_destroy_srq
// returned.
TEST_F(Xrc, SrqDestroyedWhileSendsArrive) {
  using namespace std::chrono_literals;
  constexpr int kRounds = 24, kOutstanding = 8;
  constexpr std::uint32_t kLen = 16000, kSlot = 16384;
  std::vector<std::uint8_t> rx(16 * kSlot);
  ibv_mr* rmr = ibv_reg_mr(pd, rx.data(), rx.size(), static_cast<int>(IBV_ACCESS_LOCAL_WRITE));
  ASSERT_NE(rmr, nullptr);
  for (int round = 0; round < kRounds; ++round) {
    SCOPED_TRACE(round);
    ibv_cq* cq = ibv_create_cq(ctx, 256, nullptr, nullptr, 0);
    ASSERT_NE(cq, nullptr);
    ibv_srq* victim = xrc_srq(ctx, pd, xrcd, cq);
    ASSERT_NE(victim, nullptr);
    for (std::uint64_t i = 0; i < 16; ++i) {
      ibv_sge g{reinterpret_cast<std::uint64_t>(rx.data() + i * kSlot), kSlot, rmr->lkey};
      ASSERT_EQ(post_srq_recv_sge(victim, &g, i), 0);
    }
    const std::uint32_t to = srqn(victim);
    std::atomic<int> sent{0};
    std::atomic<bool> done{false};
    ibv_wc first_error{};
    // Keeps kOutstanding SENDs posted until one fails, then collects the rest (flushed).
    std::thread sender([&] {
      int posted = 0, completed = 0;
      bool failed = false;
      auto idle_since = std::chrono::steady_clock::now();
      while (completed < posted || !failed) {
        while (!failed && posted - completed < kOutstanding) {
          ibv_sge g;
          ibv_send_wr w = request(IBV_WR_SEND, to, g, kLen);
          if (post_wr(ini, w) != 0) {
            failed = true;
            break;
          }
          ++posted;
        }
        ibv_wc wc[kOutstanding];
        const int n = ibv_poll_cq(scq, kOutstanding, wc);
        if (n < 0 || std::chrono::steady_clock::now() - idle_since > 10s) break;
        if (n > 0) idle_since = std::chrono::steady_clock::now();
        for (int i = 0; i < n; ++i, ++completed) {
          if (wc[i].status == IBV_WC_SUCCESS && !failed) {
            ++sent;
          } else if (!failed) {
            failed = true;
            first_error = wc[i];
          }
        }
      }
      done = true;
    });
    const int after = round % 17;
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (sent < after && !done && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::yield();
    }
    std::this_thread::sleep_for(std::chrono::microseconds(100 * (round % 3)));
    EXPECT_EQ(ibv_destroy_srq(victim), 0);
    std::vector<ibv_wc> got;
    for (ibv_wc wc[16]; const int n = ibv_poll_cq(cq, 16, wc);) {
      if (n < 0) break;
      got.insert(got.end(), wc, wc + n);
    }
    EXPECT_EQ(ibv_destroy_cq(cq), 0);
    sender.join();
    EXPECT_EQ(first_error.status, IBV_WC_REM_INV_REQ_ERR);
    ASSERT_EQ(got.size(), static_cast<std::size_t>(sent.load()));
    for (std::size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].status, IBV_WC_SUCCESS);
      EXPECT_EQ(got[i].wr_id, i);
      EXPECT_EQ(got[i].byte_len, kLen);
      EXPECT_EQ(got[i].qp_num, tgt->qp_num);
    }
    // Both QPs failed: a new pair for the next round.
    for (ibv_qp** q : {&ini, &tgt}) {
      ASSERT_EQ(ibv_destroy_qp(*q), 0);
      *q = nullptr;
    }
    ASSERT_NO_FATAL_FAILURE(make_pair(xrcd));
  }
  ibv_dereg_mr(rmr);
}

}  // namespace
