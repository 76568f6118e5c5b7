// The emulated switch port: its spec, a queue drained at the port's rate (explicit times), RED
// marking (as datagrams leave) of ECN-capable ones only, counted tail drops, and a lossless
// (pfc=) port that pauses its sender and holds what does not fit.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "netdev/backlog_marker.h"
#include "netdev/memory.h"
#include "netdev/pause_frame.h"
#include "netdev/switch_port.h"
#include "wire/roce_headers.h"

namespace softrdma::netdev {
namespace {

using namespace std::chrono_literals;

TEST(SwitchSpec, ParsesRatesSizesAndRed) {
  SwitchConfig c;
  std::string error;
  ASSERT_TRUE(parse_switch("rate=10G,buffer=1M,ecn=20K:200K:0.01", c, error)) << error;
  EXPECT_EQ(c.rate_bps, 10e9);
  EXPECT_EQ(c.buffer, 1u << 20);
  EXPECT_EQ(c.kmin, 20u << 10);
  EXPECT_EQ(c.kmax, 200u << 10);
  EXPECT_DOUBLE_EQ(c.pmax, 0.01);
  ASSERT_TRUE(parse_switch("ecn=0:0:1,buffer=9216,rate=1.5M,seed=3", c, error)) << error;
  EXPECT_EQ(c.rate_bps, 1.5e6);
  EXPECT_EQ(c.seed, 3u);
  for (const char* bad : {"", "rate=10G", "rate=10G,buffer=1M", "rate=,buffer=1M,ecn=1:2:0",
                          "rate=10X,buffer=1M,ecn=1:2:0", "rate=10G,buffer=-1,ecn=1:2:0",
                          "rate=10G,buffer=1M,ecn=2:1:0", "rate=10G,buffer=1M,ecn=1:2:2",
                          "rate=10G,buffer=1M,ecn=1:2", "rate=10G,buffer=1M,ecn=1:2M:0.1",
                          "rate=10G,buffer=1M,ecn=1:2:0.1,pfc=1:2", "rate=10G,,buffer=1M",
                          "rate=10G,buffer=128G,ecn=1:2:0"}) {
    EXPECT_FALSE(parse_switch(bad, c, error)) << bad;
    EXPECT_FALSE(error.empty()) << bad;
  }
}

TEST(SwitchSpec, PfcTakesXoffAndXonWithinTheBuffer) {
  SwitchConfig c;
  std::string error;
  ASSERT_TRUE(parse_switch("rate=10G,buffer=1M,ecn=20K:200K:0.01,pfc=512K:256K", c, error))
      << error;
  EXPECT_TRUE(c.pfc);
  EXPECT_EQ(c.xoff, 512u << 10);
  EXPECT_EQ(c.xon, 256u << 10);
  ASSERT_TRUE(parse_switch("rate=10G,buffer=1M,ecn=20K:200K:0.01,pfc=1M:0", c, error)) << error;
  ASSERT_TRUE(parse_switch("rate=10G,buffer=1M,ecn=20K:200K:0.01", c, error)) << error;
  EXPECT_FALSE(c.pfc);
  for (const char* bad :
       {"pfc=256K:512K", "pfc=2M:1M", "pfc=0:0", "pfc=512K", "pfc=a:b", "pfc=512K:-1"}) {
    const std::string spec = std::string("rate=10G,buffer=1M,ecn=20K:200K:0.01,") + bad;
    EXPECT_FALSE(parse_switch(spec, c, error)) << bad;
    EXPECT_NE(error.find("pfc"), std::string::npos) << bad << ": " << error;
  }
}

struct Wire {
  std::shared_ptr<MemoryFabric> fabric = std::make_shared<MemoryFabric>();
  MemoryNetdev tx{fabric, IpAddr::v4(0x0A000001), 9000};
  std::unique_ptr<SwitchPortNetdev> port;
  std::vector<std::uint8_t> buf = std::vector<std::uint8_t>(64 * kMaxDatagram);
  std::vector<Packet> pkts = std::vector<Packet>(64);
  std::vector<Packet*> ptrs;
  explicit Wire(const SwitchConfig& c) {
    port = std::make_unique<SwitchPortNetdev>(
        std::make_unique<MemoryNetdev>(fabric, IpAddr::v4(0x0A000002), 9000), c);
    for (std::size_t i = 0; i < pkts.size(); ++i) {
      pkts[i].data = buf.data() + i * kMaxDatagram;
      pkts[i].cap = kMaxDatagram;
      ptrs.push_back(&pkts[i]);
    }
  }
  // n UD datagrams of 1024 bytes (BTH, DETH, 1000 payload bytes, ICRC) with this ECN field.
  void send(int n, std::uint8_t ecn) {
    std::vector<Packet> out(static_cast<std::size_t>(n));
    std::vector<std::uint8_t> bytes(static_cast<std::size_t>(n) * 1024);
    std::vector<Packet*> op;
    std::vector<std::uint8_t> payload(1000, 0x5A);
    for (int i = 0; i < n; ++i) {
      wire::RoceHeaders h;
      h.bth.opcode = wire::op::kUdSendOnly;
      h.bth.dest_qp = 0x11;
      h.bth.psn = static_cast<std::uint32_t>(i);
      h.deth = wire::Deth{1, 0, 0x12};
      Packet& p = out[static_cast<std::size_t>(i)];
      p.data = bytes.data() + 1024 * i;
      p.cap = 1024;
      p.len = static_cast<std::uint32_t>(
          *wire::build_roce(wire::MutBytes(p.data, p.cap), h, wire::Bytes(payload)));
      p.src = IpAddr::v4(0x0A000001);
      p.dst = IpAddr::v4(0x0A000002);
      p.traffic_class = static_cast<std::uint8_t>(0x20 | ecn);  // DSCP 8
      op.push_back(&p);
    }
    ASSERT_EQ(tx.send_batch(op), op.size());
    ASSERT_EQ(out[0].len, 1024u);
  }
  std::size_t recv(SwitchPortNetdev::Clock::time_point t) { return port->recv_batch_at(ptrs, t); }
};

TEST(SwitchPort, DrainsAtItsRateMarksAboveKmaxAndDropsWhatDoesNotFit) {
  SwitchConfig c;
  c.rate_bps = 8e9;  // a byte per ns: a 1024-byte datagram and 42 bytes of framing take 1066 ns
  c.buffer = 8000;
  c.kmin = 2000;
  c.kmax = 4000;
  c.pmax = 0;  // none between KMIN and KMAX, all beyond
  Wire w(c);
  const auto t0 = SwitchPortNetdev::Clock::now();
  EXPECT_EQ(w.recv(t0), 0u);  // the port looks at t0: what it finds next arrived at t0
  w.send(10, 2);              // ECT(0)
  // Arriving at once, the i-th finds i * 1066 bytes ahead of it: 7, 8 and 9 do not fit
  // (7462 + 1024 > 8000). The i-th leaves at (i + 1) * 1066 ns with (6 - i) * 1066 bytes behind
  // it: 0, 1 and 2 leave marked (at least KMAX = 4000 behind).
  EXPECT_EQ(w.recv(t0), 0u);
  EXPECT_EQ(w.port->backlog_bytes(t0), 7u * 1066);
  EXPECT_EQ(w.recv(t0 + 1065ns), 0u);
  EXPECT_EQ(w.recv(t0 + 1066ns), 1u);
  EXPECT_EQ(w.pkts[0].traffic_class, 0x23);  // CE, DSCP kept
  EXPECT_EQ(w.recv(t0 + 4 * 1066ns), 3u);
  EXPECT_EQ(w.pkts[0].traffic_class, 0x23);
  EXPECT_EQ(w.pkts[1].traffic_class, 0x23);
  EXPECT_EQ(w.pkts[2].traffic_class, 0x22);  // 3 KB behind it: ECT(0) still
  EXPECT_EQ(w.recv(t0 + 7 * 1066ns), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(w.pkts[static_cast<std::size_t>(i)].traffic_class, 0x22);
  EXPECT_EQ(w.recv(t0 + 1s), 0u);
  const Counters k = w.port->counters();
  EXPECT_EQ(k.switch_ce_marked, 3u);
  EXPECT_EQ(k.switch_dropped, 3u);
  EXPECT_EQ(k.switch_queue_peak, 6u * 1066 + 1024);
  EXPECT_EQ(k.rx_packets, 10u);  // the backend's: what reached the port
}

// The pause frames the sender's backend received since the last call.
std::vector<PauseFrame> pauses_at(MemoryNetdev& tx) {
  std::vector<std::uint8_t> buf(kMaxDatagram);
  Packet p;
  p.data = buf.data();
  p.cap = kMaxDatagram;
  Packet* one = &p;
  std::vector<PauseFrame> out;
  while (tx.recv_batch(std::span(&one, 1)) == 1) {
    EXPECT_TRUE(is_pause(p));
    EXPECT_EQ(p.dst, IpAddr::v4(0x0A000001));
    EXPECT_EQ(p.src, IpAddr::v4(0x0A000002));
    if (auto f = parse_pause(p)) out.push_back(*f);
  }
  return out;
}

TEST(SwitchPort, ALosslessPortPausesItsSenderAboveXoffResumesItBelowXonAndDropsNothing) {
  SwitchConfig c;
  c.rate_bps = 8e9;  // 1066 ns a datagram, as above
  c.buffer = 8000;
  c.kmin = c.kmax = 8000;
  c.pfc = true;
  c.xoff = 4000;
  c.xon = 2000;
  Wire w(c);
  const auto t0 = SwitchPortNetdev::Clock::now();
  EXPECT_EQ(w.recv(t0), 0u);
  w.send(10, 2);
  // 0..6 fit as above; the 4th takes the queue past XOFF (4 * 1066): the sender is paused, on
  // the priority its datagrams carry (DSCP 8: 1), with the longest pause. 7, 8 and 9 are held.
  EXPECT_EQ(w.recv(t0), 0u);
  EXPECT_TRUE(w.port->pausing());
  auto f = pauses_at(w.tx);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].enabled, 1u << 1);
  EXPECT_EQ(f[0].quanta[1], kMaxQuanta);
  Counters k = w.port->counters();
  EXPECT_EQ(k.switch_dropped, 0u);
  EXPECT_EQ(k.switch_held, 3u);
  EXPECT_EQ(k.tx_pause, 1u);
  // 7 drained: the held 3 join the queue; 3198 bytes are above XON, so the pause stays.
  EXPECT_EQ(w.recv(t0 + 7 * 1066ns), 7u);
  EXPECT_TRUE(w.port->pausing());
  EXPECT_TRUE(pauses_at(w.tx).empty());
  // Drained: below XON, resumed with zero quanta.
  EXPECT_EQ(w.recv(t0 + 7 * 1066ns + 100us), 3u);
  EXPECT_FALSE(w.port->pausing());
  f = pauses_at(w.tx);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].enabled, 1u << 1);
  EXPECT_EQ(f[0].quanta[1], 0u);
  k = w.port->counters();
  EXPECT_EQ(k.switch_dropped, 0u);
  EXPECT_EQ(k.tx_pause, 2u);
  EXPECT_EQ(k.rx_packets, 10u);
  EXPECT_EQ(w.recv(t0 + 1s), 0u);
}

