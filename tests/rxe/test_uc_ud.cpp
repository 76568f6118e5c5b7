// UC and UD: every operation, completion fields, the UD GRH, Q_Key checks, and
// under loss: only whole messages go missing, never a corrupted one.
#include <chrono>
#include <random>
#include <thread>

#include "tests/rxe/fixture.h"

namespace softrdma::rxe::test {
namespace {

class Uc : public Connected<QpType::kUc> {};
// A UD QP on each node, both in RTS.
class Ud : public QpPair<QpType::kUd> {
 protected:
  void SetUp() override {
    QpPair::SetUp();
    bring_up(qa, b->gid(), 0, 0, 0, {});
    bring_up(qb, a->gid(), 0, 0, 0, {});
  }
};

// A UD request of `sge` through address handle `ah` to QP `qpn`, with Q_Key `qkey`.
SendWr ud_wr(WrOpcode op, std::uint64_t id, std::span<const Sge> sge, std::uint32_t ah,
             std::uint32_t qpn, std::uint32_t qkey = 0x11111111) {
  SendWr w = wr(op, id, sge);
  w.ah = ah;
  w.remote_qpn = qpn;
  w.remote_qkey = qkey;
  return w;
}

// Whether each of the `sent` packets `from` sent to `qp` (on `to`) is accounted for: dropped by
// `from`'s faults, dropped by `to`'s netdev (bad ICRC, malformed, a full queue) or taken by `qp`.
// Under loss there is no completion count to wait for; this is what a test waits for instead.
bool all_accounted_for(const Node& from, const Node& to, Qp* qp, std::uint64_t sent) {
  const netdev::Counters f = from.dev->netdev().counters();
  const netdev::Counters t = to.dev->netdev().counters();
  return f.fault_dropped + t.rx_icrc_errors + t.rx_malformed + t.rx_dropped +
             qp->counters().rx_packets >=
         sent;
}

// An address handle of `from` for `to`'s GID.
std::uint32_t ah_to(Node& from, const Node& to) {
  AhAttr ah;
  ah.dgid = to.gid();
  int err = 0;
  const std::uint32_t id = from.dev->create_ah(from.pd, ah, &err);
  EXPECT_EQ(err, 0);
  return id;
}

TEST_F(Uc, SendWriteAndImmediates) {
  Buffer src(*a, 100000, kAllAccess, 0x5C);
  Buffer dst(*b, 100000, kAllAccess);
  const Sge rs = dst.sge(0, 100000);
  ASSERT_EQ(post_recv(qb, 1, std::span(&rs, 1)), 0);
  const Sge ss = src.sge(0, 9000);
  SendWr w = wr(WrOpcode::kSendWithImm, 1, std::span(&ss, 1));
  w.imm_data = 42;
  ASSERT_EQ(qa->post_send(w), 0);
  Wc rwc = one_wc(b->cq);
  EXPECT_EQ(rwc.status, WcStatus::kSuccess);
  EXPECT_EQ(rwc.byte_len, 9000u);
  EXPECT_EQ(rwc.imm_data, 42u);
  EXPECT_EQ(rwc.wc_flags, static_cast<std::uint32_t>(kWcWithImm));
  Wc swc = one_wc(a->cq);
  EXPECT_EQ(swc.opcode, WcOpcode::kSend);

  std::fill(dst.bytes.begin(), dst.bytes.end(), 0);
  ASSERT_EQ(post_recv(qb, 2, std::span(&rs, 1)), 0);
  const Sge ws = src.sge(0, 20000);
  w = rdma_wr(WrOpcode::kRdmaWriteWithImm, 2, std::span(&ws, 1), dst, 100);
  w.imm_data = 43;
  ASSERT_EQ(qa->post_send(w), 0);
  rwc = one_wc(b->cq);
  EXPECT_EQ(rwc.opcode, WcOpcode::kRecvRdmaWithImm);
  EXPECT_EQ(rwc.imm_data, 43u);
  EXPECT_EQ(dst.bytes[100], 0x5C);
  EXPECT_EQ(dst.bytes[20099], 0x5C);
  EXPECT_EQ(dst.bytes[20100], 0);
  // READ and atomics do not exist on UC.
  w.opcode = WrOpcode::kRdmaRead;
  EXPECT_EQ(qa->post_send(w), EINVAL);
}

TEST(UcFaults, LossDropsWholeMessagesOnly) {
  auto fabric = std::make_shared<netdev::MemoryFabric>();
  netdev::FaultConfig f;
  f.drop = 0.05;
  f.seed = 3;
  f.seeded = true;
  Node a(fabric, 1, 9000, f);
  Node b(fabric, 2, 9000);
  const auto [qa, qb] = connected_qps(a, b, QpType::kUc);
  constexpr int kMessages = 400;
  constexpr std::uint32_t kLen = 3 * 4096 + 100;  // 4 packets
  Buffer src(a, kLen, kAllAccess);
  Buffer dst(b, kLen * kMessages, kAllAccess);
  std::vector<Sge> rs(kMessages);
  for (int i = 0; i < kMessages; ++i) {
    rs[i] = dst.sge(static_cast<std::size_t>(i) * kLen, kLen);
    ASSERT_EQ(post_recv(qb, i, std::span(&rs[i], 1)), 0);
  }
  for (int i = 0; i < kMessages; ++i) {
    std::fill(src.bytes.begin(), src.bytes.end(), static_cast<std::uint8_t>(i + 1));
    const Sge ss = src.sge(0, kLen);
    SendWr w = wr(WrOpcode::kSendWithImm, i, std::span(&ss, 1));
    w.imm_data = static_cast<std::uint32_t>(i);
    ASSERT_EQ(qa->post_send(w), 0);
    ASSERT_EQ(wait_wc(a.cq, 1).size(), 1u);  // UC completes when sent
  }
  // Some are lost: wait until every packet is lost or taken by the receiver (4 per message).
  EXPECT_TRUE(wait_until([&] { return all_accounted_for(a, b, qb, kMessages * 4); }));
  // The pass that took the last packets hands out their completions at its end, after the QP
  // counted them (as UdFaults below): wait until no more arrive.
  EXPECT_TRUE(wait_until([&] {
    const std::size_t before = b.cq->count();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return b.cq->count() == before;
  }));
  std::vector<Wc> got;
  Wc buf[64];
  int n;
  while ((n = b.cq->poll(buf)) > 0) got.insert(got.end(), buf, buf + n);
  EXPECT_LT(got.size(), static_cast<std::size_t>(kMessages));  // some were lost
  EXPECT_GT(got.size(), static_cast<std::size_t>(kMessages) / 2);
  for (std::size_t k = 0; k < got.size(); ++k) {
    const Wc& wc = got[k];
    ASSERT_EQ(wc.status, WcStatus::kSuccess);
    ASSERT_EQ(wc.byte_len, kLen);
    // Receive WQEs are used in order; the message in WQE k is whole and one message.
    const std::size_t off = k * kLen;
    const std::uint8_t tag = dst.bytes[off];
    EXPECT_EQ(tag, static_cast<std::uint8_t>(wc.imm_data + 1));
    EXPECT_TRUE(std::all_of(dst.bytes.begin() + off, dst.bytes.begin() + off + kLen,
                            [tag](std::uint8_t x) { return x == tag; }))
        << "receive " << k << " mixes messages";
  }
}

TEST_F(Ud, SendWithGrhAndImmediate) {
  Buffer src(*a, 4096, kAllAccess);
  Buffer dst(*b, 4096 + 40, kAllAccess);
  for (std::size_t i = 0; i < src.bytes.size(); ++i) src.bytes[i] = static_cast<std::uint8_t>(i);
  const std::uint32_t ahid = ah_to(*a, *b);
  const Sge rs = dst.sge(0, 4096 + 40);
  ASSERT_EQ(post_recv(qb, 11, std::span(&rs, 1)), 0);
  const Sge ss = src.sge(0, 1000);
  SendWr w = ud_wr(WrOpcode::kSendWithImm, 12, std::span(&ss, 1), ahid, qb->qpn());
  w.imm_data = 0xCAFE;
  ASSERT_EQ(qa->post_send(w), 0);
  Wc rwc = one_wc(b->cq);
  EXPECT_EQ(rwc.status, WcStatus::kSuccess);
  EXPECT_EQ(rwc.byte_len, 1040u);
  EXPECT_EQ(rwc.src_qp, qa->qpn());
  EXPECT_EQ(rwc.wc_flags, static_cast<std::uint32_t>(kWcGrh | kWcWithImm));
  EXPECT_EQ(rwc.imm_data, 0xCAFEu);
  // sl says RoCE v2 over IPv4, as a RoCE NIC reports it (UCX reads the GRH's layout from it).
  EXPECT_EQ(rwc.sl, 0xA);
  // GRH: 20 zero bytes, then the IPv4 header with the sender's address.
  EXPECT_TRUE(
      std::all_of(dst.bytes.begin(), dst.bytes.begin() + 20, [](auto x) { return x == 0; }));
  EXPECT_EQ(dst.bytes[20], 0x45);
  EXPECT_EQ(dst.bytes[20 + 9], 17);  // UDP
  EXPECT_EQ(dst.bytes[20 + 12], 192);
  EXPECT_EQ(dst.bytes[20 + 15], 1);  // 192.0.2.1
  EXPECT_EQ(dst.bytes[20 + 19], 2);  // 192.0.2.2
  EXPECT_TRUE(std::equal(src.bytes.begin(), src.bytes.begin() + 1000, dst.bytes.begin() + 40));
  Wc swc = one_wc(a->cq);
  EXPECT_EQ(swc.status, WcStatus::kSuccess);
}

TEST_F(Ud, WrongQkeyIsDroppedAndCounted) {
  Buffer src(*a, 64, kAllAccess);
  Buffer dst(*b, 128, kAllAccess);
  const std::uint32_t ahid = ah_to(*a, *b);
  const Sge rs = dst.sge(0, 128);
  ASSERT_EQ(post_recv(qb, 1, std::span(&rs, 1)), 0);
  const Sge ss = src.sge(0, 10);
  SendWr w = ud_wr(WrOpcode::kSend, 1, std::span(&ss, 1), ahid, qb->qpn(), 0x22222222);
  ASSERT_EQ(qa->post_send(w), 0);
  ASSERT_EQ(wait_wc(a->cq, 1).size(), 1u);
  EXPECT_TRUE(wait_until([&] { return qb->counters().dropped_bad_qkey == 1; }));
  EXPECT_EQ(b->cq->count(), 0u);
  // A Q_Key with the high bit set uses the sender QP's own Q_Key (equal here).
  w.remote_qkey = 0x80000000;
  ASSERT_EQ(qa->post_send(w), 0);
  EXPECT_EQ(wait_wc(b->cq, 1).size(), 1u);
}

TEST_F(Ud, MessagesLargerThanTheMtuAreRefusedAndShortBuffersAreLengthErrors) {
  Buffer src(*a, 8192, kAllAccess);
  Buffer dst(*b, 128, kAllAccess);
  const std::uint32_t ahid = ah_to(*a, *b);
  const Sge big = src.sge(0, 4097);
  SendWr w = ud_wr(WrOpcode::kSend, 1, std::span(&big, 1), ahid, qb->qpn());
  EXPECT_EQ(qa->post_send(w), EINVAL);
  const Sge rs = dst.sge(0, 100);  // room for the GRH and 60 bytes
  ASSERT_EQ(post_recv(qb, 1, std::span(&rs, 1)), 0);
  const Sge ss = src.sge(0, 61);
  w.sg_list = std::span(&ss, 1);
  ASSERT_EQ(qa->post_send(w), 0);
  Wc rwc = one_wc(b->cq);
  EXPECT_EQ(rwc.status, WcStatus::kLocLenErr);
  EXPECT_EQ(qb->state(), QpState::kRts);  // a UD receive error does not break the QP
}

TEST(UdFaults, LossDropsWholeDatagramsOnly) {
  auto fabric = std::make_shared<netdev::MemoryFabric>();
  netdev::FaultConfig f;
  f.drop = 0.1;
  f.corrupt = 0.05;
  f.seed = 4;
  f.seeded = true;
  Node a(fabric, 1, 9000, f);
  Node b(fabric, 2, 9000);
  Qp* qa = make_qp(a, QpType::kUd);
  Qp* qb = make_qp(b, QpType::kUd);
  bring_up(qa, b.gid(), 0, 0, 0, {});
  bring_up(qb, a.gid(), 0, 0, 0, {});
  const std::uint32_t ahid = ah_to(a, b);
  constexpr int kMessages = 300;
  Buffer src(a, 2048, kAllAccess);
  Buffer dst(b, 2088 * kMessages, kAllAccess);
  std::vector<Sge> rs(kMessages);
  for (int i = 0; i < kMessages; ++i) {
    rs[i] = dst.sge(static_cast<std::size_t>(i) * 2088, 2088);
    ASSERT_EQ(post_recv(qb, i, std::span(&rs[i], 1)), 0);
  }
  for (int i = 0; i < kMessages; ++i) {
    std::fill(src.bytes.begin(), src.bytes.end(), static_cast<std::uint8_t>(i));
    const Sge ss = src.sge(0, 2048);
    SendWr w = ud_wr(WrOpcode::kSendWithImm, i, std::span(&ss, 1), ahid, qb->qpn());
    w.imm_data = static_cast<std::uint32_t>(i);
    ASSERT_EQ(qa->post_send(w), 0);
    ASSERT_EQ(wait_wc(a.cq, 1).size(), 1u);
  }
  // Some are lost or corrupted: wait until every datagram is dropped or taken by the receiver,
  // and each one taken has completed (a pass hands out its completions at its end, after the
  // QP counted the datagrams: polling at once found 71 of them under make test's load).
  EXPECT_TRUE(wait_until([&] { return all_accounted_for(a, b, qb, kMessages); }));
  EXPECT_TRUE(wait_until([&] { return b.cq->count() >= qb->counters().rx_packets; }));
  std::vector<Wc> got;
  Wc buf[64];
  int n;
  while ((n = b.cq->poll(buf)) > 0) got.insert(got.end(), buf, buf + n);
  EXPECT_LT(got.size(), static_cast<std::size_t>(kMessages));
  EXPECT_GT(got.size(), static_cast<std::size_t>(kMessages) / 2);
  EXPECT_GT(b.dev->netdev().counters().rx_icrc_errors, 0u);
  for (std::size_t k = 0; k < got.size(); ++k) {
    const std::size_t off = k * 2088 + 40;
    const auto tag = static_cast<std::uint8_t>(got[k].imm_data);
    EXPECT_TRUE(std::all_of(dst.bytes.begin() + off, dst.bytes.begin() + off + 2048,
                            [tag](std::uint8_t x) { return x == tag; }));
  }
}

}  // namespace
}  // namespace softrdma::rxe::test

