// Every error status provoked on purpose; memory outside the allowed range is
// never touched (guard bytes).
#include "tests/rxe/fixture.h"

namespace softrdma::rxe::test {
namespace {

class RcErrors : public QpPair<QpType::kRc> {
 protected:
  void up(ConnectOptions o = {}) { connect(*a, qa, *b, qb, o); }
  // Posts a WRITE of `len` bytes to (addr, rkey) and returns its completion status.
  WcStatus write(std::uint64_t addr, std::uint32_t rkey, std::uint32_t len) {
    src = std::make_unique<Buffer>(*a, 8192, kAllAccess, 0xEE);
    const Sge s = src->sge(0, len);
    SendWr w = wr(WrOpcode::kRdmaWrite, 1, std::span(&s, 1));
    w.remote_addr = addr;
    w.rkey = rkey;
    EXPECT_EQ(qa->post_send(w), 0);
    auto wc = wait_wc(a->cq, 1);
    return wc.empty() ? WcStatus::kGeneralErr : wc[0].status;
  }
  // Posts a receive of `rs` on B, then a SEND of `ss` from A; the (sender's, receiver's)
  // completion statuses.
  std::pair<WcStatus, WcStatus> send(const Sge& rs, const Sge& ss) {
    EXPECT_EQ(post_recv(qb, 1, std::span(&rs, 1)), 0);
    EXPECT_EQ(qa->post_send(wr(WrOpcode::kSend, 2, std::span(&ss, 1))), 0);
    const auto swc = wait_wc(a->cq, 1);
    const auto rwc = wait_wc(b->cq, 1);
    return {swc.empty() ? WcStatus::kGeneralErr : swc[0].status,
            rwc.empty() ? WcStatus::kGeneralErr : rwc[0].status};
  }
  // Registers only the middle page of `mem`, three pages long, with B: the rest are guard bytes.
  std::shared_ptr<Mr> register_middle(std::vector<std::uint8_t>& mem) {
    int err = 0;
    return b->dev->reg_mr(b->pd, mem.data() + 4096, 4096,
                          reinterpret_cast<std::uint64_t>(mem.data() + 4096), kAllAccess, &err);
  }
  std::unique_ptr<Buffer> src;
};

bool all_equal(const std::vector<std::uint8_t>& v, std::uint8_t x) {
  return std::all_of(v.begin(), v.end(), [x](std::uint8_t b) { return b == x; });
}

TEST_F(RcErrors, WrongRkeyIsRemoteAccessErrorAndMemoryUnchanged) {
  up();
  Buffer dst(*b, 4096, kAllAccess, 0x11);
  EXPECT_EQ(write(dst.addr(), dst.mr->rkey ^ 0x5A5A, 100), WcStatus::kRemAccessErr);
  EXPECT_TRUE(all_equal(dst.bytes, 0x11));
  EXPECT_EQ(qa->state(), QpState::kErr);
  EXPECT_EQ(qb->state(), QpState::kErr);
}

TEST_F(RcErrors, WrongPdIsRemoteAccessError) {
  up();
  Pd* other = b->dev->alloc_pd();
  std::vector<std::uint8_t> mem(4096, 0x22);
  int err = 0;
  auto mr = b->dev->reg_mr(other, mem.data(), mem.size(),
                           reinterpret_cast<std::uint64_t>(mem.data()), kAllAccess, &err);
  ASSERT_TRUE(mr);
  EXPECT_EQ(write(reinterpret_cast<std::uint64_t>(mem.data()), mr->rkey, 64),
            WcStatus::kRemAccessErr);
  EXPECT_TRUE(all_equal(mem, 0x22));
}

TEST_F(RcErrors, WritingAReadOnlyRegionIsRemoteAccessError) {
  up();
  Buffer dst(*b, 4096, kAccessLocalWrite | kAccessRemoteRead, 0x33);
  EXPECT_EQ(write(dst.addr(), dst.mr->rkey, 64), WcStatus::kRemAccessErr);
  EXPECT_TRUE(all_equal(dst.bytes, 0x33));
}

TEST_F(RcErrors, OneByteOutOfBoundsIsRemoteAccessErrorAndGuardBytesHold) {
  up();
  std::vector<std::uint8_t> mem(3 * 4096, 0x44);
  auto mr = register_middle(mem);
  ASSERT_TRUE(mr);
  const auto base = reinterpret_cast<std::uint64_t>(mem.data() + 4096);
  EXPECT_EQ(write(base + 1, mr->rkey, 4096), WcStatus::kRemAccessErr);  // last byte outside
  EXPECT_TRUE(all_equal(mem, 0x44));
}

TEST_F(RcErrors, ExactBoundsSucceed) {
  up();
  std::vector<std::uint8_t> mem(3 * 4096, 0x44);
  auto mr = register_middle(mem);
  ASSERT_TRUE(mr);
  EXPECT_EQ(write(reinterpret_cast<std::uint64_t>(mem.data() + 4096), mr->rkey, 4096),
            WcStatus::kSuccess);
  EXPECT_TRUE(std::all_of(mem.begin(), mem.begin() + 4096, [](auto x) { return x == 0x44; }));
  EXPECT_TRUE(
      std::all_of(mem.begin() + 4096, mem.begin() + 8192, [](auto x) { return x == 0xEE; }));
  EXPECT_TRUE(std::all_of(mem.begin() + 8192, mem.end(), [](auto x) { return x == 0x44; }));
}

TEST_F(RcErrors, ReadWithoutRemoteReadAccess) {
  up();
  Buffer remote(*b, 4096, kAccessLocalWrite | kAccessRemoteWrite, 0x55);
  Buffer local(*a, 4096, kAllAccess, 0);
  const Sge s = local.sge(0, 100);
  SendWr w = rdma_wr(WrOpcode::kRdmaRead, 9, std::span(&s, 1), remote);
  ASSERT_EQ(qa->post_send(w), 0);
  Wc wc = one_wc(a->cq);
  EXPECT_EQ(wc.status, WcStatus::kRemAccessErr);
  EXPECT_TRUE(all_equal(local.bytes, 0));
}

TEST_F(RcErrors, QpWithoutRemoteWriteAccessRejectsWrites) {
  ConnectOptions o;
  o.access = kAccessLocalWrite | kAccessRemoteRead;
  up(o);
  Buffer dst(*b, 4096, kAllAccess, 0x66);
  EXPECT_EQ(write(dst.addr(), dst.mr->rkey, 10), WcStatus::kRemInvReqErr);
  EXPECT_TRUE(all_equal(dst.bytes, 0x66));
}

TEST_F(RcErrors, ErrorFlushesTheRestOfTheSendQueue) {
  up();
  Buffer dst(*b, 4096, kAllAccess);
  Buffer s(*a, 4096, kAllAccess);
  const Sge sg = s.sge(0, 10);
  SendWr bad = wr(WrOpcode::kRdmaWrite, 1, std::span(&sg, 1));
  bad.remote_addr = dst.addr();
  bad.rkey = dst.mr->rkey + 1;
  ASSERT_EQ(qa->post_send(bad), 0);
  for (int i = 2; i <= 4; ++i) {
    SendWr ok = bad;
    ok.wr_id = i;
    ok.rkey = dst.mr->rkey;
    ASSERT_EQ(qa->post_send(ok), 0);
  }
  auto wc = wait_wc(a->cq, 4);
  ASSERT_EQ(wc.size(), 4u);
  EXPECT_EQ(wc[0].status, WcStatus::kRemAccessErr);
  for (int i = 1; i < 4; ++i) {
    EXPECT_EQ(wc[i].status, WcStatus::kWrFlushErr);
    EXPECT_EQ(wc[i].wr_id, static_cast<std::uint64_t>(i + 1));
  }
  // Posting in ERR completes with a flush error too; receives are flushed.
  ASSERT_EQ(qa->post_send(bad), 0);
  wc = wait_wc(a->cq, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, WcStatus::kWrFlushErr);
  const Sge rs = dst.sge(0, 10);
  ASSERT_EQ(post_recv(qb, 77, std::span(&rs, 1)), 0);
  wc = wait_wc(b->cq, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, WcStatus::kWrFlushErr);
  EXPECT_EQ(wc[0].wr_id, 77u);
}

TEST_F(RcErrors, ReceiveBufferTooSmall) {
  up();
  Buffer s(*a, 4096, kAllAccess);
  Buffer d(*b, 4096, kAllAccess);
  EXPECT_EQ(send(d.sge(0, 100), s.sge(0, 101)),
            std::pair(WcStatus::kRemInvReqErr, WcStatus::kLocLenErr));
}

TEST_F(RcErrors, BadLocalKeyIsLocalProtectionError) {
  up();
  Buffer s(*a, 4096, kAllAccess);
  Sge ss = s.sge(0, 100);
  ss.lkey ^= 1;
  ASSERT_EQ(qa->post_send(wr(WrOpcode::kSend, 3, std::span(&ss, 1))), 0);
  Wc wc = one_wc(a->cq);
  EXPECT_EQ(wc.status, WcStatus::kLocProtErr);
  EXPECT_EQ(qa->state(), QpState::kErr);
}

TEST_F(RcErrors, PeerGoneGivesRetryExceeded) {
  ConnectOptions o;
  o.timeout = 8;  // ~1 ms
  o.retry_cnt = 3;
  up(o);
  ASSERT_EQ(b->dev->destroy_qp(qb), 0);  // nobody answers now
  qb = nullptr;
  Buffer s(*a, 64, kAllAccess);
  const Sge ss = s.sge(0, 10);
  ASSERT_EQ(qa->post_send(wr(WrOpcode::kSend, 5, std::span(&ss, 1))), 0);
  Wc wc = one_wc(a->cq);
  EXPECT_EQ(wc.status, WcStatus::kRetryExcErr);
  EXPECT_EQ(qa->counters().retransmits, 3u);  // retry_cnt retries, then the error
  // The first send and three resends reach B, which has no such QP (the last may still
  // be on its way when the error completes).
  wait_until([&] { return b->dev->counters().rx_unknown_qp >= 4; });
  EXPECT_EQ(b->dev->counters().rx_unknown_qp, 4u);
}

TEST_F(RcErrors, RnrThenSuccessOnceAReceiveIsPosted) {
  ConnectOptions o;
  o.rnr_retry = 7;  // forever
  up(o);
  Buffer s(*a, 64, kAllAccess, 0x77);
  Buffer d(*b, 64, kAllAccess);
  const Sge ss = s.sge(0, 64);
  ASSERT_EQ(qa->post_send(wr(WrOpcode::kSend, 6, std::span(&ss, 1))), 0);
  EXPECT_TRUE(wait_until([&] { return qb->counters().rnr_naks_sent > 0; }));
  EXPECT_EQ(a->cq->count(), 0u);
  const Sge rs = d.sge(0, 64);
  ASSERT_EQ(post_recv(qb, 7, std::span(&rs, 1)), 0);
  Wc wc = one_wc(a->cq);
  EXPECT_EQ(wc.status, WcStatus::kSuccess);
  EXPECT_TRUE(all_equal(d.bytes, 0x77));
  EXPECT_GT(qa->counters().rnr_naks_received, 0u);
}

TEST_F(RcErrors, RnrRetryExceeded) {
  ConnectOptions o;
  o.rnr_retry = 2;
  up(o);
  Buffer s(*a, 64, kAllAccess);
  const Sge ss = s.sge(0, 64);
  ASSERT_EQ(qa->post_send(wr(WrOpcode::kSend, 8, std::span(&ss, 1))), 0);
  Wc wc = one_wc(a->cq);
  EXPECT_EQ(wc.status, WcStatus::kRnrRetryExcErr);
  EXPECT_EQ(qa->counters().rnr_naks_received, 3u);
}

TEST_F(RcErrors, SendWithInvalidateRevokesTheRemoteKey) {
  up();
  Buffer d(*b, 4096, kAllAccess, 0x10);
  Buffer s(*a, 64, kAllAccess);
  Buffer rbuf(*b, 64, kAllAccess);
  const Sge rs = rbuf.sge(0, 64);
  ASSERT_EQ(post_recv(qb, 1, std::span(&rs, 1)), 0);
  const Sge ss = s.sge(0, 8);
  SendWr w = wr(WrOpcode::kSendWithInv, 2, std::span(&ss, 1));
  w.invalidate_rkey = d.mr->rkey;
  ASSERT_EQ(qa->post_send(w), 0);
  Wc rwc = one_wc(b->cq);
  EXPECT_EQ(rwc.status, WcStatus::kSuccess);
  EXPECT_EQ(rwc.wc_flags, static_cast<std::uint32_t>(kWcWithInv));
  EXPECT_EQ(rwc.invalidated_rkey, d.mr->rkey);
  ASSERT_EQ(wait_wc(a->cq, 1).size(), 1u);
  EXPECT_EQ(write(d.addr(), d.mr->rkey, 16), WcStatus::kRemAccessErr);
  EXPECT_TRUE(all_equal(d.bytes, 0x10));
}

TEST_F(RcErrors, LocalInvalidateRevokesALocalKey) {
  up();
  Buffer d(*b, 4096, kAllAccess, 0x10);
  Buffer s(*a, 64, kAllAccess);
  SendWr inv;
  inv.opcode = WrOpcode::kLocalInv;
  inv.wr_id = 3;
  inv.send_flags = kSendSignaled;
  inv.invalidate_rkey = s.mr->lkey;
  ASSERT_EQ(qa->post_send(inv), 0);
  Wc wc = one_wc(a->cq);
  EXPECT_EQ(wc.status, WcStatus::kSuccess);
  EXPECT_EQ(wc.opcode, WcOpcode::kLocalInv);
  // The invalidated key no longer gathers.
  const Sge ss = s.sge(0, 8);
  SendWr w = rdma_wr(WrOpcode::kRdmaWrite, 4, std::span(&ss, 1), d);
  ASSERT_EQ(qa->post_send(w), 0);
  wc = one_wc(a->cq);
  EXPECT_EQ(wc.status, WcStatus::kLocProtErr);
}

TEST_F(RcErrors, LocalInvalidateOfAnUnknownKeyIsLocalQpOperationError) {
  up();
  SendWr inv;
  inv.opcode = WrOpcode::kLocalInv;
  inv.wr_id = 5;
  inv.send_flags = kSendSignaled;
  inv.invalidate_rkey = 0x0BADBEEF;
  ASSERT_EQ(qa->post_send(inv), 0);
  Wc wc = one_wc(a->cq);
  EXPECT_EQ(wc.status, WcStatus::kLocQpOpErr);
  EXPECT_EQ(wc.opcode, WcOpcode::kLocalInv);
}

TEST_F(RcErrors, ReceiveBufferWithABadKeyIsRemoteOperationError) {
  up();
  Buffer s(*a, 64, kAllAccess, 0x21);
  Buffer d(*b, 64, kAllAccess, 0x00);
  Sge rs = d.sge(0, 64);
  rs.lkey ^= 0x10;  // the responder cannot place the data
  EXPECT_EQ(send(rs, s.sge(0, 32)), std::pair(WcStatus::kRemOpErr, WcStatus::kLocProtErr));
  EXPECT_TRUE(all_equal(d.bytes, 0x00));
}

TEST_F(RcErrors, PacketsFromAnotherPeerAreDroppedAndCounted) {
  up();
  Node c(fabric, 3);
  Qp* qc = make_qp(c, QpType::kRc);
  // C aims at B's QP, which is connected to A.
  bring_up(qc, b->gid(), qb->qpn(), 0, 0, ConnectOptions{});
  Buffer s(c, 64, kAllAccess);
  Buffer d(*b, 64, kAllAccess);
  const Sge rs = d.sge(0, 64);
  ASSERT_EQ(post_recv(qb, 1, std::span(&rs, 1)), 0);
  const Sge ss = s.sge(0, 64);
  ASSERT_EQ(qc->post_send(wr(WrOpcode::kSend, 1, std::span(&ss, 1))), 0);
  EXPECT_TRUE(wait_until([&] { return qb->counters().dropped_wrong_peer > 0; }));
  EXPECT_EQ(b->cq->count(), 0u);
}

}  // namespace
}  // namespace softrdma::rxe::test

