// Delayed ACKs for request/reply traffic (rxe/ack_hold.h): the heuristic, and two devices
// playing ping-pong with RDMA WRITEs as ib_write_lat does (each side polls memory for the other's
// write, then writes back): once the exchange is recognised, each ACK leaves just after the
// reply's WRITE, in the same batch; a one-way stream never holds an ACK; and an ACK whose
// reply never comes leaves at its deadline.
#include <atomic>
#include <mutex>

#include "netdev/forwarding.h"
#include "rxe/ack_hold.h"
#include "tests/rxe/fixture.h"
#include "wire/roce_opcode.h"

namespace softrdma::rxe::test {
namespace {

using Clock = AckHold::Clock;
using std::chrono::microseconds;

TEST(AckHold, EngagesAfterQuickRepliesInARowOnly) {
  AckHold h;
  const auto t0 = Clock::now();
  for (int i = 0; i < AckHold::kQuickToEngage - 1; ++i) {
    h.request_received(t0);
    h.request_started(t0 + microseconds(5));
  }
  EXPECT_FALSE(h.engaged());
  h.request_started(t0 + microseconds(6));  // no request came since the last reply: no reply
  h.request_received(t0);
  h.request_started(t0 + microseconds(5));
  EXPECT_FALSE(h.engaged());
  for (int i = 0; i < AckHold::kQuickToEngage - 1; ++i) {
    h.request_received(t0);
    h.request_started(t0 + microseconds(5));
  }
  EXPECT_TRUE(h.engaged());
  h.request_received(t0);
  h.request_started(t0 + AckHold::kHold + microseconds(1));  // a slow one ends it
  EXPECT_FALSE(h.engaged());
  EXPECT_FALSE(h.hold(t0));
  EXPECT_EQ(h.deadline(), Clock::time_point::max());
}

TEST(AckHold, WaitsUntilItsDeadlineThenEndsTheMode) {
  AckHold h;
  const auto t0 = Clock::now();
  for (int i = 0; i < AckHold::kQuickToEngage; ++i) {
    h.request_received(t0);
    h.request_started(t0);
  }
  ASSERT_TRUE(h.engaged());
  EXPECT_TRUE(h.hold(t0));
  EXPECT_EQ(h.deadline(), t0 + AckHold::kHold);
  EXPECT_TRUE(h.hold(t0 + AckHold::kHold - microseconds(1)));  // the deadline stays the first's
  EXPECT_EQ(h.deadline(), t0 + AckHold::kHold);
  h.released();
  EXPECT_EQ(h.deadline(), Clock::time_point::max());
  EXPECT_TRUE(h.hold(t0 + microseconds(100)));  // the next ACK's own deadline
  EXPECT_FALSE(h.hold(t0 + microseconds(100) + AckHold::kHold));
  EXPECT_TRUE(h.engaged());  // until told
  EXPECT_TRUE(h.expire(t0 + microseconds(100) + AckHold::kHold));
  EXPECT_FALSE(h.expire(t0 + microseconds(200) + AckHold::kHold));  // once
  EXPECT_FALSE(h.engaged());
  EXPECT_EQ(h.deadline(), Clock::time_point::max());
}

// Records the opcodes of every batch a device sends.
class OpcodeRecorder : public netdev::ForwardingNetdev {
 public:
  using ForwardingNetdev::ForwardingNetdev;
  std::size_t send_batch(std::span<netdev::Packet* const> pkts) override {
    {
      std::lock_guard l(mu_);
      std::vector<std::uint8_t> ops;
      for (const netdev::Packet* p : pkts) ops.push_back(p->len ? p->data[0] : 0xFF);
      batches_.push_back(std::move(ops));
    }
    return ForwardingNetdev::send_batch(pkts);
  }
  std::vector<std::vector<std::uint8_t>> batches() {
    std::lock_guard l(mu_);
    return batches_;
  }

