// TracingNetdev around MemoryNetdevs: every packet sent and received is in the trace as a whole
// frame with a valid ICRC, faults and receive drops are annotated, filters, snaplen, rotation.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "helpers.h"
#include "netdev/memory.h"
#include "netdev/trace.h"
#include "pcap/pcapng_writer.h"
#include "wire/frame.h"
#include "wire/roce_frame.h"

using namespace softrdma;
using namespace softrdma::trace_test;
using netdev::IpAddr;
using netdev::Packet;

namespace {

IpAddr host(int h) {
  return IpAddr::v4(0xC0000200u | static_cast<std::uint32_t>(h));
}

std::unique_ptr<netdev::TracingNetdev> traced(std::shared_ptr<netdev::MemoryFabric> fabric,
                                              IpAddr a, const std::string& path,
                                              const std::string& dev,
                                              netdev::FaultConfig faults = {},
                                              const std::string& spec = "") {
  netdev::TraceConfig cfg;
  std::string error;
  EXPECT_TRUE(netdev::parse_trace_spec(spec, cfg, error)) << error;
  cfg.path = path;
  cfg.device = dev;
  auto t = std::make_unique<netdev::TracingNetdev>(
      std::make_unique<netdev::MemoryNetdev>(fabric, a, 9000, faults), cfg);
  EXPECT_TRUE(t->ok()) << t->error();
  return t;
}

// Two traced devices writing to `path`: softroce0 at host 1, sending with the faults that
// `faults` (netdev::parse_faults) names, and softroce1 at host 2; a bad spec fails the test.
std::pair<std::unique_ptr<netdev::TracingNetdev>, std::unique_ptr<netdev::TracingNetdev>>
traced_pair(std::shared_ptr<netdev::MemoryFabric> fabric, const std::string& path,
            const std::string& faults) {
  netdev::FaultConfig f;
  std::string error;
  EXPECT_TRUE(netdev::parse_faults(faults, f, error)) << error;
  return {traced(fabric, host(1), path, "softroce0", f),
          traced(fabric, host(2), path, "softroce1")};
}

// Sends each datagram in its own batch from `from` to `to`.
void send_all(netdev::Netdev& from, IpAddr to, const std::vector<std::vector<std::uint8_t>>& dgs) {
  for (const auto& d : dgs) {
    std::vector<std::uint8_t> buf = d;
    Packet p;
    p.dst = to;
    p.src_port = 0xC123;
    p.traffic_class = 0x02;
    p.hop_limit = 61;
    p.data = buf.data();
    p.len = static_cast<std::uint32_t>(buf.size());
    p.cap = p.len;
    Packet* ptr = &p;
    ASSERT_EQ(from.send_batch(std::span<Packet* const>(&ptr, 1)), 1u);
  }
}

// Receives everything queued; returns the PSNs received.
std::vector<std::uint32_t> recv_all(netdev::Netdev& dev) {
  std::vector<std::uint32_t> psns;
  std::vector<std::vector<std::uint8_t>> bufs(16, std::vector<std::uint8_t>(netdev::kMaxDatagram));
  std::vector<Packet> pkts(16);
  std::vector<Packet*> ptrs;
  for (std::size_t i = 0; i < 16; ++i) ptrs.push_back(&pkts[i]);
  while (true) {
    for (std::size_t i = 0; i < 16; ++i) {
      pkts[i] = Packet{};
      pkts[i].data = bufs[i].data();
      pkts[i].cap = static_cast<std::uint32_t>(bufs[i].size());
    }
    dev.service();
    const std::size_t n = dev.recv_batch(ptrs);
    if (n == 0) break;
    for (std::size_t i = 0; i < n; ++i) psns.push_back(wire::load24(pkts[i].data + 9));
  }
  return psns;
}

std::vector<std::vector<std::uint8_t>> sends(int n, std::uint32_t qpn = 0x11) {
  std::vector<std::vector<std::uint8_t>> v;
  for (int i = 0; i < n; ++i) {
    v.push_back(datagram(wire::op::kRcSendOnly, qpn, static_cast<std::uint32_t>(i), 100));
  }
  return v;
}

struct Decoded {
  bool icrc_ok = false;
  bool ip_ok = false;
  std::uint32_t psn = 0;
  std::uint8_t opcode = 0;
};
Decoded decode(const pcap::PcapngRecord& r) {
  Decoded d;
  auto f = wire::parse_frame(wire::Bytes(r.data), 1);
  EXPECT_TRUE(f.ok());
  if (!f.ok()) return d;
  auto roce = wire::parse_roce(f->payload);
  EXPECT_TRUE(roce.ok());
  if (!roce.ok()) return d;
  d.psn = roce->hdr.bth.psn;
  d.opcode = roce->hdr.bth.opcode;
  auto want = wire::expected_icrc(*f);
  d.icrc_ok = want.ok() && *want == roce->icrc;
  d.ip_ok = f->is_ipv6 || (wire::ipv4_header_checksum(f->ip_header) == 0 && f->ipv4.id == 0 &&
                           f->ipv4.df && f->udp && f->udp->checksum == 0);
  return d;
}

int lint_status(const std::string& path, std::string* out = nullptr) {
  CmdResult r = run(softrdma_bin() + " lint '" + path + "'");
  if (out) *out = r.out;
  return r.status;
}

}  // namespace

