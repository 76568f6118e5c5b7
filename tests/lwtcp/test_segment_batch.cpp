// lwtcp::SegmentBatch: lwIP's data segments joined for segmentation offload, and cut again into
// exactly the segments lwIP built; the runs that must not join; large segments cut at the wire's
// MSS.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "lwtcp/lwip_loader.h"
#include "lwtcp/segment_batch.h"
#include "lwtcp/segment_check.h"
#include "netdev/frame_port.h"
#include "wire/bytes.h"
#include "wire/inet_sum.h"
#include "wire/net.h"

namespace softrdma::lwtcp {
namespace {

using Frame = std::vector<std::uint8_t>;

struct Seg {
  std::uint16_t id = 100;
  std::uint32_t seq = 5000;
  std::size_t payload = 1460;
  std::uint8_t flags = wire::kTcpAck;
  std::uint16_t src_port = 40000;
};

const wire::Ipv6Addr kSrc6 = {0xfd, 0x42, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
const wire::Ipv6Addr kDst6 = {0xfd, 0x42, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
constexpr std::size_t kTcp6 = 14 + 40, kData6 = kTcp6 + 20;

// A whole frame as lwIP sends it: Ethernet, IPv4 (DF; 10.0.0.1 to .2) or IPv6 (fd42::1 to ::2,
// no extension headers), TCP, payload, checksums complete.
Frame build(const Seg& s, std::uint8_t fill, bool v6) {
  const std::size_t tcp = v6 ? kTcp6 : 34;
  Frame f(tcp + 20 + s.payload);
  wire::Ethernet e;
  e.dst = {2, 0, 0, 0, 0, 1};
  e.src = {2, 0, 0, 0, 0, 2};
  e.ethertype = v6 ? wire::kEthertypeIpv6 : wire::kEthertypeIpv4;
  (void)wire::build_ethernet(wire::MutBytes(f), e);
  wire::Ipv4 ip;
  wire::Ipv6 ip6;
  if (v6) {
    ip6.payload_len = static_cast<std::uint16_t>(f.size() - kTcp6);
    ip6.next_header = 6;
    ip6.src = kSrc6;
    ip6.dst = kDst6;
    (void)wire::build_ipv6(wire::MutBytes(f).subspan(14), ip6);
  } else {
    ip.total_len = static_cast<std::uint16_t>(f.size() - 14);
    ip.id = s.id;
    ip.protocol = 6;
    ip.src = 0x0A000001;
    ip.dst = 0x0A000002;
    (void)wire::build_ipv4(wire::MutBytes(f).subspan(14), ip);
  }
  wire::Tcp t;
  t.src_port = s.src_port;
  t.dst_port = 18515;
  t.seq = s.seq;
  t.ack = 777;
  t.flags = s.flags;
  t.window = 4096;
  (void)wire::build_tcp(wire::MutBytes(f).subspan(tcp), t);
  for (std::size_t i = 0; i < s.payload; ++i) {
    f[tcp + 20 + i] = static_cast<std::uint8_t>(fill + i * 7);
  }
  const wire::Bytes segment = wire::Bytes(f).subspan(tcp);
  wire::store16(f.data() + tcp + 16, v6 ? wire::l4_checksum_ipv6(kSrc6, kDst6, 6, segment)
                                        : wire::l4_checksum_ipv4(ip.src, ip.dst, 6, segment));
  return f;
}

Frame make(const Seg& s, std::uint8_t fill = 0) {
  return build(s, fill, false);
}
Frame make6(const Seg& s, std::uint8_t fill = 0) {
  return build(s, fill, true);
}

// A run of `n` segments of 1460 bytes, the last `last` bytes long with PSH.
std::vector<Frame> run(std::size_t n, std::size_t last) {
  std::vector<Frame> out;
  Seg s;
  for (std::size_t i = 0; i < n; ++i) {
    const bool end = i + 1 == n;
    s.payload = end ? last : 1460;
    s.flags = end ? wire::kTcpAck | wire::kTcpPsh : wire::kTcpAck;
    out.push_back(make(s, static_cast<std::uint8_t>(i)));
    s.id++;
    s.seq += static_cast<std::uint32_t>(s.payload);
  }
  return out;
}

TEST(SegmentBatch, JoinedSegmentsCompleteAsOffloadDoesAndCutAgainIntoTheSameFrames) {
  const std::vector<Frame> segs = run(5, 700);
  SegmentBatch b;
  for (const Frame& f : segs) ASSERT_TRUE(b.append(f.data(), f.size()));
  EXPECT_EQ(b.segments(), 5u);
  EXPECT_EQ(b.mss(), 1460);

  Frame super(b.frame(), b.frame() + b.frame_len());
  ASSERT_EQ(super.size(), 54u + 4 * 1460 + 700);
  EXPECT_EQ(wire::load16(super.data() + 16), super.size() - 14);  // IPv4 total length
  EXPECT_EQ(wire::ipv4_header_checksum(wire::Bytes(super).subspan(14, 20)), 0);
  EXPECT_EQ(super[47], wire::kTcpAck | wire::kTcpPsh);  // the last segment's flags
  // What the offload does with the pseudo-header sum in the field gives a complete checksum.
  ASSERT_TRUE(
      netdev::complete_checksum(super.data(), static_cast<std::uint32_t>(super.size()), 34, 16));
  EXPECT_EQ(wire::l4_checksum_ipv4(0x0A000001, 0x0A000002, 6, wire::Bytes(super).subspan(34)), 0);

  std::vector<Frame> cut;
  b.segment([&](const std::uint8_t* f, std::size_t len) { cut.emplace_back(f, f + len); });
  ASSERT_EQ(cut.size(), segs.size());
  for (std::size_t i = 0; i < segs.size(); ++i) EXPECT_EQ(cut[i], segs[i]) << "segment " << i;
}

TEST(SegmentBatch, OneSegmentLeavesAsItCame) {
  const Frame f = run(1, 300)[0];
  SegmentBatch b;
  ASSERT_TRUE(b.append(f.data(), f.size()));
  EXPECT_EQ(Frame(b.frame(), b.frame() + b.frame_len()), f);
}

TEST(SegmentBatch, OnlyAContinuationOfTheSameConnectionJoins) {
  const std::vector<Frame> segs = run(3, 1460);
  const auto refused = [&](const Frame& next) {
    SegmentBatch b;
    EXPECT_TRUE(b.append(segs[0].data(), segs[0].size()));
    return !b.append(next.data(), next.size());
  };
  EXPECT_FALSE(refused(segs[1]));  // the real next one joins
  Seg s;
  s.id = 101;
  s.seq = 5000 + 1460;
  Seg gap = s;
  gap.seq += 1;
  EXPECT_TRUE(refused(make(gap)));
  Seg skipped_id = s;
  skipped_id.id = 102;
  EXPECT_TRUE(refused(make(skipped_id)));
  Seg other_flow = s;
  other_flow.src_port = 40001;
  EXPECT_TRUE(refused(make(other_flow)));
  Seg longer = s;
  longer.payload = 1461;
  EXPECT_TRUE(refused(make(longer)));
  Seg fin = s;  // a FIN ends the run, joined as its last
  fin.flags = wire::kTcpAck | wire::kTcpFin;
  EXPECT_FALSE(refused(make(fin)));
  Seg urgent = s;
  urgent.flags = wire::kTcpAck | 0x20;
  EXPECT_TRUE(refused(make(urgent)));

  // Nothing follows a short or pushed segment; an ACK alone or a SYN never joins.
  SegmentBatch b;
  Seg next = s;
  next.payload = 1000;  // shorter than the first: the run's end
  const Frame short_one = make(next);
  ASSERT_TRUE(b.append(segs[0].data(), segs[0].size()));
  ASSERT_TRUE(b.append(short_one.data(), short_one.size()));
  next.id++;
  next.seq += 1000;
  const Frame after_short = make(next);
  EXPECT_FALSE(b.append(after_short.data(), after_short.size()));
  b.clear();
  const std::vector<Frame> pushed = run(2, 1460);
  Frame pushed_first = pushed[0];
  pushed_first[47] |= wire::kTcpPsh;
  ASSERT_TRUE(b.append(pushed_first.data(), pushed_first.size()));
  EXPECT_FALSE(b.append(pushed[1].data(), pushed[1].size()));
  b.clear();
  Seg ack;
  ack.payload = 0;
  const Frame bare_ack = make(ack);
  EXPECT_FALSE(b.append(bare_ack.data(), bare_ack.size()));
  Seg syn;
  syn.flags = wire::kTcpSyn;
  const Frame syn_frame = make(syn);
  EXPECT_FALSE(b.append(syn_frame.data(), syn_frame.size()));
  EXPECT_TRUE(b.empty());
}

TEST(SegmentBatch, ASuperSegmentStaysWithinAFrameAReceiverTakes) {
  const std::vector<Frame> segs = run(60, 1460);
  SegmentBatch b;
  std::size_t joined = 0;
  while (joined < segs.size() && b.append(segs[joined].data(), segs[joined].size())) ++joined;
  EXPECT_LT(joined, segs.size());
  EXPECT_LE(b.frame_len(), SegmentBatch::kMaxFrame);
  EXPECT_EQ(b.frame_len() + 1460 > SegmentBatch::kMaxFrame, true);
  b.clear();  // the refused one starts the next batch
  EXPECT_TRUE(b.append(segs[joined].data(), segs[joined].size()));
}

using Frames = std::vector<Frame>;

Frames cut_of(SegmentBatch& b) {
  Frames out;
  b.segment([&](const std::uint8_t* f, std::size_t len) { out.emplace_back(f, f + len); });
  return out;
}

// Every frame whole and correct: IPv4 and TCP checksums verify, lengths agree; the payloads
// joined again are `payload`, from sequence number `seq` on, IDs counting up from `id`.
void expect_wire_segments(const Frames& segs, const Frame& whole, std::uint32_t seq,
                          std::uint16_t id, std::uint8_t last_flags, std::size_t cut) {
  Frame joined;
  for (std::size_t i = 0; i < segs.size(); ++i) {
    const Frame& f = segs[i];
    ASSERT_GE(f.size(), 54u);
    EXPECT_LE(f.size() - 54, cut) << "segment " << i;
    EXPECT_EQ(wire::load16(f.data() + 16), f.size() - 14) << "segment " << i;
    EXPECT_EQ(wire::ipv4_header_checksum(wire::Bytes(f).subspan(14, 20)), 0) << "segment " << i;
    EXPECT_EQ(wire::l4_checksum_ipv4(0x0A000001, 0x0A000002, 6, wire::Bytes(f).subspan(34)), 0)
        << "segment " << i;
    EXPECT_EQ(wire::load16(f.data() + 18), static_cast<std::uint16_t>(id + i)) << "segment " << i;
    EXPECT_EQ(wire::load32(f.data() + 38), seq + joined.size()) << "segment " << i;
    const bool last = i + 1 == segs.size();
    EXPECT_EQ(f[47], last ? last_flags : wire::kTcpAck) << "segment " << i;
    joined.insert(joined.end(), f.begin() + 54, f.end());
  }
  EXPECT_EQ(joined, Frame(whole.begin() + 54, whole.end()));
}

TEST(SegmentBatch, ALargeSegmentIsCutAtTheWireMss) {
  Seg s;
  s.payload = 16 * 1460;
  s.flags = wire::kTcpAck | wire::kTcpPsh;
  const Frame large = make(s, 3);
  SegmentBatch plain;
  EXPECT_FALSE(plain.append(large.data(), large.size()));  // beyond any wire segment, no cut
  SegmentBatch b;
  ASSERT_TRUE(b.append(large.data(), large.size(), 1460));
  EXPECT_EQ(b.segments(), 1u);
  EXPECT_EQ(b.pieces(), 16u);
  EXPECT_EQ(b.cut(), 1460);
  // As one frame: the offload's form (pseudo-header sum in the TCP checksum field).
  Frame super(b.frame(), b.frame() + b.frame_len());
  ASSERT_TRUE(
      netdev::complete_checksum(super.data(), static_cast<std::uint32_t>(super.size()), 34, 16));
  EXPECT_EQ(wire::l4_checksum_ipv4(0x0A000001, 0x0A000002, 6, wire::Bytes(super).subspan(34)), 0);
  const Frames segs = cut_of(b);
  ASSERT_EQ(segs.size(), 16u);
  expect_wire_segments(segs, large, s.seq, s.id, s.flags, 1460);
  // cut_frame cuts the same frames without a batch.
  Frames alone;
  ASSERT_TRUE(SegmentBatch::cut_frame(
      large.data(), large.size(), 1460,
      [&](const std::uint8_t* f, std::size_t len) { alone.emplace_back(f, f + len); }));
  EXPECT_EQ(alone, segs);
}

TEST(SegmentBatch, LargeSegmentsJoinWhenTheNextIdFollowsTheWireSegments) {
  Seg a;
  a.payload = 16 * 1000;
  const Frame first = make(a, 1);
  Seg b = a;
  b.seq += 16 * 1000;
  b.payload = 3500;
  b.flags = wire::kTcpAck | wire::kTcpFin;  // FIN: on the last wire segment only
  b.id = static_cast<std::uint16_t>(a.id + 16);
  const Frame second = make(b, 2);
  Seg lwip_id = b;  // lwIP's own count, one a frame: not what the wire carries
  lwip_id.id = static_cast<std::uint16_t>(a.id + 1);
  const Frame miscounted = make(lwip_id, 2);

  SegmentBatch batch;
  ASSERT_TRUE(batch.append(first.data(), first.size(), 1000));
  EXPECT_FALSE(batch.append(miscounted.data(), miscounted.size(), 1000));
  EXPECT_FALSE(batch.append(second.data(), second.size(), 0));  // another cut: not joined
  ASSERT_TRUE(batch.append(second.data(), second.size(), 1000));
  EXPECT_EQ(batch.pieces(), 20u);
  Frame whole = first;
  whole.insert(whole.end(), second.begin() + 54, second.end());
  expect_wire_segments(cut_of(batch), whole, a.seq, a.id, b.flags, 1000);
  // Nothing follows a FIN.
  Seg after = b;
  after.seq += 3500;
  after.id = static_cast<std::uint16_t>(b.id + 4);
  const Frame late = make(after);
  EXPECT_FALSE(batch.append(late.data(), late.size(), 1000));
}

TEST(SegmentBatch, CutFrameRefusesWhatIsNoTcpIpv4Segment) {
  Seg s;
  s.payload = 3000;
  Frame f = make(s);
  const auto none = [](const std::uint8_t*, std::size_t) { ADD_FAILURE() << "a frame out"; };
  EXPECT_FALSE(SegmentBatch::cut_frame(f.data(), f.size() - 1, 1000, none));  // length
  EXPECT_FALSE(SegmentBatch::cut_frame(f.data(), f.size(), 0, none));         // no cut
  EXPECT_FALSE(SegmentBatch::cut_frame(f.data(), f.size(), 60000, none));     // no room
  f[14] = 0x46;                                                               // IPv4 options
  EXPECT_FALSE(SegmentBatch::cut_frame(f.data(), f.size(), 1000, none));
}

bool good6(const Frame& f) {
  return wire::load16(f.data() + 18) + kTcp6 == f.size() &&
         wire::l4_checksum_ipv6(kSrc6, kDst6, 6, wire::Bytes(f).subspan(kTcp6)) == 0;
}

TEST(SegmentBatch, Ipv6SegmentsJoinAndCutAgainIntoTheSameFrames) {
  Frames segs;
  Seg s;
  for (int i = 0; i < 4; ++i) {
    s.payload = i == 3 ? 700 : 1440;
    s.flags = i == 3 ? wire::kTcpAck | wire::kTcpPsh : wire::kTcpAck;
    segs.push_back(make6(s, static_cast<std::uint8_t>(i)));
    s.seq += static_cast<std::uint32_t>(s.payload);
  }
  SegmentBatch b;
  for (const Frame& f : segs) ASSERT_TRUE(b.append(f.data(), f.size()));
  EXPECT_EQ(b.cut(), 1440);
  EXPECT_EQ(b.pieces(), 4u);
  // The super-segment: IPv6 payload length of the whole, the offload's partial checksum.
  Frame super(b.frame(), b.frame() + b.frame_len());
  EXPECT_EQ(super.size(), kData6 + 3 * 1440 + 700);
  ASSERT_TRUE(
      netdev::complete_checksum(super.data(), static_cast<std::uint32_t>(super.size()), kTcp6, 16));
  EXPECT_TRUE(good6(super));
  EXPECT_EQ(super[kTcp6 + 13], wire::kTcpAck | wire::kTcpPsh);
  EXPECT_EQ(cut_of(b), segs);
  // An IPv4 segment does not continue an IPv6 batch.
  b.clear();
  ASSERT_TRUE(b.append(segs[0].data(), segs[0].size()));
  Seg v4;
  v4.seq = 5000 + 1440;
  const Frame other = make(v4);
  EXPECT_FALSE(b.append(other.data(), other.size()));
}

TEST(SegmentBatch, ALargeIpv6SegmentIsCutAtTheWireMss) {
  Seg s;
  s.payload = 7 * 8940;
  s.flags = wire::kTcpAck | wire::kTcpPsh;
  const Frame large = make6(s, 5);
  SegmentBatch b;
  ASSERT_TRUE(b.append(large.data(), large.size(), 8940));
  EXPECT_EQ(b.pieces(), 7u);
  const Frames segs = cut_of(b);
  ASSERT_EQ(segs.size(), 7u);
  Frame joined;
  for (std::size_t i = 0; i < segs.size(); ++i) {
    const Frame& f = segs[i];
    EXPECT_EQ(f.size(), kData6 + 8940) << "segment " << i;
    EXPECT_TRUE(good6(f)) << "segment " << i;
    EXPECT_EQ(wire::load32(f.data() + kTcp6 + 4), s.seq + joined.size()) << "segment " << i;
    EXPECT_EQ(f[kTcp6 + 13], i + 1 == segs.size() ? s.flags : wire::kTcpAck) << "segment " << i;
    EXPECT_TRUE(std::equal(f.begin(), f.begin() + 18, large.begin())) << "segment " << i;
    joined.insert(joined.end(), f.begin() + kData6, f.end());
  }
  EXPECT_EQ(joined, Frame(large.begin() + kData6, large.end()));
  Frames alone;
  ASSERT_TRUE(SegmentBatch::cut_frame(
      large.data(), large.size(), 8940,
      [&](const std::uint8_t* f, std::size_t len) { alone.emplace_back(f, f + len); }));
  EXPECT_EQ(alone, segs);
  EXPECT_EQ(SegmentBatch::tcp_at(large.data(), large.size()), kTcp6);
  Frame bad = large;
  bad[14 + 6] = 0;  // a hop-by-hop extension header first: not such a frame
  EXPECT_EQ(SegmentBatch::tcp_at(bad.data(), bad.size()), 0u);
  EXPECT_FALSE(b.append(bad.data(), bad.size(), 8940));
}

}  // namespace
}  // namespace softrdma::lwtcp

// lwIP's check of a segment lwtcp checked before (note_checked_segment): the sum answered
// instead of summing makes the check pass exactly when the segment's own sum would.
extern "C" std::uint16_t lwip_standard_chksum(const void* dataptr, int len);

namespace softrdma::lwtcp {
namespace {

std::uint16_t fold_add(std::uint32_t a, std::uint32_t b) {
  std::uint32_t s = a + b;
  while (s > 0xFFFF) s = (s & 0xFFFF) + (s >> 16);
  return static_cast<std::uint16_t>(s);
}

TEST(CheckedSegment, PseudoSumIsWhatTheSegmentsSumCompletes) {
  for (const bool v6 : {false, true}) {
    for (const std::size_t payload : {0, 1, 7, 1460, 1461, 8960, 65000}) {
      Seg s;
      s.payload = payload;
      Frame f = build(s, static_cast<std::uint8_t>(payload), v6);
      const std::size_t tcp = tcp_header_at(f.data(), static_cast<std::uint32_t>(f.size()));
      ASSERT_NE(tcp, 0U);
      const TcpPseudo ph = tcp_pseudo(f.data(), tcp);
      EXPECT_EQ(ph.segment_len, f.size() - tcp) << v6 << " " << payload;
      // A good checksum: the segment's sum and the pseudo-header's make all ones.
      const std::uint16_t seg = wire::ones_sum_host(f.data() + tcp, f.size() - tcp);
      EXPECT_EQ(fold_add(seg, ph.sum), 0xFFFF) << v6 << " " << payload;
      // The answer given for it in place of summing completes the pseudo-header the same way.
      note_checked_segment(f.data() + tcp, static_cast<int>(ph.segment_len), ph.sum);
      EXPECT_EQ(
          fold_add(lwip_standard_chksum(f.data() + tcp, static_cast<int>(ph.segment_len)), ph.sum),
          0xFFFF);
      // Answered once: a corrupted byte is then seen by the next sum.
      f[tcp + 4] ^= 0x40;
      EXPECT_NE(
          fold_add(lwip_standard_chksum(f.data() + tcp, static_cast<int>(ph.segment_len)), ph.sum),
          0xFFFF);
    }
  }
}

TEST(CheckedSegment, ClassifySumsUnlessThePortCompletedTheChecksum) {
  for (const bool v6 : {false, true}) {
    Seg s;
    s.payload = 3000;
    Frame f = build(s, 9, v6);
    const auto len = static_cast<std::uint32_t>(f.size());
    EXPECT_EQ(classify(f.data(), len), SegmentKind::kTcp);
    f[f.size() - 5] ^= 0x01;
    EXPECT_EQ(classify(f.data(), len), SegmentKind::kMalformed) << v6;
    EXPECT_EQ(classify(f.data(), len, true), SegmentKind::kTcp) << v6;  // trusted, not summed
  }
}

TEST(CheckedSegment, OnlyTheNotedBytesAndUntilForgotten) {
  Seg s;
  s.payload = 100;
  Frame f = make(s);
  const std::size_t tcp = tcp_header_at(f.data(), static_cast<std::uint32_t>(f.size()));
  const TcpPseudo ph = tcp_pseudo(f.data(), tcp);
  const int len = static_cast<int>(ph.segment_len);
  const std::uint16_t real = wire::ones_sum_host(f.data() + tcp, ph.segment_len);
  note_checked_segment(f.data() + tcp, len, static_cast<std::uint16_t>(ph.sum ^ 0x1234));
  EXPECT_EQ(lwip_standard_chksum(f.data() + tcp, len - 2),
            wire::ones_sum_host(f.data() + tcp, ph.segment_len - 2));  // other bytes: summed
  EXPECT_EQ(lwip_standard_chksum(f.data(), len), wire::ones_sum_host(f.data(), ph.segment_len));
  forget_checked_segment();
  EXPECT_EQ(lwip_standard_chksum(f.data() + tcp, len), real);
}

}  // namespace
}  // namespace softrdma::lwtcp
