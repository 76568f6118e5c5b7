#include <gtest/gtest.h>
#include <pcap/pcap.h>

#include <algorithm>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "lint/iwarp_check.h"
#include "lint/report.h"
#include "wire/ddp_rdmap.h"
#include "wire/fpdu.h"
#include "wire/frame.h"
#include "wire/mpa.h"

using namespace softrdma;
using wire::Bytes;

namespace {

std::string conformance(const char* file) {
  const char* dir = std::getenv("SOFTRDMA_CONFORMANCE");
  return std::string(dir && *dir ? dir : "/work/shared/conformance") + "/" + file;
}

// Feeds every TCP segment of a capture through an IwarpChecker.
lint::Report lint_pcap(const std::string& path) {
  lint::Report report;
  char err[PCAP_ERRBUF_SIZE] = {};
  pcap_t* p = pcap_open_offline(path.c_str(), err);
  EXPECT_NE(p, nullptr) << path << ": " << err;
  if (!p) return report;
  const int linktype = pcap_datalink(p);
  lint::IwarpChecker checker(report);
  pcap_pkthdr* hdr = nullptr;
  const u_char* data = nullptr;
  std::uint64_t frame_no = 0;
  while (pcap_next_ex(p, &hdr, &data) == 1) {
    ++frame_no;
    ++report.counters().packets;
    auto v = wire::parse_frame(Bytes(data, hdr->caplen), linktype);
    if (v && v->tcp) checker.on_tcp_segment(frame_no, *v);
  }
  checker.finish();
  pcap_close(p);
  return report;
}

std::string dump(const lint::Report& r) {
  std::string s;
  for (const auto& v : r.violations()) {
    s += "frame " + std::to_string(v.frame) + " " + v.flow + " " + v.rule + ": expected " +
         v.expected + ", found " + v.found + "\n";
  }
  return s;
}

int count_rule(const lint::Report& r, const std::string& rule) {
  return static_cast<int>(std::count_if(r.violations().begin(), r.violations().end(),
                                        [&](const lint::Violation& v) { return v.rule == rule; }));
}

}  // namespace

TEST(IwarpCheckPcap, CrcRev1IsClean) {
  auto r = lint_pcap(conformance("mpa-crc-rev1.pcap"));
  EXPECT_TRUE(r.violations().empty()) << dump(r);
  EXPECT_EQ(r.counters().mpa_frames, 2u);
  EXPECT_EQ(r.counters().iwarp_fpdus, 2u);
}

TEST(IwarpCheckPcap, CrcRev2IsClean) {
  auto r = lint_pcap(conformance("mpa-crc-rev2.pcap"));
  EXPECT_TRUE(r.violations().empty()) << dump(r);
  EXPECT_EQ(r.counters().mpa_frames, 2u);
  EXPECT_EQ(r.counters().iwarp_fpdus, 2u);
}

TEST(IwarpCheckPcap, WrongByteOrderCrcFlaggedTwice) {
  auto r = lint_pcap(conformance("mpa-crc-wrong-byte-order.pcap"));
  ASSERT_EQ(r.violations().size(), 2u) << dump(r);
  EXPECT_EQ(r.counters().mpa_frames, 2u);
  EXPECT_EQ(r.counters().iwarp_fpdus, 2u);
  const auto& a = r.violations()[0];
  const auto& b = r.violations()[1];
  EXPECT_EQ(a.rule, "fpdu.crc");
  EXPECT_EQ(b.rule, "fpdu.crc");
  EXPECT_EQ(a.frame, 3u);
  EXPECT_EQ(b.frame, 4u);
  EXPECT_EQ(a.flow, "10.0.0.1:40001 > 10.0.0.2:40002");
  EXPECT_EQ(b.flow, "10.0.0.2:40002 > 10.0.0.1:40001");
  EXPECT_EQ(a.expected, "0x85c55345");
  EXPECT_EQ(a.found, "0x4553c585");
  EXPECT_EQ(b.expected, "0xd38ae24b");
  EXPECT_EQ(b.found, "0x4be28ad3");
}