namespace softrdma::rxe::test {
namespace {

// As on a NIC, the ACK for a message leaves before its receive completion can be
// seen: a receiver that tears down the moment it sees the completion still lets the
// sender complete successfully.
TEST(RcAckOrder, AckLeavesBeforeTheReceiverSeesTheCompletion) {
  auto fabric = std::make_shared<netdev::MemoryFabric>();
  Node a(fabric, 1), b(fabric, 2);
  for (int round = 0; round < 40; ++round) {
    Qp* qa = make_qp(a, QpType::kRc);
    Qp* qb = make_qp(b, QpType::kRc);
    ConnectOptions o;
    // A missing ACK ends in RETRY_EXC_ERR whatever the timeout (the receiver's QP is gone);
    // 16.8 ms keeps a CPU-starved run from timing out when the ACK is merely late.
    o.timeout = 12;
    o.retry_cnt = 3;
    connect(a, qa, b, qb, o);
    Buffer s(a, 64, kAllAccess), d(b, 64, kAllAccess);
    const Sge rs = d.sge(0, 64);
    ASSERT_EQ(post_recv(qb, 1, std::span(&rs, 1)), 0);
    const Sge ss = s.sge(0, 16);
    ASSERT_EQ(qa->post_send(wr(WrOpcode::kSend, 2, std::span(&ss, 1))), 0);
    // Spin on the CQ (no sleep) and tear down the instant the completion shows.
    Wc wc;
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (b.cq->poll(std::span(&wc, 1)) == 0 && std::chrono::steady_clock::now() < end) {
    }
    ASSERT_EQ(wc.wr_id, 1u);
    ASSERT_EQ(b.dev->destroy_qp(qb), 0);  // gone at once
    Wc swc = one_wc(a.cq);
    ASSERT_EQ(swc.status, WcStatus::kSuccess) << "round " << round;
    ASSERT_EQ(a.dev->destroy_qp(qa), 0);
  }
}

}  // namespace
}  // namespace softrdma::rxe::test