namespace softrdma::rxe::test {
namespace {

TEST_F(Ud, ASendErrorPutsTheSendQueueInErrorAndReceivesGoOn) {
  const std::uint32_t to_b = ah_to(*a, *b);
  const std::uint32_t to_a = ah_to(*b, *a);
  Buffer s(*a, 256, kAllAccess, 1);
  Buffer r(*a, 256, kAllAccess, 0);
  Buffer bs(*b, 256, kAllAccess, 9);
  Sge bad = s.sge(0, 16);
  bad.lkey ^= 0x40;
  SendWr w = ud_wr(WrOpcode::kSend, 1, std::span(&bad, 1), to_b, qb->qpn());
  ASSERT_EQ(qa->post_send(w), 0);
  SendWr w2 = w;
  w2.wr_id = 2;
  ASSERT_EQ(qa->post_send(w2), 0);
  auto wc = wait_wc(a->cq, 2);
  ASSERT_EQ(wc.size(), 2u);
  EXPECT_EQ(wc[0].status, WcStatus::kLocProtErr);
  EXPECT_EQ(wc[1].status, WcStatus::kWrFlushErr);
  EXPECT_EQ(qa->state(), QpState::kSqe);
  // Receives go on in SQE.
  const Sge rs = r.sge(0, 256);
  ASSERT_EQ(post_recv(qa, 3, std::span(&rs, 1)), 0);
  const Sge ss = bs.sge(0, 8);
  SendWr from_b = ud_wr(WrOpcode::kSend, 4, std::span(&ss, 1), to_a, qa->qpn());
  ASSERT_EQ(qb->post_send(from_b), 0);
  wc = wait_wc(a->cq, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, WcStatus::kSuccess);
  EXPECT_EQ(wc[0].wr_id, 3u);
  // SQE -> RTS resumes sending.
  QpAttr attr;
  attr.qp_state = QpState::kRts;
  ASSERT_EQ(qa->modify(attr, kQpState), 0);
  const Sge good = s.sge(0, 16);
  w.sg_list = std::span(&good, 1);
  w.wr_id = 5;
  const Sge brs = bs.sge(0, 256);
  ASSERT_EQ(post_recv(qb, 6, std::span(&brs, 1)), 0);
  ASSERT_EQ(qa->post_send(w), 0);
  wc = wait_wc(a->cq, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, WcStatus::kSuccess);
  wc = wait_wc(b->cq, 2);  // B's own send, and the datagram it received
  ASSERT_EQ(wc.size(), 2u);
}

}  // namespace
}  // namespace softrdma::rxe::test