namespace {

// Builds both directions of a synthetic iWARP connection and delivers them as
// TCP segments (split, reordered, retransmitted) to an IwarpChecker.
struct Synth {
  bool crc = true;
  bool req_markers = false;  // initiator asks for markers toward it
  bool rep_markers = false;  // responder asks for markers toward it
  bool ipv6 = false;
  std::uint8_t revision = 1;
  std::vector<std::uint8_t> stream[2];
  std::uint64_t origin[2] = {0, 0};
  std::vector<std::pair<std::uint64_t, std::size_t>> fpdus[2];  // wire start, wire len
  wire::MarkerInserter ins[2];
  int fpdu_count = 0;

  void put(int d, Bytes b) { stream[d].insert(stream[d].end(), b.begin(), b.end()); }

  void handshake() {
    std::vector<std::uint8_t> buf(64);
    wire::MpaFrame req;
    req.kind = wire::MpaKind::kRequest;
    req.crc = crc;
    req.markers = req_markers;
    req.revision = revision;
    const std::uint8_t pd[] = {'h', 'i', '!'};
    req.private_data = pd;
    put(0, Bytes(buf.data(), *wire::build_mpa(buf, req)));
    wire::MpaFrame rep = req;
    rep.kind = wire::MpaKind::kReply;
    rep.markers = rep_markers;
    rep.private_data = {};
    put(1, Bytes(buf.data(), *wire::build_mpa(buf, rep)));
    for (int d = 0; d < 2; ++d) {
      origin[d] = stream[d].size();
      ins[d] = wire::MarkerInserter(0);
    }
  }

  bool markers_toward(int d) const { return d == 0 ? rep_markers : req_markers; }

  void fpdu(int d, Bytes ulpdu) {
    std::vector<std::uint8_t> plain(wire::fpdu_total_len(ulpdu.size()));
    ASSERT_TRUE(wire::build_fpdu(plain, ulpdu, crc).ok());
    if (markers_toward(d)) {
      std::vector<std::uint8_t> w(ins[d].wire_len(plain.size()));
      ASSERT_TRUE(ins[d].put_fpdu(w, plain, crc).ok());
      fpdus[d].emplace_back(stream[d].size(), w.size());
      put(d, w);
    } else {
      fpdus[d].emplace_back(stream[d].size(), plain.size());
      put(d, plain);
    }
    ++fpdu_count;
  }

  void message(int d, std::uint8_t opcode, std::size_t payload, std::uint32_t msn) {
    const wire::OpcodeInfo& info = wire::opcode_info(opcode);
    wire::DdpHeader h;
    h.tagged = info.tagged;
    h.opcode = opcode;
    h.stag = 0x100 + opcode;
    h.to = 0x4000;
    h.qn = info.queue;
    h.msn = msn;
    h.inv_stag = info.uses_inv_stag ? 0x77 : 0;
    std::vector<std::uint8_t> u(h.header_len() + payload);
    ASSERT_TRUE(wire::build_ddp_header(u, h).ok());
    for (std::size_t i = h.header_len(); i < u.size(); ++i) u[i] = static_cast<std::uint8_t>(i);
    fpdu(d, u);
  }

  void traffic() {
    std::uint32_t msn[2] = {1, 1};
    const std::size_t sizes[] = {12, 0, 1, 2, 3, 700, 1400, 2000, 33, 511, 509, 4000};
    int i = 0;
    for (std::size_t s : sizes) {
      const int d = i++ % 2;
      message(d, static_cast<std::uint8_t>(wire::RdmapOpcode::kSend), s, msn[d]++);
      message(d, static_cast<std::uint8_t>(wire::RdmapOpcode::kWrite), s + 5, 0);
    }
    // A Read Request and its Read Response, a Send with Invalidate and SE.
    wire::DdpHeader h;
    h.tagged = false;
    h.opcode = static_cast<std::uint8_t>(wire::RdmapOpcode::kReadRequest);
    h.qn = wire::kQnReadRequest;
    h.msn = 1;
    std::vector<std::uint8_t> u(wire::kDdpUntaggedLen + wire::kReadRequestLen);
    ASSERT_TRUE(wire::build_ddp_header(u, h).ok());
    ASSERT_TRUE(wire::build_read_request(wire::MutBytes(u).subspan(wire::kDdpUntaggedLen),
                                         wire::ReadRequest{1, 2, 1000, 3, 4})
                    .ok());
    fpdu(0, u);
    message(1, static_cast<std::uint8_t>(wire::RdmapOpcode::kReadResponse), 1000, 0);
    message(0, static_cast<std::uint8_t>(wire::RdmapOpcode::kSendSeInvalidate), 77, msn[0]++);
  }

