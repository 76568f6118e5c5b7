// UD datagrams that find no receive WQE wait for one (rxe/ud_hold.h): delivered in order once
// receives are posted, dropped and counted at their deadline, dropped at once with --cc none.
#include "rxe/ud_hold.h"
#include "tests/rxe/fixture.h"

namespace softrdma::rxe::test {
namespace {

netdev::Packet datagram(std::vector<std::uint8_t>& bytes, std::uint8_t tag, std::uint32_t len) {
  bytes.assign(len, tag);
  netdev::Packet p;
  p.src = addr(1);
  p.traffic_class = tag;
  p.data = bytes.data();
  p.len = len;
  p.cap = len;
  return p;
}

TEST(UdHoldRing, KeepsOrderAcrossGrowthAndWrap) {
  std::atomic<std::int64_t> budget{2};
  UdHold h;
  h.set_budget(&budget);
  std::vector<std::uint8_t> b;
  const auto t = UdHold::Clock::now();
  std::uint8_t next_in = 0, next_out = 0;
  // Wrap the first chunk, then grow into the second while wrapped.
  for (std::size_t i = 0; i < UdHold::kChunkSlots; ++i)
    ASSERT_TRUE(h.hold(datagram(b, next_in++, 100), t));
  for (int i = 0; i < 10; ++i) {
    ASSERT_EQ(h.front().data[0], next_out++);
    h.pop();
  }
  for (int i = 0; i < 10 + 30; ++i) ASSERT_TRUE(h.hold(datagram(b, next_in++, 100), t));
  EXPECT_EQ(budget.load(), 0);
  EXPECT_EQ(h.size(), UdHold::kChunkSlots + 30);
  while (!h.empty()) {
    EXPECT_EQ(h.front().data[0], next_out) << "out of order";
    EXPECT_EQ(h.front().traffic_class, next_out);
    EXPECT_EQ(h.front().len, 100u);
    ++next_out;
    h.pop();
  }
  EXPECT_EQ(next_out, next_in);
}

TEST(UdHoldRing, BoundedByTheBudgetAndTheSlotSize) {
  std::atomic<std::int64_t> budget{1};
  std::vector<std::uint8_t> b;
  const auto t = UdHold::Clock::now();
  {
    UdHold h;
    h.set_budget(&budget);
    EXPECT_FALSE(h.hold(datagram(b, 1, UdHold::kSlotBytes + 1), t));
    for (std::size_t i = 0; i < UdHold::kChunkSlots; ++i) {
      ASSERT_TRUE(h.hold(datagram(b, 1, UdHold::kSlotBytes), t));
    }
    EXPECT_FALSE(h.hold(datagram(b, 1, 10), t));  // the device's budget is spent
    EXPECT_EQ(budget.load(), 0);
    EXPECT_EQ(h.clear(), UdHold::kChunkSlots);
    EXPECT_TRUE(h.empty());
  }
  EXPECT_EQ(budget.load(), 1);  // given back with the QP
  UdHold none;                  // no budget: holds nothing
  EXPECT_FALSE(none.hold(datagram(b, 1, 10), t));
}

// A UD QP on each of two in-memory devices with congestion control `cc`, both in RTS.
struct UdNodes {
  std::shared_ptr<netdev::MemoryFabric> fabric = std::make_shared<netdev::MemoryFabric>();
  Node a, b;
  Qp *qa, *qb;
  std::uint32_t ah;
  explicit UdNodes(const CcConfig& cc)
      : a(std::make_unique<netdev::MemoryNetdev>(fabric, addr(1), 9000), cc),
        b(std::make_unique<netdev::MemoryNetdev>(fabric, addr(2), 9000), cc) {
    qa = make_qp(a, QpType::kUd);
    qb = make_qp(b, QpType::kUd);
    bring_up(qa, b.gid(), 0, 0, 0, {});
    bring_up(qb, a.gid(), 0, 0, 0, {});
    AhAttr attr;
    attr.dgid = b.gid();
    int err = 0;
    ah = a.dev->create_ah(a.pd, attr, &err);
  }
  // Sends n datagrams of 1000 bytes, the i-th filled with i + 1 and carrying i as immediate.
  void send(Buffer& src, int n) {
    for (int i = 0; i < n; ++i) {
      std::fill(src.bytes.begin(), src.bytes.end(), static_cast<std::uint8_t>(i + 1));
      const Sge ss = src.sge(0, 1000);
      SendWr w = wr(WrOpcode::kSendWithImm, static_cast<std::uint64_t>(i), std::span(&ss, 1));
      w.ah = ah;
      w.remote_qpn = qb->qpn();
      w.remote_qkey = 0x11111111;
      w.imm_data = static_cast<std::uint32_t>(i);
      ASSERT_EQ(qa->post_send(w), 0);
      ASSERT_EQ(wait_wc(a.cq, 1).size(), 1u);  // UD completes when sent
    }
  }
};

// Sends n datagrams to a QP with no receive posted, then posts n receives: each arrives, in
// order, and none is dropped. Returns the CNPs the sender handled.
std::uint64_t held_then_received(int n_msgs) {
  CcConfig cc;
  cc.ud_hold = std::chrono::seconds(60);  // no deadline within the test
  UdNodes n{cc};
  const auto count = static_cast<std::size_t>(n_msgs);
  Buffer src(n.a, 1000, kAllAccess);
  Buffer dst(n.b, 1040 * count, kAllAccess);
  n.send(src, n_msgs);
  EXPECT_TRUE(wait_until([&] { return n.qb->counters().held_no_recv == count; }));
  EXPECT_EQ(n.b.cq->count(), 0u);
  for (std::size_t i = 0; i < count; ++i) {
    const Sge rs = dst.sge(i * 1040, 1040);
    EXPECT_EQ(post_recv(n.qb, i, std::span(&rs, 1)), 0);
  }
  const std::vector<Wc> got = wait_wc(n.b.cq, count);
  EXPECT_EQ(got.size(), count);
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].status, WcStatus::kSuccess);
    EXPECT_EQ(got[i].byte_len, 1040u);
    EXPECT_EQ(got[i].imm_data, static_cast<std::uint32_t>(i)) << "out of order";
    EXPECT_EQ(dst.bytes[i * 1040 + 40], static_cast<std::uint8_t>(i + 1));
  }
  EXPECT_EQ(n.qb->counters().dropped_no_recv, 0u);
  // A CNP the receiver sent has had time to arrive (the sender's progress thread takes it).
  wait_until([&] { return n.qa->counters().rp_cnp_handled > 0; }, std::chrono::milliseconds(200));
  return n.qa->counters().rp_cnp_handled;
}