TEST(TraceSpec, Parses) {
  netdev::TraceConfig c;
  std::string error;
  ASSERT_TRUE(
      netdev::parse_trace_spec("qp=0x11,18;class=send,ack;snaplen=128;rotate=10M", c, error))
      << error;
  EXPECT_EQ(c.qpns, (std::vector<std::uint32_t>{0x11, 18}));
  EXPECT_EQ(c.classes, netdev::kTraceSend | netdev::kTraceAck);
  EXPECT_EQ(c.snaplen, 128u);
  EXPECT_EQ(c.rotate_bytes, 10u << 20);
  ASSERT_TRUE(netdev::parse_trace_spec("", c, error));
  EXPECT_TRUE(c.qpns.empty());
  EXPECT_EQ(c.classes, 0u);
  for (const char* bad : {"qp=", "qp=0x1000000", "class=bogus", "snaplen=0", "rotate=1", "frob=1",
                          "qp=1;qp=2", "snaplen"}) {
    EXPECT_FALSE(netdev::parse_trace_spec(bad, c, error)) << bad;
    EXPECT_FALSE(error.empty());
  }
}

TEST(TraceSpec, Classes) {
  EXPECT_EQ(netdev::trace_class_of(wire::op::kRcSendOnly), netdev::kTraceSend);
  EXPECT_EQ(netdev::trace_class_of(wire::op::kUcBase), netdev::kTraceSend);
  EXPECT_EQ(netdev::trace_class_of(wire::op::kRcWriteOnly), netdev::kTraceWrite);
  EXPECT_EQ(netdev::trace_class_of(wire::op::kRcReadRequest), netdev::kTraceRead);
  EXPECT_EQ(netdev::trace_class_of(wire::op::kRcReadResponseOnly), netdev::kTraceRead);
  EXPECT_EQ(netdev::trace_class_of(wire::op::kRcFetchAdd), netdev::kTraceAtomic);
  EXPECT_EQ(netdev::trace_class_of(wire::op::kRcAtomicAck), netdev::kTraceAtomic);
  EXPECT_EQ(netdev::trace_class_of(wire::op::kRcAck), netdev::kTraceAck);
  EXPECT_EQ(netdev::trace_class_of(wire::op::kCnp), netdev::kTraceCnp);
  EXPECT_EQ(netdev::trace_class_of(wire::op::kUdSendOnly), netdev::kTraceUd);
  EXPECT_EQ(netdev::trace_class_of(0xFF), 0u);
}