  // TCP segments: odd sizes, shuffled within small windows, some retransmitted
  // whole or overlapping their neighbours.
  struct Seg {
    int d;
    std::uint32_t seq;
    std::vector<std::uint8_t> bytes;
    std::uint8_t flags;
  };
  static constexpr std::uint32_t kIsn[2] = {0xfffff000u, 0x12345678u};  // dir 0 wraps

  std::vector<Seg> segments(std::uint32_t seed, bool reorder) const {
    std::mt19937 rng(seed);
    std::vector<Seg> out;
    out.push_back({0, kIsn[0], {}, wire::kTcpSyn});
    out.push_back({1, kIsn[1], {}, wire::kTcpSyn | wire::kTcpAck});
    std::vector<Seg> per[2];
    for (int d = 0; d < 2; ++d) {
      std::size_t off = 0;
      while (off < stream[d].size()) {
        const std::size_t n = std::min<std::size_t>(1 + rng() % 1460, stream[d].size() - off);
        Seg s{d, static_cast<std::uint32_t>(kIsn[d] + 1 + off),
              std::vector<std::uint8_t>(stream[d].begin() + static_cast<std::ptrdiff_t>(off),
                                        stream[d].begin() + static_cast<std::ptrdiff_t>(off + n)),
              wire::kTcpAck};
        per[d].push_back(std::move(s));
        off += n;
      }
      if (reorder) {
        for (std::size_t i = 0; i + 3 < per[d].size(); i += 3) {
          std::shuffle(per[d].begin() + static_cast<std::ptrdiff_t>(i),
                       per[d].begin() + static_cast<std::ptrdiff_t>(i + 3), rng);
        }
        // Retransmissions: duplicates and overlapping merges of neighbours.
        const std::size_t n = per[d].size();
        for (std::size_t k = 0; k < n / 4; ++k) {
          const std::size_t i = rng() % n;
          Seg dup = per[d][i];
          if (k % 2 == 0 && dup.bytes.size() > 4) {
            // Overlap: a segment covering the last part of this one and beyond.
            const std::size_t cut = dup.bytes.size() / 2;
            dup.seq += static_cast<std::uint32_t>(cut);
            dup.bytes.erase(dup.bytes.begin(),
                            dup.bytes.begin() + static_cast<std::ptrdiff_t>(cut));
            const std::size_t end_off = dup.seq - kIsn[d] - 1 + dup.bytes.size();
            const std::size_t more = std::min<std::size_t>(50, stream[d].size() - end_off);
            dup.bytes.insert(dup.bytes.end(),
                             stream[d].begin() + static_cast<std::ptrdiff_t>(end_off),
                             stream[d].begin() + static_cast<std::ptrdiff_t>(end_off + more));
          }
          per[d].insert(
              per[d].begin() + static_cast<std::ptrdiff_t>(std::min(n, i + 1 + rng() % 4)),
              std::move(dup));
        }
      }
    }
    // Interleave the directions.
    std::size_t i0 = 0, i1 = 0;
    while (i0 < per[0].size() || i1 < per[1].size()) {
      const bool take0 = i1 >= per[1].size() || (i0 < per[0].size() && rng() % 2 == 0);
      out.push_back(take0 ? per[0][i0++] : per[1][i1++]);
    }
    out.push_back({0,
                   static_cast<std::uint32_t>(kIsn[0] + 1 + stream[0].size()),
                   {},
                   wire::kTcpFin | wire::kTcpAck});
    return out;
  }

