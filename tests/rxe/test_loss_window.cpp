// RC's loss-adaptive send window (rxe/loss_window.h): the arithmetic, and a receiver that
// holds fewer packets than the device's share, overrun a few times rather than by every
// go-back-N resend.
#include <algorithm>
#include <numeric>
#include <thread>

#include "netdev/forwarding.h"
#include "rxe/loss_window.h"
#include "rxe/psn.h"
#include "rxe/snapshot.h"
#include "tests/rxe/fixture.h"

namespace softrdma::rxe::test {
namespace {

TEST(LossWindow, EachNewLossHalvesItDownToTheFloor) {
  LossWindow w;
  EXPECT_EQ(w.limit(), LossWindow::kMax);
  EXPECT_TRUE(w.on_loss(100, 2048));
  EXPECT_EQ(w.limit(), 1024u);
  EXPECT_TRUE(w.on_loss(300, 2048));  // a later PSN: the resend was overrun too
  EXPECT_EQ(w.limit(), 512u);
  EXPECT_TRUE(w.on_loss(301, 64));  // half of the smaller of the limit and the device's share
  EXPECT_EQ(w.limit(), 32u);
  for (std::uint32_t psn = 400; psn < 410; ++psn) w.on_loss(psn, 2048);
  EXPECT_EQ(w.limit(), LossWindow::kMin);
}

TEST(LossWindow, ALossAtOrBeforeTheLastStillUnacknowledgedCutsNothing) {
  LossWindow w;
  ASSERT_TRUE(w.on_loss(1000, 2048));
  EXPECT_FALSE(w.on_loss(1000, 2048));  // the timer again on the same packet
  EXPECT_FALSE(w.on_loss(990, 2048));   // a NAK that came late
  EXPECT_EQ(w.limit(), 1024u);
  w.on_acked(5, 1001);  // past it: the next loss is a new one, even at an earlier PSN
  EXPECT_TRUE(w.on_loss(900, 2048));
  EXPECT_EQ(w.limit(), 512u);
}

TEST(LossWindow, GrowsByOnePerWindowAcknowledgedBackToTheTop) {
  LossWindow w;
  ASSERT_TRUE(w.on_loss(kPsnMask - 2, 64));  // 32, across the PSN wrap
  w.on_acked(31, 5);
  EXPECT_EQ(w.limit(), 32u);
  w.on_acked(1, 6);
  EXPECT_EQ(w.limit(), 33u);
  w.on_acked(33 + 34, 7);
  EXPECT_EQ(w.limit(), 35u);
  w.on_acked(100'000'000, 8);
  EXPECT_EQ(w.limit(), LossWindow::kMax);
  w.reset();
  EXPECT_EQ(w.limit(), LossWindow::kMax);
}

// A receiving device that takes at most 32 datagrams per 50 µs from its netdev: slower than
// the sender, as a receiver with a per-packet cost is.
class SlowReceiver : public netdev::ForwardingNetdev {
 public:
  using ForwardingNetdev::ForwardingNetdev;
  std::size_t recv_batch(std::span<netdev::Packet* const> pkts) override {
    std::this_thread::sleep_for(std::chrono::microseconds(50));
    return ForwardingNetdev::recv_batch(pkts.first(std::min<std::size_t>(pkts.size(), 32)));
  }
};

// A receiver whose queue holds 300 datagrams (as a NIC ring or DPDK's queues would) and a
// writer whose share of the device's budget is 2048 packets: the first windows overrun it,
// the cuts bring the window under what it holds, and the rest goes through without loss.
TEST(LossWindowRc, AShortReceiveQueueIsOverrunAFewTimesOnly) {
  constexpr std::size_t kQueue = 300;
  auto fabric = std::make_shared<netdev::MemoryFabric>(kQueue);
  Node a(fabric, 1, 1500);
  Node b(std::make_unique<SlowReceiver>(
      std::make_unique<netdev::MemoryNetdev>(fabric, addr(2), 1500)));
  ConnectOptions o;
  o.mtu = Mtu::k1024;
  auto [qa, qb] = connected_qps(a, b, QpType::kRc, o);
  constexpr std::uint32_t kBytes = 16 << 20;  // 16,384 packets
  Buffer src(a, kBytes, kAllAccess), dst(b, kBytes, kAllAccess);
  std::iota(src.bytes.begin(), src.bytes.end(), std::uint8_t{1});
  const Sge sge = src.sge(0, kBytes);
  ASSERT_EQ(qa->post_send(rdma_wr(WrOpcode::kRdmaWrite, 1, std::span(&sge, 1), dst)), 0);
  const Wc wc = one_wc(a.cq, std::chrono::seconds(60));
  ASSERT_EQ(wc.status, WcStatus::kSuccess);
  EXPECT_EQ(src.bytes, dst.bytes);
  EXPECT_GT(b.dev->netdev().counters().rx_dropped, 0u);  // the queue was overrun: the test is real
  // Without the cuts every 2048-packet resend overran the queue again: one go-back-N per
  // ~300 packets delivered, 50 and more.
  EXPECT_LE(qa->counters().retransmits, 20u);
  EXPECT_LE(a.dev->counters().tx_packets, 2 * (kBytes / 1024));  // before: 10 times over
  QpInfo info;
  qa->info(info);
  EXPECT_LE(info.loss_window, 2 * kQueue);
  EXPECT_GE(info.loss_window, LossWindow::kMin);
  QpInfo ib;
  qb->info(ib);
  EXPECT_EQ(ib.loss_window, LossWindow::kMax);  // b sent no data
}

}  // namespace
}  // namespace softrdma::rxe::test