TEST(SwitchPort, PauseFramesDoNotQueueBehindData) {
  SwitchConfig c;
  c.rate_bps = 8e9;
  c.buffer = 1 << 20;
  c.kmin = c.kmax = 1 << 20;
  Wire w(c);
  const auto t0 = SwitchPortNetdev::Clock::now();
  EXPECT_EQ(w.recv(t0), 0u);
  w.send(10, 2);
  std::vector<std::uint8_t> buf(kPauseFrameLen);
  Packet p;
  p.data = buf.data();
  p.cap = kPauseFrameLen;
  PauseFrame f;
  f.enabled = 1;
  f.quanta[0] = 7;
  build_pause(p, f);
  p.src = IpAddr::v4(0x0A000001);
  p.dst = IpAddr::v4(0x0A000002);
  Packet* one = &p;
  ASSERT_EQ(w.tx.send_batch(std::span(&one, 1)), 1u);
  ASSERT_EQ(w.recv(t0), 1u);  // before any datagram has drained
  const auto got = parse_pause(w.pkts[0]);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->quanta[0], 7u);
  EXPECT_EQ(w.recv(t0 + 1s), 10u);
}

TEST(SwitchPort, NeverMarksNotEctAndMarksWithRedProbabilityBetweenKminAndKmax) {
  SwitchConfig c;
  c.rate_bps = 8e9;
  c.buffer = 1 << 20;
  c.kmin = 0;
  c.kmax = 64 * 1066;
  c.pmax = 1;  // p rises from 0 to 1 over the queue of 64
  Wire w(c);
  const auto t0 = SwitchPortNetdev::Clock::now();
  EXPECT_EQ(w.recv(t0), 0u);
  w.send(64, 0);  // Not-ECT
  EXPECT_EQ(w.recv(t0), 0u);
  EXPECT_EQ(w.recv(t0 + 1s), 64u);
  EXPECT_EQ(w.port->counters().switch_ce_marked, 0u);
  const auto t1 = t0 + 2s;
  EXPECT_EQ(w.recv(t1), 0u);
  w.send(64, 1);  // ECT(1)
  EXPECT_EQ(w.recv(t1), 0u);
  EXPECT_EQ(w.recv(t1 + 1s), 64u);
  const auto marked = w.port->counters().switch_ce_marked;
  EXPECT_GT(marked, 16u);  // the i-th with probability (63 - i)/64: 31.5 expected
  EXPECT_LT(marked, 48u);
  for (std::size_t i = 0; i < 64; ++i) {
    const std::uint8_t ecn = w.pkts[i].traffic_class & 3;
    EXPECT_TRUE(ecn == 1 || ecn == 3) << i;
  }
}