TEST(TracingNetdev, RecordsEverySendAndReceiveAsWireFrames) {
  TempDir dir;
  const std::string path = dir / "t.pcapng";
  auto fabric = std::make_shared<netdev::MemoryFabric>();
  auto a = traced(fabric, host(1), path, "softroce0");
  auto b = traced(fabric, host(2), path, "softroce1");
  EXPECT_EQ(a->writer(), b->writer()) << "one file per path in a process";
  send_all(*a, host(2), sends(20));
  const auto got = recv_all(*b);
  EXPECT_EQ(got.size(), 20u);
  send_all(*b, host(1), {datagram(wire::op::kRcAck, 0x22, 19)});
  EXPECT_EQ(recv_all(*a).size(), 1u);
  a->flush();

  const Trace t = read_trace(path);
  ASSERT_EQ(t.ifaces.size(), 2u);
  EXPECT_EQ(t.ifaces[0].name, "softroce0");
  EXPECT_EQ(t.ifaces[1].name, "softroce1");
  ASSERT_EQ(t.recs.size(), 42u);
  int tx = 0, rx = 0;
  for (std::size_t i = 0; i < t.recs.size(); ++i) {
    const auto& r = t.recs[i];
    const Decoded d = decode(r);
    EXPECT_TRUE(d.icrc_ok) << "record " << i;
    EXPECT_TRUE(d.ip_ok) << "record " << i;
    if (i > 0) {
      EXPECT_LE(t.recs[i - 1].ts_ns, r.ts_ns);
    }
    if (d.opcode == wire::op::kRcSendOnly) {
      if (r.iface == 0) {
        ++tx;
        EXPECT_EQ(r.flags, pcap::kEpbOutbound);
        EXPECT_EQ(r.comment, "softrdma: dir=tx dev=softroce0 qp=0x000011");
      } else {
        ++rx;
        EXPECT_EQ(r.flags, pcap::kEpbInbound);
        EXPECT_EQ(r.comment, "softrdma: dir=rx dev=softroce1 qp=0x000011");
      }
    }
  }
  EXPECT_EQ(tx, 20);
  EXPECT_EQ(rx, 20);
  EXPECT_EQ(t.recs.back().comment, "softrdma: dir=rx dev=softroce0 qp=0x000022");
  // The frame is what a UDP socket puts on the wire from 192.0.2.1:0xC123 to 192.0.2.2:4791.
  auto f = wire::parse_frame(wire::Bytes(t.recs[0].data), 1);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->ipv4.src, 0xC0000201u);
  EXPECT_EQ(f->ipv4.dst, 0xC0000202u);
  EXPECT_EQ(f->ipv4.ttl, 61);
  EXPECT_EQ(f->ipv4.tos, 0x02);
  EXPECT_EQ(f->udp->src_port, 0xC123);
  EXPECT_EQ(f->udp->dst_port, 4791);
  EXPECT_EQ(f->eth->src, (wire::MacAddr{0x02, 0x00, 192, 0, 2, 1}));
  EXPECT_EQ(f->eth->dst, (wire::MacAddr{0x02, 0x00, 192, 0, 2, 2}));

  std::string out;
  EXPECT_EQ(lint_status(path, &out), 0) << out;
  EXPECT_TRUE(has(out, " 0 violations")) << out;
}

TEST(TracingNetdev, Ipv6FramesCarryAValidIcrc) {
  TempDir dir;
  const std::string path = dir / "v6.pcapng";
  IpAddr x, y;
  ASSERT_TRUE(IpAddr::parse("fd00::1", x));
  ASSERT_TRUE(IpAddr::parse("fd00::2", y));
  auto fabric = std::make_shared<netdev::MemoryFabric>();
  auto a = traced(fabric, x, path, "softroce0");
  auto b = std::make_unique<netdev::MemoryNetdev>(fabric, y, 9000);
  send_all(*a, y, sends(3));
  a->flush();
  const Trace t = read_trace(path);
  ASSERT_EQ(t.recs.size(), 3u);
  for (const auto& r : t.recs) EXPECT_TRUE(decode(r).icrc_ok);
  std::string out;
  EXPECT_EQ(lint_status(path, &out), 0) << out;
}