TEST(UdHold, DatagramsWithoutAReceiveWaitForOneAndArriveInOrder) {
  // A shallow hold (a program briefly off its core) is not congestion.
  EXPECT_EQ(held_then_received(100), 0u);
}

TEST(UdHold, ADeepHoldIsCongestionTheSenderHearsOf) {
  EXPECT_GE(held_then_received(static_cast<int>(UdHold::kCongestedAbove) + 50), 1u);
}

TEST(UdHold, DatagramsStillWithoutAReceiveAtTheDeadlineAreDroppedAndCounted) {
  CcConfig cc;
  cc.ud_hold = std::chrono::milliseconds(2);
  UdNodes n{cc};
  Buffer src(n.a, 1000, kAllAccess);
  Buffer dst(n.b, 1040, kAllAccess);
  n.send(src, 5);
  ASSERT_TRUE(wait_until([&] { return n.qb->counters().dropped_no_recv == 5; }));
  EXPECT_EQ(n.qb->counters().held_no_recv, 5u);
  const Sge rs = dst.sge(0, 1040);
  ASSERT_EQ(post_recv(n.qb, 1, std::span(&rs, 1)), 0);
  n.send(src, 1);  // the next one takes the receive
  const Wc wc = one_wc(n.b.cq);
  EXPECT_EQ(wc.status, WcStatus::kSuccess);
  EXPECT_EQ(wc.imm_data, 0u);
  EXPECT_EQ(n.b.cq->count(), 0u);
}

TEST(UdHold, WithoutCongestionControlADatagramWithoutAReceiveIsDroppedAtOnce) {
  CcConfig cc;
  ASSERT_TRUE([&] {
    std::string error;
    return parse_cc("none", cc, error);
  }());
  UdNodes n{cc};
  Buffer src(n.a, 1000, kAllAccess);
  n.send(src, 3);
  ASSERT_TRUE(wait_until([&] { return n.qb->counters().dropped_no_recv == 3; }));
  EXPECT_EQ(n.qb->counters().held_no_recv, 0u);
}

TEST(UdHold, AQpOfAnSrqHoldsNothing) {
  auto fabric = std::make_shared<netdev::MemoryFabric>();
  Node a(fabric, 1), b(fabric, 2);
  int err = 0;
  Srq* srq = b.dev->create_srq(b.pd, 16, 1, 0, &err);
  ASSERT_EQ(err, 0);
  Qp* qa = make_qp(a, QpType::kUd);
  Qp* qb = make_qp(b, QpType::kUd, srq);
  bring_up(qa, b.gid(), 0, 0, 0, {});
  bring_up(qb, a.gid(), 0, 0, 0, {});
  AhAttr attr;
  attr.dgid = b.gid();
  const std::uint32_t ah = a.dev->create_ah(a.pd, attr, &err);
  Buffer src(a, 100, kAllAccess);
  const Sge ss = src.sge(0, 100);
  SendWr w = wr(WrOpcode::kSend, 1, std::span(&ss, 1));
  w.ah = ah;
  w.remote_qpn = qb->qpn();
  w.remote_qkey = 0x11111111;
  ASSERT_EQ(qa->post_send(w), 0);
  EXPECT_TRUE(wait_until([&] { return qb->counters().dropped_no_recv == 1; }));
  EXPECT_EQ(qb->counters().held_no_recv, 0u);
}

TEST(UdHold, AQpThatFailsDropsWhatItHeld) {
  CcConfig cc;
  cc.ud_hold = std::chrono::seconds(60);
  UdNodes n{cc};
  Buffer src(n.a, 1000, kAllAccess);
  n.send(src, 4);
  ASSERT_TRUE(wait_until([&] { return n.qb->counters().held_no_recv == 4; }));
  QpAttr err;
  err.qp_state = QpState::kErr;
  ASSERT_EQ(n.qb->modify(err, kQpState), 0);
  EXPECT_EQ(n.qb->counters().dropped_no_recv, 4u);
}

}  // namespace
}  // namespace softrdma::rxe::test