  lint::Report run(const std::vector<Seg>& segs) const {
    lint::Report report;
    lint::IwarpChecker checker(report);
    std::uint64_t frame_no = 0;
    for (const auto& s : segs) {
      wire::FrameView v;
      v.is_ipv6 = ipv6;
      wire::Tcp tcp;
      tcp.src_port = s.d == 0 ? 40001 : 40002;
      tcp.dst_port = s.d == 0 ? 40002 : 40001;
      tcp.seq = s.seq;
      tcp.flags = s.flags;
      if (ipv6) {
        wire::Ipv6Addr a{}, b{};
        a[0] = b[0] = 0x20;
        a[1] = b[1] = 0x01;
        a[15] = 1;
        b[15] = 2;
        v.ipv6.src = s.d == 0 ? a : b;
        v.ipv6.dst = s.d == 0 ? b : a;
      } else {
        v.ipv4.src = s.d == 0 ? 0x0a000001 : 0x0a000002;
        v.ipv4.dst = s.d == 0 ? 0x0a000002 : 0x0a000001;
      }
      v.tcp = tcp;
      v.payload = Bytes(s.bytes);
      checker.on_tcp_segment(++frame_no, v);
    }
    checker.finish();
    return report;
  }

  // A stream offset inside the payload of FPDU `k` of direction d, not in a marker.
  std::size_t payload_byte(int d, std::size_t k) const {
    const auto [start, len] = fpdus[d][k];
    std::size_t off = start + len / 2;
    if (markers_toward(d) && (off - origin[d]) % 512 < 4) off += 4;
    return off;
  }
};

}  // namespace

class IwarpSynth : public ::testing::TestWithParam<int> {};

// Parameter bits: 1 CRC, 2 markers toward the initiator, 4 markers toward the
// responder, 8 IPv6, 16 revision 2.
TEST_P(IwarpSynth, CleanStreamsHaveNoViolations) {
  const int p = GetParam();
  Synth s;
  s.crc = p & 1;
  s.req_markers = p & 2;
  s.rep_markers = p & 4;
  s.ipv6 = p & 8;
  s.revision = p & 16 ? 2 : 1;
  s.handshake();
  s.traffic();
  for (std::uint32_t seed : {1u, 2u, 3u}) {
    for (bool reorder : {false, true}) {
      auto r = s.run(s.segments(seed + static_cast<std::uint32_t>(p) * 10, reorder));
      EXPECT_TRUE(r.violations().empty()) << dump(r);
      EXPECT_EQ(r.counters().mpa_frames, 2u);
      EXPECT_EQ(r.counters().iwarp_fpdus, static_cast<std::uint64_t>(s.fpdu_count));
    }
  }
}

TEST_P(IwarpSynth, FlippedByteGivesOneCrcViolation) {
  const int p = GetParam() | 1;  // CRC on
  Synth s;
  s.crc = true;
  s.req_markers = p & 2;
  s.rep_markers = p & 4;
  s.ipv6 = p & 8;
  s.handshake();
  s.traffic();
  const std::size_t off = s.payload_byte(1, 7);
  s.stream[1][off] ^= 0x10;
  auto r = s.run(s.segments(9, true));
  ASSERT_EQ(r.violations().size(), 1u) << dump(r);
  EXPECT_EQ(r.violations()[0].rule, "fpdu.crc");
  EXPECT_EQ(r.violations()[0].flow,
            s.ipv6 ? "[2001::2]:40002 > [2001::1]:40001" : "10.0.0.2:40002 > 10.0.0.1:40001");
  EXPECT_EQ(r.counters().iwarp_fpdus, static_cast<std::uint64_t>(s.fpdu_count));
}

INSTANTIATE_TEST_SUITE_P(Modes, IwarpSynth,
                         ::testing::Values(0, 1, 2, 3, 4, 5, 6, 7, 9, 15, 17, 23, 31));

TEST(IwarpSynthRules, CorruptMarkerGivesMarkerViolation) {
  Synth s;
  s.crc = false;  // with CRC on, the CRC (which covers markers) would fail too
  s.req_markers = true;
  s.handshake();
  s.traffic();
  // Direction 1 carries markers; corrupt the FPDUPTR of the marker at 1024.
  const std::size_t m = s.origin[1] + 1024;
  s.stream[1][m + 3] ^= 0x04;
  auto r = s.run(s.segments(4, true));
  ASSERT_EQ(r.violations().size(), 1u) << dump(r);
  EXPECT_EQ(r.violations()[0].rule, "fpdu.marker");
  EXPECT_EQ(r.violations()[0].severity, lint::Severity::kError);
  // The reserved half of a marker is a rule of its own: receivers ignore it (RFC 5044 §4.3).
  Synth t = s;
  t.stream[1][m + 3] ^= 0x04;
  t.stream[1][s.origin[1] + 2048] = 0x01;
  r = t.run(t.segments(5, false));
  ASSERT_EQ(r.violations().size(), 1u) << dump(r);
  EXPECT_EQ(r.violations()[0].rule, "fpdu.marker_reserved");
  EXPECT_EQ(r.violations()[0].severity, lint::Severity::kWarning);
  EXPECT_EQ(r.errors(), 0u);
  EXPECT_EQ(r.warnings(), 1u);
}