TEST(TracingNetdev, DroppedPacketsAppearWithFaultDrop) {
  TempDir dir;
  const std::string path = dir / "drop.pcapng";
  auto fabric = std::make_shared<netdev::MemoryFabric>();
  const auto [a, b] = traced_pair(fabric, path, "drop=0.3,seed=11");
  send_all(*a, host(2), sends(200));
  const auto got = recv_all(*b);
  a->flush();
  const std::uint64_t dropped = a->inner().counters().fault_dropped;
  ASSERT_GT(dropped, 20u);
  EXPECT_EQ(got.size(), 200u - dropped);

  const Trace t = read_trace(path);
  std::set<std::uint32_t> dropped_psns, rx_psns;
  int tx = 0;
  for (const auto& r : t.recs) {
    const Decoded d = decode(r);
    EXPECT_TRUE(d.icrc_ok);
    if (has(r.comment, "dir=tx")) {
      ++tx;
      if (r.comment == "softrdma: dir=tx dev=softroce0 qp=0x000011 fault=drop") {
        dropped_psns.insert(d.psn);
      } else {
        EXPECT_EQ(r.comment, "softrdma: dir=tx dev=softroce0 qp=0x000011");
      }
    } else {
      EXPECT_EQ(r.comment, "softrdma: dir=rx dev=softroce1 qp=0x000011");
      rx_psns.insert(d.psn);
    }
  }
  EXPECT_EQ(tx, 200);
  EXPECT_EQ(dropped_psns.size(), dropped);
  EXPECT_EQ(rx_psns.size(), got.size());
  for (std::uint32_t p : dropped_psns) EXPECT_EQ(rx_psns.count(p), 0u) << p;
}

TEST(TracingNetdev, CorruptedPacketIsRecordedAsSentAndNotAsReceived) {
  TempDir dir;
  const std::string path = dir / "corrupt.pcapng";
  auto fabric = std::make_shared<netdev::MemoryFabric>();
  const auto [a, b] = traced_pair(fabric, path, "corrupt=1,seed=3");
  send_all(*a, host(2), sends(10));
  EXPECT_TRUE(recv_all(*b).empty());
  a->flush();
  const Trace t = read_trace(path);
  int tx = 0, rx_dropped = 0;
  for (const auto& r : t.recs) {
    const bool is_tx = has(r.comment, "dir=tx");
    if (is_tx) {
      ++tx;
      EXPECT_EQ(r.comment, "softrdma: dir=tx dev=softroce0 qp=0x" +
                               std::string(r.comment.substr(r.comment.find("0x") + 2, 6)) +
                               " fault=corrupt");
      EXPECT_TRUE(decode(r).icrc_ok) << "recorded as sent, before the corruption";
    } else {
      // The receiver's ICRC check dropped it: recorded as such, never as delivered.
      EXPECT_TRUE(has(r.comment, " drop=icrc") || has(r.comment, " drop=malformed")) << r.comment;
      ++rx_dropped;
    }
  }
  EXPECT_EQ(tx, 10);
  EXPECT_EQ(rx_dropped, 10);
}

TEST(TracingNetdev, DuplicatedAndQueueFullDrops) {
  TempDir dir;
  const std::string path = dir / "dup.pcapng";
  auto fabric = std::make_shared<netdev::MemoryFabric>(4);
  const auto [a, b] = traced_pair(fabric, path, "duplicate=1,seed=5");
  send_all(*a, host(2), sends(3));  // 6 arrive; the queue holds 4
  EXPECT_EQ(recv_all(*b).size(), 4u);
  a->flush();
  std::map<std::string, int> by_comment;
  for (const auto& r : read_trace(path).recs) ++by_comment[r.comment];
  EXPECT_EQ(by_comment["softrdma: dir=tx dev=softroce0 qp=0x000011 fault=duplicate"], 3);
  EXPECT_EQ(by_comment["softrdma: dir=rx dev=softroce1 qp=0x000011"], 4);
  EXPECT_EQ(by_comment["softrdma: dir=rx dev=softroce1 qp=0x000011 drop=queue_full"], 2);
}