TEST(BacklogMarker, MarksEctUcAndUdWhileReceiveBatchesComeBackFull) {
  auto fabric = std::make_shared<MemoryFabric>();
  MemoryNetdev tx(fabric, IpAddr::v4(0x0A000001), 9000);
  BacklogMarkerNetdev rx(std::make_unique<MemoryNetdev>(fabric, IpAddr::v4(0x0A000002), 9000));
  std::vector<std::uint8_t> bytes(200 * 64);
  std::vector<Packet> out(200);
  std::vector<Packet*> op;
  for (std::size_t i = 0; i < out.size(); ++i) {
    wire::RoceHeaders h;
    h.bth.opcode = wire::op::kUdSendOnly;
    h.deth = wire::Deth{1, 0, 0x12};
    Packet& p = out[i];
    p.data = bytes.data() + 64 * i;
    p.cap = 64;
    p.len = static_cast<std::uint32_t>(*wire::build_roce(wire::MutBytes(p.data, p.cap), h, {}));
    p.src = IpAddr::v4(0x0A000001);
    p.dst = IpAddr::v4(0x0A000002);
    p.traffic_class = i % 2 ? 2 : 0;  // every other one ECT(0)
    op.push_back(&p);
  }
  ASSERT_EQ(tx.send_batch(op), op.size());
  std::vector<std::uint8_t> buf(64 * kMaxDatagram);
  std::vector<Packet> in(64);
  std::vector<Packet*> ip;
  for (std::size_t i = 0; i < in.size(); ++i) {
    in[i].data = buf.data() + i * kMaxDatagram;
    in[i].cap = kMaxDatagram;
    ip.push_back(&in[i]);
  }
  // 200 waiting: full, full (marked: the backlog persisted), full (marked), then 8 (not).
  EXPECT_EQ(rx.recv_batch(ip), 64u);
  EXPECT_EQ(rx.counters().backlog_ce_marked, 0u);
  EXPECT_EQ(rx.recv_batch(ip), 64u);
  EXPECT_EQ(rx.counters().backlog_ce_marked, 32u);
  for (std::size_t i = 0; i < 64; ++i) EXPECT_EQ(in[i].traffic_class, i % 2 ? 3 : 0) << i;
  EXPECT_EQ(rx.recv_batch(ip), 64u);
  EXPECT_EQ(rx.recv_batch(ip), 8u);
  EXPECT_EQ(rx.counters().backlog_ce_marked, 64u);
}

}  // namespace
}  // namespace softrdma::netdev