 private:
  std::mutex mu_;
  std::vector<std::vector<std::uint8_t>> batches_;
};

// One WRITE of `value` into byte 0 of `remote`, waited for.
void write_byte(Qp* qp, Cq* cq, Buffer& local, Buffer& remote, std::uint8_t value) {
  local.bytes[0] = value;
  const Sge sge = local.sge(0, 1);
  ASSERT_EQ(qp->post_send(rdma_wr(WrOpcode::kRdmaWrite, value, std::span(&sge, 1), remote)), 0);
  const Wc wc = one_wc(cq);
  ASSERT_EQ(wc.status, WcStatus::kSuccess);
}

bool wait_byte(const Buffer& buf, std::uint8_t value) {
  return wait_until([&] { return std::atomic_ref(buf.bytes[0]).load() == value; },
                    std::chrono::seconds(10), std::chrono::microseconds(0));
}

// Two devices (b's batches recorded), an RC QP on each, and a byte each writes into the other.
struct Pair {
  std::shared_ptr<netdev::MemoryFabric> fabric = std::make_shared<netdev::MemoryFabric>();
  OpcodeRecorder* rec_b = nullptr;
  Node a{fabric, 1, 1500};
  Node b;
  Qp *qa = nullptr, *qb = nullptr;
  Buffer a_src{a, 64, kAllAccess}, a_dst{a, 64, kAllAccess};
  Buffer b_src{b, 64, kAllAccess}, b_dst{b, 64, kAllAccess};
  std::uint8_t v = 0;  // the last value a wrote
  Pair() : b(make_b()) { std::tie(qa, qb) = connected_qps(a, b); }
  std::unique_ptr<netdev::Netdev> make_b() {
    auto r = std::make_unique<OpcodeRecorder>(
        std::make_unique<netdev::MemoryNetdev>(fabric, addr(2), 1500));
    rec_b = r.get();
    return r;
  }
  // a posts its next WRITE; b sees it placed.
  void a_writes() {
    a_src.bytes[0] = ++v;
    const Sge sa = a_src.sge(0, 1);
    ASSERT_EQ(qa->post_send(rdma_wr(WrOpcode::kRdmaWrite, v, std::span(&sa, 1), b_dst)), 0);
    ASSERT_TRUE(wait_byte(b_dst, v));
  }
  // One round of ping-pong (a writes, b writes back as soon as it sees it): true when b's ACK
  // went with its reply.
  bool round() {
    const std::uint64_t with = qb->counters().acks_with_request;
    a_writes();
    write_byte(qb, b.cq, b_src, a_dst, v);
    EXPECT_EQ(one_wc(a.cq).status, WcStatus::kSuccess);
    return qb->counters().acks_with_request > with;
  }
  // Rounds until b's ACK goes with its reply (the mode engaged); false if it never does.
  bool until_b_waits() {
    for (int rounds = 0; rounds < 100; ++rounds) {
      if (round()) return true;
    }
    return false;
  }
};

TEST(AckHoldRc, PingPongWritesSendEachAckAfterTheReply) {
  Pair p;
  Buffer &a_src = p.a_src, &a_dst = p.a_dst, &b_src = p.b_src, &b_dst = p.b_dst;
  // Rounds until b has sent 20 ACKs with its replies: once the first rounds recognise the
  // exchange, most do (on a loaded machine, or under ASan, a thread descheduled past the hold
  // sends its ACK alone and starts over). Without the waiting ACK, none would.
  constexpr int kMaxRounds = 5000;
  constexpr std::uint64_t kWanted = 20;
  std::atomic<bool> done{false}, b_ok{true};
  std::thread b_side([&] {  // b: waits for each write of a's, and writes back
    for (int i = 1; i <= kMaxRounds && b_ok && !done; ++i) {
      if (!wait_byte(b_dst, static_cast<std::uint8_t>(i))) {
        b_ok = false;
        break;
      }
      b_src.bytes[0] = static_cast<std::uint8_t>(i);
      const Sge sge = b_src.sge(0, 1);
      if (p.qb->post_send(rdma_wr(WrOpcode::kRdmaWrite, i, std::span(&sge, 1), a_dst)) != 0) {
        b_ok = false;
      }
      if (one_wc(p.b.cq).status != WcStatus::kSuccess) b_ok = false;
    }
  });
  int i = 1;
  for (; i <= kMaxRounds && p.qb->counters().acks_with_request < kWanted; ++i) {
    write_byte(p.qa, p.a.cq, a_src, b_dst, static_cast<std::uint8_t>(i));
    ASSERT_TRUE(wait_byte(a_dst, static_cast<std::uint8_t>(i))) << "round " << i;
  }
  done = true;
  // b may be waiting for a next round: give it one.
  write_byte(p.qa, p.a.cq, a_src, b_dst, static_cast<std::uint8_t>(i));
  b_side.join();
  ASSERT_TRUE(b_ok);
  EXPECT_GE(p.qb->counters().acks_with_request, kWanted) << "after " << i << " rounds";
  // In b's batches each such ACK follows the WRITE that replied.
  std::uint64_t after = 0;
  for (const auto& batch : p.rec_b->batches()) {
    for (std::size_t k = 1; k < batch.size(); ++k) {
      if (batch[k] == wire::op::kRcAck && batch[k - 1] == wire::op::kRcWriteOnly) ++after;
    }
  }
  EXPECT_GE(after, kWanted);
}

TEST(AckHoldRc, AOneWayStreamNeverHoldsAnAck) {
  Pair p;
  for (int i = 1; i <= 50; ++i) {
    write_byte(p.qa, p.a.cq, p.a_src, p.b_dst, static_cast<std::uint8_t>(i));
  }
  EXPECT_EQ(p.qb->counters().acks_with_request, 0u);
  EXPECT_EQ(p.qb->counters().ack_waits_expired, 0u);
  EXPECT_EQ(p.qa->counters().acks_with_request, 0u);
}

TEST(AckHoldRc, AnAckWhoseReplyNeverComesLeavesAtItsDeadline) {
  Pair p;
  // Ping-pong until b holds its ACKs, then b stops answering: a's next WRITE still completes,
  // its ACK sent alone at the deadline. (On a loaded machine a round may be too slow and end
  // the mode before that WRITE: then again.)
  bool expired = false;
  for (int attempt = 0; attempt < 20 && !expired; ++attempt) {
    ASSERT_TRUE(p.until_b_waits()) << "b never held an ACK";
    const std::uint64_t before = p.qb->counters().ack_waits_expired;
    write_byte(p.qa, p.a.cq, p.a_src, p.b_dst, ++p.v);
    expired = p.qb->counters().ack_waits_expired == before + 1;
    if (expired) {
      write_byte(p.qa, p.a.cq, p.a_src, p.b_dst, ++p.v);  // the mode has ended: no wait
      EXPECT_EQ(p.qb->counters().ack_waits_expired, before + 1);
    }
  }
  EXPECT_TRUE(expired);
  EXPECT_EQ(p.qa->counters().retransmits, 0u);
}

// A program that ends the exchange as ibv_rc_pingpong does (its last request received, it
// destroys its QP at once, or moves it to ERR as rdma_disconnect does): the ACK waiting for a
// reply leaves then, and the peer's last WRITE completes without a retry.
void ends_right_after_receiving(bool destroy) {
  Pair p;
  ASSERT_TRUE(p.until_b_waits()) << "b never held an ACK";
  p.a_writes();
  if (destroy) {
    ASSERT_EQ(p.b.dev->destroy_qp(p.qb), 0);
  } else {
    QpAttr err;
    err.qp_state = QpState::kErr;
    ASSERT_EQ(p.qb->modify(err, kQpState), 0);
  }
  const Wc wc = one_wc(p.a.cq, std::chrono::seconds(30));
  EXPECT_EQ(wc.status, WcStatus::kSuccess);
  EXPECT_EQ(p.qa->counters().retransmits, 0u);
}

TEST(AckHoldRc, AQpDestroyedRightAfterARequestAcknowledgesItFirst) {
  ends_right_after_receiving(true);
}

TEST(AckHoldRc, AQpMovedToErrorRightAfterARequestAcknowledgesItFirst) {
  ends_right_after_receiving(false);
}

}  // namespace
}  // namespace softrdma::rxe::test