TEST(IwarpSynthRules, MarkersWithCrcCoverMarkers) {
  Synth s;
  s.crc = true;
  s.req_markers = true;
  s.rep_markers = true;
  s.handshake();
  s.traffic();
  s.stream[0][s.origin[0] + 512 + 3] ^= 0x04;  // a wrong pointer also breaks that FPDU's CRC
  auto r = s.run(s.segments(6, false));
  EXPECT_EQ(count_rule(r, "fpdu.marker"), 1) << dump(r);
  EXPECT_EQ(count_rule(r, "fpdu.crc"), 1) << dump(r);
  EXPECT_EQ(r.violations().size(), 2u);
}

TEST(IwarpSynthRules, HeaderRules) {
  Synth s;
  s.handshake();
  s.message(0, static_cast<std::uint8_t>(wire::RdmapOpcode::kSend), 10, 1);
  // Hand-made ULPDUs with one defect each.
  auto bad = [&](std::uint8_t c0, std::uint8_t c1, std::uint32_t qn, std::size_t len) {
    std::vector<std::uint8_t> u(len);
    u[0] = c0;
    u[1] = c1;
    if (len >= 10) wire::store32(&u[6], qn);
    s.fpdu(0, u);
  };
  bad(0x41, 0x40, 0, 18);  // Write in an untagged segment
  bad(0x41, 0x43, 1, 18);  // Send on queue 1
  bad(0x42, 0x43, 0, 18);  // DDP version 2
  bad(0x41, 0x83, 0, 18);  // RDMAP version 2
  bad(0x45, 0x43, 0, 18);  // DDP reserved bit
  bad(0x41, 0x4a, 0, 18);  // opcode 10
  bad(0x41, 0x41, 1, 30);  // Read Request too short
  bad(0xc1, 0x40, 0, 14);  // fine: empty Write
  auto r = s.run(s.segments(1, false));
  EXPECT_EQ(count_rule(r, "ddp.tagged_mismatch"), 1) << dump(r);
  EXPECT_EQ(count_rule(r, "ddp.qn"), 1);
  EXPECT_EQ(count_rule(r, "ddp.version"), 1);
  EXPECT_EQ(count_rule(r, "rdmap.version"), 1);
  EXPECT_EQ(count_rule(r, "ddp.reserved"), 1);
  EXPECT_EQ(count_rule(r, "rdmap.opcode"), 1);
  EXPECT_EQ(count_rule(r, "rdmap.read_request_length"), 1);
  EXPECT_EQ(r.violations().size(), 7u);
  EXPECT_EQ(r.counters().iwarp_fpdus, 9u);
  // The reserved bit is the one a receiver ignores.
  EXPECT_EQ(r.errors(), 6u);
  EXPECT_EQ(r.warnings(), 1u);
  for (const auto& v : r.violations()) {
    EXPECT_EQ(v.severity,
              v.rule == "ddp.reserved" ? lint::Severity::kWarning : lint::Severity::kError)
        << v.rule;
  }
}

TEST(IwarpSynthRules, MpaRules) {
  Synth s;
  s.handshake();
  s.stream[0][16] |= 0x01;  // reserved flag bit in the request
  s.stream[1][17] = 3;      // reply revision 3
  auto r = s.run(s.segments(1, false));
  EXPECT_EQ(count_rule(r, "mpa.reserved"), 1) << dump(r);
  EXPECT_EQ(count_rule(r, "mpa.revision"), 1);
  EXPECT_EQ(r.violations().size(), 2u);
  EXPECT_EQ(r.errors(), 1u);  // the revision; the reserved flag bit is a warning
  EXPECT_EQ(r.warnings(), 1u);

  Synth t;
  t.handshake();
  t.stream[1][5] = 'X';  // the reply key is wrong
  r = t.run(t.segments(1, false));
  ASSERT_EQ(r.violations().size(), 1u) << dump(r);
  EXPECT_EQ(r.violations()[0].rule, "mpa.key");

  Synth u;
  u.handshake();
  u.stream[0][18] = 0x03;  // PD_Length 0x303 > 512
  r = u.run(u.segments(1, false));
  ASSERT_EQ(r.violations().size(), 1u) << dump(r);
  EXPECT_EQ(r.violations()[0].rule, "mpa.pd_length");
}