TEST(TracingNetdev, RetransmissionMark) {
  TempDir dir;
  const std::string path = dir / "re.pcapng";
  auto fabric = std::make_shared<netdev::MemoryFabric>();
  auto a = traced(fabric, host(1), path, "softroce0");
  auto b = std::make_unique<netdev::MemoryNetdev>(fabric, host(2), 9000);
  auto d = datagram(wire::op::kRcSendOnly, 0x11, 5);
  Packet p;
  p.dst = host(2);
  p.data = d.data();
  p.len = static_cast<std::uint32_t>(d.size());
  p.cap = p.len;
  p.set_retransmission();
  Packet* ptr = &p;
  ASSERT_EQ(a->send_batch(std::span<Packet* const>(&ptr, 1)), 1u);
  a->flush();
  const Trace t = read_trace(path);
  ASSERT_EQ(t.recs.size(), 1u);
  EXPECT_EQ(t.recs[0].comment, "softrdma: dir=tx dev=softroce0 qp=0x000011 retrans=1");
}

TEST(TracingNetdev, FiltersAndSnaplen) {
  TempDir dir;
  const std::string path = dir / "filter.pcapng";
  auto fabric = std::make_shared<netdev::MemoryFabric>();
  auto a = traced(fabric, host(1), path, "softroce0", {}, "qp=0x11,0x12;class=send,ack;snaplen=64");
  auto b = std::make_unique<netdev::MemoryNetdev>(fabric, host(2), 9000);
  std::vector<std::vector<std::uint8_t>> dgs;
  for (std::uint32_t qpn : {0x11u, 0x12u, 0x13u}) {
    for (std::uint8_t op : {wire::op::kRcSendOnly, wire::op::kRcWriteOnly, wire::op::kRcReadRequest,
                            wire::op::kRcAck, wire::op::kUdSendOnly, wire::op::kCnp}) {
      dgs.push_back(datagram(op, qpn, 1, 200));
    }
  }
  send_all(*a, host(2), dgs);
  a->flush();
  const Trace t = read_trace(path);
  ASSERT_EQ(t.ifaces.size(), 1u);
  EXPECT_EQ(t.ifaces[0].snaplen, 64u);
  ASSERT_EQ(t.recs.size(), 4u);  // send and ack, to 0x11 and 0x12
  std::multiset<std::string> seen;
  int cut = 0;
  for (const auto& r : t.recs) {
    cut += r.orig_len > 64u;
    EXPECT_EQ(r.data.size(), std::min<std::size_t>(r.orig_len, 64u));
    EXPECT_GE(r.orig_len, 62u);
    seen.insert(r.comment);
  }
  EXPECT_EQ(seen.count("softrdma: dir=tx dev=softroce0 qp=0x000011"), 2u);
  EXPECT_EQ(seen.count("softrdma: dir=tx dev=softroce0 qp=0x000012"), 2u);
  EXPECT_EQ(cut, 2) << "the two SENDs are cut to the snaplen";
}

TEST(TracingNetdev, RotatesFromTheSpec) {
  TempDir dir;
  const std::string path = dir / "rot.pcapng";
  auto fabric = std::make_shared<netdev::MemoryFabric>();
  auto a = traced(fabric, host(1), path, "softroce0", {}, "rotate=8K");
  auto b = std::make_unique<netdev::MemoryNetdev>(fabric, host(2), 9000);
  send_all(*a, host(2), sends(100));
  a->flush();
  const auto files = a->writer()->files();
  ASSERT_GT(files.size(), 1u);
  std::size_t total = 0;
  for (const auto& f : files) {
    const Trace t = read_trace(f);
    EXPECT_EQ(t.ifaces.size(), 1u);
    total += t.recs.size();
    std::string out;
    EXPECT_EQ(lint_status(f, &out), 0) << out;
  }
  EXPECT_EQ(total, 100u);
}

TEST(TracingNetdev, UnwritablePathIsReported) {
  netdev::TraceConfig cfg;
  cfg.path = "/nonexistent-dir/x.pcapng";
  auto fabric = std::make_shared<netdev::MemoryFabric>();
  netdev::TracingNetdev t(std::make_unique<netdev::MemoryNetdev>(fabric, host(1), 9000), cfg);
  EXPECT_FALSE(t.ok());
  EXPECT_TRUE(has(t.error(), "/nonexistent-dir/x.pcapng")) << t.error();
}
