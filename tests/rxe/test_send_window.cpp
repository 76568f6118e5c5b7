// The RC send window at scale: QPs waiting for ACKs share the device's send budget, and a
// retransmission timeout resends one packet at a time until the responder answers.
#include "tests/rxe/fixture.h"

namespace softrdma::rxe::test {
namespace {

class SendWindow : public Pair {
 protected:
  // An RC QP of a in RTS toward a QP number b does not have: nothing it sends is answered.
  Qp* unanswered_qp(std::uint8_t timeout, std::uint8_t retry_cnt) {
    Qp* q = make_qp(*a, QpType::kRc);
    ConnectOptions o;
    o.timeout = timeout;
    o.retry_cnt = retry_cnt;
    bring_up(q, b->gid(), 0xABC00 + next_dest_++, o.psn_b, o.psn_a, o);
    return q;
  }
  void post_write(Qp* q, Buffer& src, std::uint32_t len) {
    const Sge sge = src.sge(0, len);
    SendWr w;
    w.opcode = WrOpcode::kRdmaWrite;
    w.sg_list = std::span(&sge, 1);
    w.remote_addr = 0x10000;
    w.rkey = 0x1234;
    w.send_flags = kSendSignaled;
    ASSERT_EQ(q->post_send(w), 0);
  }
  std::uint64_t sent() const { return a->dev->counters().tx_packets; }
  // Until a pass of this thread sends nothing: every QP waits for ACKs (or a timer).
  void settle() {
    ASSERT_TRUE(wait_until([&] {
      const std::uint64_t before = sent();
      return a->dev->poll_progress() && sent() == before;
    }));
  }
  std::uint32_t next_dest_ = 0;
};

TEST_F(SendWindow, QpsWaitingForAcksShareTheBudgetWithANewSender) {
  constexpr std::uint32_t kMessage = 4 << 20;  // 1024 packets of 4096 bytes
  constexpr std::uint32_t kWaiting = 64;
  Buffer src(*a, kMessage, kAllAccess, 7);
  // Timers far beyond the test: nothing is resent while it runs.
  for (std::uint32_t i = 0; i < kWaiting; ++i) post_write(unanswered_qp(22, 7), src, kMessage);
  settle();
  const std::uint64_t before = sent();
  post_write(unanswered_qp(22, 7), src, kMessage);
  settle();
  // Its share of the budget with 64 others out (1/64 or 1/65 of it, by the pass that counted),
  // not the whole message: counting only the QPs with packets still to send left it at 1.
  EXPECT_GT(sent() - before, 0u);
  EXPECT_LE(sent() - before, Device::kSendBudgetBytes / kWaiting / 4096);
}

TEST_F(SendWindow, ATimeoutResendsOnePacketUntilTheResponderAnswers) {
  constexpr std::uint32_t kPackets = 16;
  Buffer src(*a, kPackets * 4096, kAllAccess, 7);
  Qp* q = unanswered_qp(8, 3);  // 1 ms, 3 retries
  post_write(q, src, kPackets * 4096);
  const auto wc = wait_wc(a->cq, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, WcStatus::kRetryExcErr);
  // The message once, then the first packet again at each of the 3 timeouts that retried.
  EXPECT_EQ(sent(), kPackets + 3);
  EXPECT_EQ(q->counters().retransmits, 3u);
}

}  // namespace
}  // namespace softrdma::rxe::test