// RFC 5044 §7.1.2: C is a preference; a 1 in either frame means CRCs both ways.
TEST(IwarpSynthRules, CrcFromEitherFrameAppliesBothWays) {
  for (int side = 0; side < 2; ++side) {
    Synth s;
    s.crc = true;  // FPDUs carry real CRCs in both directions
    s.handshake();
    s.stream[side][16] &= static_cast<std::uint8_t>(~wire::kMpaFlagCrc);  // C clear on one side
    s.traffic();
    auto r = s.run(s.segments(3, false));
    EXPECT_TRUE(r.violations().empty()) << side << dump(r);
    // A flipped payload byte in the direction of the side that cleared C is still caught.
    s.stream[side][s.payload_byte(side, 2)] ^= 1;
    r = s.run(s.segments(3, false));
    ASSERT_EQ(r.violations().size(), 1u) << side << dump(r);
    EXPECT_EQ(r.violations()[0].rule, "fpdu.crc");
  }
}

TEST(IwarpSynthRules, RejectStopsChecking) {
  Synth s;
  s.handshake();
  s.stream[1][16] |= wire::kMpaFlagReject;
  s.traffic();
  s.stream[0][s.payload_byte(0, 3)] ^= 1;  // would be a CRC error if checked
  auto r = s.run(s.segments(1, false));
  EXPECT_TRUE(r.violations().empty()) << dump(r);
  EXPECT_EQ(r.counters().mpa_frames, 2u);
  EXPECT_EQ(r.counters().iwarp_fpdus, 0u);
}

TEST(IwarpSynthRules, ReplyMissing) {
  Synth s;
  s.handshake();
  s.stream[1].clear();
  s.message(0, static_cast<std::uint8_t>(wire::RdmapOpcode::kSend), 10, 1);
  auto r = s.run(s.segments(1, false));
  ASSERT_EQ(r.violations().size(), 1u) << dump(r);
  EXPECT_EQ(r.violations()[0].rule, "mpa.reply_missing");
}

TEST(IwarpSynthRules, LostSegmentIsAGap) {
  Synth s;
  s.handshake();
  s.traffic();
  auto segs = s.segments(2, false);
  // Drop a middle data segment of direction 1.
  std::size_t seen = 0;
  for (auto it = segs.begin(); it != segs.end(); ++it) {
    if (it->d == 1 && !it->bytes.empty() && ++seen == 4) {
      segs.erase(it);
      break;
    }
  }
  auto r = s.run(segs);
  EXPECT_EQ(count_rule(r, "tcp.gap"), 1) << dump(r);
  EXPECT_EQ(count_rule(r, "stream.truncated"), 1) << dump(r);
  EXPECT_EQ(r.violations().size(), 2u);
}

TEST(IwarpSynthRules, CaptureEndingMidStreamIsFine) {
  Synth s;
  s.handshake();
  s.traffic();
  auto segs = s.segments(3, false);
  // Stop after the whole of direction 0 plus part of direction 1's data.
  segs.resize(segs.size() * 2 / 3);
  auto r = s.run(segs);
  EXPECT_EQ(count_rule(r, "stream.truncated"), 0) << dump(r);
  EXPECT_EQ(count_rule(r, "tcp.gap"), 0) << dump(r);
}

TEST(IwarpSynthRules, NonIwarpTcpIsIgnored) {
  Synth s;
  const char text[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  s.put(0, Bytes(reinterpret_cast<const std::uint8_t*>(text), sizeof text - 1));
  s.put(1, Bytes(reinterpret_cast<const std::uint8_t*>(text), sizeof text - 1));
  auto r = s.run(s.segments(1, true));
  EXPECT_TRUE(r.violations().empty()) << dump(r);
  EXPECT_EQ(r.counters().mpa_frames, 0u);
}
