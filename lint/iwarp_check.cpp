#include "lint/iwarp_check.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <deque>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "lint/flow.h"
#include "wire/ddp_rdmap.h"
#include "wire/fpdu.h"
#include "wire/mpa.h"

namespace softrdma::lint {

namespace {

using wire::Bytes;

// Reassembly bound per direction: out-of-order bytes held, and in-order bytes
// waiting to be parsed (e.g. FPDUs sent before the MPA reply was seen).
constexpr std::size_t kMaxBuffered = 4u << 20;

struct Endpoint {
  std::array<std::uint8_t, 16> addr{};
  std::uint16_t port = 0;
  auto tie() const { return std::tie(addr, port); }
  bool operator<(const Endpoint& o) const { return tie() < o.tie(); }
  bool operator==(const Endpoint& o) const { return tie() == o.tie(); }
};

struct ConnKey {
  bool v6 = false;
  Endpoint a;  // the smaller endpoint
  Endpoint b;
  bool operator<(const ConnKey& o) const { return std::tie(v6, a, b) < std::tie(o.v6, o.a, o.b); }
};

enum class Phase : std::uint8_t {
  kUndecided,  // no payload parsed yet; role unknown
  kMpa,        // expecting the MPA request (initiator) or reply (responder)
  kWaitPeer,   // initiator after its request, waiting for the reply
  kFpdu,       // full operation: FPDUs
  kDone,       // not iWARP, rejected, or framing lost: nothing more to check
};

struct Segment {
  std::vector<std::uint8_t> bytes;
  std::uint64_t frame = 0;
};

struct Direction {
  std::string flow;
  bool seq_known = false;
  std::uint32_t next_seq = 0;            // TCP sequence number of stream offset `delivered`
  std::uint64_t delivered = 0;           // stream bytes delivered in order so far
  std::map<std::uint64_t, Segment> ooo;  // keyed by stream offset
  std::size_t ooo_bytes = 0;
  bool overflowed = false;
  // In-order bytes not yet consumed: buf[head..] is stream offset `base`.
  std::vector<std::uint8_t> buf;
  std::size_t head = 0;
  std::uint64_t base = 0;
  std::deque<std::pair<std::uint64_t, std::uint64_t>> marks;  // (stream offset, frame)
  Phase phase = Phase::kUndecided;
  bool crc = false;
  bool markers = false;
  std::uint64_t origin = 0;  // stream offset of the first FPDU byte (marker origin)
  bool mpa_seen = false;
  std::uint64_t mpa_frame_no = 0;
  wire::MpaFrame mpa;  // flags of this direction's MPA frame (private data not kept)

  std::size_t avail() const { return buf.size() - head; }
  Bytes data() const { return Bytes(buf.data() + head, buf.size() - head); }
  void consume(std::size_t n) {
    head += n;
    base += n;
    if (head == buf.size()) {
      buf.clear();
      head = 0;
    } else if (head > (64u << 10) && head > buf.size() / 2) {
      buf.erase(buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(head));
      head = 0;
    }
    while (marks.size() > 1 && marks[1].first <= base) marks.pop_front();
  }
  // The frame that carried stream offset `off` (off >= base).
  std::uint64_t frame_of(std::uint64_t off) const {
    std::uint64_t f = marks.empty() ? 0 : marks.front().second;
    for (const auto& m : marks) {
      if (m.first > off) break;
      f = m.second;
    }
    return f;
  }
  void drop() {
    phase = Phase::kDone;
    buf.clear();
    buf.shrink_to_fit();
    head = 0;
    ooo.clear();
    ooo_bytes = 0;
    marks.clear();
  }
};

struct Conn {
  Direction dir[2];
  int initiator = -1;  // index of the direction that sent the MPA request
};

std::string hex_bytes(Bytes b) {
  static const char* digits = "0123456789abcdef";
  std::string s = "0x";
  for (std::uint8_t c : b) {
    s += digits[c >> 4];
    s += digits[c & 15];
  }
  return s;
}

std::string crc_wire_hex(std::uint32_t crc) {
  std::array<std::uint8_t, 4> b{};
  wire::store32le(b.data(), crc);
  return hex_bytes(b);
}

Rule ddp_rule(wire::DdpIssue i) {
  switch (i) {
    case wire::DdpIssue::kBadDdpVersion:
      return "ddp.version";
    case wire::DdpIssue::kBadRdmapVersion:
      return "rdmap.version";
    case wire::DdpIssue::kDdpReserved:
      return "ddp.reserved";
    case wire::DdpIssue::kRdmapReserved:
      return "rdmap.reserved";
    case wire::DdpIssue::kUnknownOpcode:
      return "rdmap.opcode";
    case wire::DdpIssue::kTaggedMismatch:
      return "ddp.tagged_mismatch";
    case wire::DdpIssue::kQueueNumber:
      return "ddp.qn";
    case wire::DdpIssue::kNone:
      break;
  }
  return "ddp.header";
}

}  // namespace

struct IwarpChecker::Impl {
  Report& report;
  std::map<ConnKey, Conn> conns;
  std::vector<std::uint8_t> scratch;     // marker-free copy of one FPDU
  std::vector<wire::Marker> marker_buf;  // markers of one FPDU

  explicit Impl(Report& r) : report(r) {}

  void violation(const Direction& d, std::uint64_t frame, Rule rule, std::string expected,
                 std::string found) {
    report.add(frame, d.flow, rule, std::move(expected), std::move(found));
  }

  void segment(std::uint64_t frame_no, const wire::FrameView& f);
  void deliver(Conn& c, int d, std::uint64_t frame, std::uint64_t off, Bytes bytes);
  void append(Conn& c, int d, std::uint64_t frame, Bytes bytes);
  void pump(Conn& c, int d);
  bool parse_mpa_frame(Conn& c, int d);
  bool parse_fpdu(Direction& dir);
  void negotiate(Conn& c, int d);
  void finish();
};

void IwarpChecker::Impl::segment(std::uint64_t frame_no, const wire::FrameView& f) {
  if (!f.tcp) return;
  const wire::Tcp& tcp = *f.tcp;
  ConnKey key;
  key.v6 = f.is_ipv6;
  Endpoint src, dst;
  if (f.is_ipv6) {
    src.addr = f.ipv6.src;
    dst.addr = f.ipv6.dst;
  } else {
    wire::store32(src.addr.data(), f.ipv4.src);
    wire::store32(dst.addr.data(), f.ipv4.dst);
  }
  src.port = tcp.src_port;
  dst.port = tcp.dst_port;
  const bool src_first = src < dst || src == dst;
  key.a = src_first ? src : dst;
  key.b = src_first ? dst : src;
  const int d = src_first ? 0 : 1;

  auto it = conns.find(key);
  const bool syn = (tcp.flags & wire::kTcpSyn) != 0;
  if (it != conns.end() && syn) {
    // A SYN with a new sequence number on a known connection: the 4-tuple is reused.
    const Direction& old = it->second.dir[d];
    if (old.seq_known && tcp.seq + 1 != old.next_seq - static_cast<std::uint32_t>(old.delivered)) {
      conns.erase(it);
      it = conns.end();
    }
  }
  if (it == conns.end()) it = conns.emplace(key, Conn{}).first;
  Conn& c = it->second;
  Direction& dir = c.dir[d];
  if (dir.flow.empty()) dir.flow = flow_string(f);

  Bytes payload = f.payload;
  std::uint32_t seq = tcp.seq;
  if (syn) {
    seq += 1;  // the SYN occupies one sequence number; data follows it
    if (!dir.seq_known) {
      dir.seq_known = true;
      dir.next_seq = seq;
    }
  }
  if (!dir.seq_known) {
    // The capture began after the handshake: take the first segment as the start.
    dir.seq_known = true;
    dir.next_seq = seq;
  }
  if (payload.empty() || dir.phase == Phase::kDone) return;
  const auto rel = static_cast<std::int32_t>(seq - dir.next_seq);
  if (rel < 0 && static_cast<std::uint64_t>(-static_cast<std::int64_t>(rel)) > dir.delivered) {
    // Before the start of the stream we follow: keep only what lies inside it.
    const auto skip = static_cast<std::size_t>(-static_cast<std::int64_t>(rel)) -
                      static_cast<std::size_t>(dir.delivered);
    if (skip >= payload.size()) return;
    payload = payload.subspan(skip);
    seq += static_cast<std::uint32_t>(skip);
  }
  const auto off = static_cast<std::uint64_t>(static_cast<std::int64_t>(dir.delivered) +
                                              static_cast<std::int32_t>(seq - dir.next_seq));
  deliver(c, d, frame_no, off, payload);
}

void IwarpChecker::Impl::deliver(Conn& c, int d, std::uint64_t frame, std::uint64_t off,
                                 Bytes bytes) {
  Direction& dir = c.dir[d];
  const std::uint64_t end = off + bytes.size();
  if (end <= dir.delivered) return;  // a retransmission of bytes already seen
  if (off > dir.delivered) {
    // Out of order: hold it (bounded), keeping the longest segment per offset.
    auto& slot = dir.ooo[off];
    if (slot.bytes.size() < bytes.size()) {
      dir.ooo_bytes += bytes.size() - slot.bytes.size();
      slot.bytes.assign(bytes.begin(), bytes.end());
      slot.frame = frame;
    }
    if (dir.ooo_bytes > kMaxBuffered) {
      violation(dir, frame, "tcp.gap",
                "missing bytes at stream offset " + std::to_string(dir.delivered),
                "more than 4 MiB buffered behind the gap; stream dropped");
      dir.overflowed = true;
      dir.drop();
    }
    return;
  }
  // Overlaps what we have: append only the new part.
  append(c, d, frame, bytes.subspan(static_cast<std::size_t>(dir.delivered - off)));
  // Drain held segments that now fit.
  while (dir.phase != Phase::kDone && !dir.ooo.empty() && dir.ooo.begin()->first <= dir.delivered) {
    auto node = dir.ooo.extract(dir.ooo.begin());
    dir.ooo_bytes -= node.mapped().bytes.size();
    const std::uint64_t seg_end = node.key() + node.mapped().bytes.size();
    if (seg_end > dir.delivered) {
      Bytes b(node.mapped().bytes);
      append(c, d, node.mapped().frame,
             b.subspan(static_cast<std::size_t>(dir.delivered - node.key())));
    }
  }
}

void IwarpChecker::Impl::append(Conn& c, int d, std::uint64_t frame, Bytes bytes) {
  Direction& dir = c.dir[d];
  if (dir.marks.empty() || dir.marks.back().second != frame) {
    dir.marks.emplace_back(dir.delivered, frame);
  }
  dir.delivered += bytes.size();
  dir.next_seq += static_cast<std::uint32_t>(bytes.size());
  dir.buf.insert(dir.buf.end(), bytes.begin(), bytes.end());
  pump(c, d);
  if (dir.phase != Phase::kDone && dir.avail() > kMaxBuffered) {
    if (dir.phase == Phase::kWaitPeer) {
      violation(dir, dir.frame_of(dir.base), "mpa.reply_missing", "an MPA reply before FPDUs",
                "more than 4 MiB sent with no reply");
    }
    dir.drop();
  }
}

void IwarpChecker::Impl::pump(Conn& c, int d) {
  Direction& dir = c.dir[d];
  for (;;) {
    switch (dir.phase) {
      case Phase::kDone:
      case Phase::kWaitPeer:
        return;
      case Phase::kUndecided: {
        if (dir.avail() == 0) return;
        if (c.initiator == -1) {
          if (wire::mpa_key_prefix(dir.data(), wire::MpaKind::kRequest)) {
            if (dir.avail() < wire::kMpaKeyLen) return;
            c.initiator = d;
            dir.phase = Phase::kMpa;
            pump(c, 1 - d);  // the peer may be holding its reply
            break;
          }
          if (wire::mpa_key_prefix(dir.data(), wire::MpaKind::kReply) &&
              c.dir[1 - d].phase == Phase::kUndecided) {
            return;  // a reply captured before its request: wait for the peer
          }
          dir.drop();  // not iWARP
          return;
        }
        if (c.initiator == d) {
          dir.drop();  // cannot happen: the initiator decided in this state
          return;
        }
        dir.phase = Phase::kMpa;
        break;
      }
      case Phase::kMpa:
        if (!parse_mpa_frame(c, d)) return;
        break;
      case Phase::kFpdu:
        if (!parse_fpdu(dir)) return;
        break;
    }
  }
}

// Parses this direction's MPA request or reply; false when more bytes are needed
// or checking stops.
bool IwarpChecker::Impl::parse_mpa_frame(Conn& c, int d) {
  Direction& dir = c.dir[d];
  const bool is_request = c.initiator == d;
  const auto kind = is_request ? wire::MpaKind::kRequest : wire::MpaKind::kReply;
  Bytes in = dir.data();
  const std::uint64_t frame = dir.frame_of(dir.base);
  const char* key_name = is_request ? "\"MPA ID Req Frame\"" : "\"MPA ID Rep Frame\"";
  if (!wire::mpa_key_prefix(in, kind)) {
    violation(dir, frame, "mpa.key", key_name,
              hex_bytes(in.first(std::min(in.size(), wire::kMpaKeyLen))));
    dir.drop();
    if (!is_request && c.initiator >= 0) c.dir[c.initiator].drop();
    return false;
  }
  if (in.size() < wire::kMpaHeaderLen) return false;
  std::array<std::uint8_t, wire::kMpaHeaderLen + wire::kMpaMaxPrivateData> copy{};
  const std::uint8_t flags = in[16];
  std::uint8_t rev = in[17];
  const std::uint16_t pd_len = wire::load16(&in[18]);
  if (pd_len > wire::kMpaMaxPrivateData) {
    violation(dir, frame, "mpa.pd_length", "at most 512", std::to_string(pd_len));
    dir.drop();
    if (c.initiator >= 0) c.dir[1 - d].drop();
    return false;
  }
  if (in.size() < wire::kMpaHeaderLen + pd_len) return false;
  std::uint8_t clean_flags = flags;
  if ((flags & wire::kMpaFlagReserved) != 0) {
    violation(dir, frame, "mpa.reserved", "0x0 in the flags' reserved bits",
              hex(flags & wire::kMpaFlagReserved, 2));
    clean_flags = static_cast<std::uint8_t>(clean_flags & ~wire::kMpaFlagReserved);
  }
  if (rev != 1 && rev != 2) {
    violation(dir, frame, "mpa.revision", "1 or 2", std::to_string(rev));
    rev = (flags & wire::kMpaFlagEnhanced) != 0 ? 2 : 1;
  } else if ((flags & wire::kMpaFlagEnhanced) != 0 && rev == 1) {
    violation(dir, frame, "mpa.revision", "2 with the enhanced flag", "1");
    clean_flags = static_cast<std::uint8_t>(clean_flags & ~wire::kMpaFlagEnhanced);
  }
  if ((clean_flags & wire::kMpaFlagEnhanced) != 0 && pd_len < wire::kMpaIrdOrdLen) {
    violation(dir, frame, "mpa.pd_length", "at least 4 with the enhanced flag",
              std::to_string(pd_len));
    clean_flags = static_cast<std::uint8_t>(clean_flags & ~wire::kMpaFlagEnhanced);
  }
  const std::size_t total = wire::kMpaHeaderLen + pd_len;
  std::memcpy(copy.data(), in.data(), total);
  copy[16] = clean_flags;
  copy[17] = rev;
  auto parsed = wire::parse_mpa(Bytes(copy.data(), total));
  dir.consume(total);
  ++report.counters().mpa_frames;
  if (!parsed) {  // not expected after the clean-up above; stop rather than guess
    violation(dir, frame, "mpa.key", key_name, std::string(wire::to_string(parsed.error())));
    dir.drop();
    return false;
  }
  dir.mpa = *parsed;
  dir.mpa.private_data = {};
  dir.mpa_seen = true;
  dir.mpa_frame_no = frame;
  dir.phase = Phase::kWaitPeer;
  if (c.dir[1 - d].mpa_seen) negotiate(c, d);
  return dir.phase != Phase::kWaitPeer && dir.phase != Phase::kDone;
}

// Once both MPA frames are parsed: CRC and markers for both directions (RFC 5044
// §7.1.2), then full operation. Markers are placed relative to the first octet after
// each side's MPA frame, i.e. the first FPDU it sends (§5). `d` is the direction being pumped by
// the caller.
void IwarpChecker::Impl::negotiate(Conn& c, int d) {
  Direction& ini = c.dir[c.initiator];
  Direction& rsp = c.dir[1 - c.initiator];
  if (rsp.mpa.reject) {  // not a violation; the connection does not enter full operation
    ini.drop();
    rsp.drop();
    return;
  }
  // C is each side's preference; a 1 in either frame puts CRCs in both directions
  // (RFC 5044 §7.1.2), so a reply with C clear after a request with C set is no error.
  const bool crc = ini.mpa.crc || rsp.mpa.crc;
  ini.crc = rsp.crc = crc;
  // M in a received frame means: add markers when sending to its sender (§7.1.2).
  ini.markers = rsp.mpa.markers;
  rsp.markers = ini.mpa.markers;
  for (Direction* dir : {&ini, &rsp}) {
    dir->origin = dir->base;
    dir->phase = Phase::kFpdu;
  }
  pump(c, 1 - d);  // the caller's loop continues with direction d
}

// Checks one FPDU; false when more bytes are needed or checking stops.
bool IwarpChecker::Impl::parse_fpdu(Direction& dir) {
  Bytes in = dir.data();
  const std::uint64_t start = dir.base - dir.origin;  // marker-relative offset
  const std::size_t lead = dir.markers && wire::is_marker_offset(start) ? wire::kMarkerLen : 0;
  if (in.size() < lead + wire::kFpduHeaderLen) return false;
  const std::uint64_t frame = dir.frame_of(dir.base);
  const std::uint16_t ulen = wire::load16(&in[lead]);
  if (ulen < wire::kDdpTaggedLen) {
    violation(dir, frame, "fpdu.length", "a ULPDU_Length of at least 14 (a DDP header)",
              std::to_string(ulen));
    dir.drop();  // framing is lost
    return false;
  }
  const std::size_t plain_len = wire::fpdu_total_len(ulen);
  const std::size_t wire_len = dir.markers ? wire::fpdu_wire_len(start, plain_len) : plain_len;
  if (in.size() < wire_len) return false;
  Bytes wire_fpdu = in.first(wire_len);
  wire::Expected<wire::Fpdu> fp = wire::Error::kTruncated;
  if (dir.markers) {
    scratch.resize(plain_len);
    marker_buf.resize(wire_len / wire::kMarkerInterval + 2);
    wire::MarkerStripper st(start);
    auto r = st.strip(wire_fpdu, scratch, marker_buf);
    for (std::size_t i = 0; i < r.markers; ++i) {
      const wire::Marker& m = marker_buf[i];
      const std::uint16_t want = wire::expected_fpdu_ptr(m.offset, start);
      const std::uint64_t marker_frame = dir.frame_of(dir.origin + m.offset);
      if (m.fpdu_ptr != want) {
        violation(dir, marker_frame, "fpdu.marker", "FPDUPTR " + std::to_string(want),
                  "FPDUPTR " + std::to_string(m.fpdu_ptr));
      }
      if (m.reserved != 0) {  // sent as zero, ignored on receive (RFC 5044 §4.3)
        violation(dir, marker_frame, "fpdu.marker_reserved", "reserved 0x0000",
                  "reserved " + hex(m.reserved, 4));
      }
    }
    fp = wire::parse_fpdu(Bytes(scratch.data(), plain_len), dir.crc);
    if (fp && dir.crc) {
      // The CRC covers the FPDU as sent, markers included.
      fp->crc_computed = wire::fpdu_crc(wire_fpdu.first(wire_len - wire::kFpduCrcLen));
    }
  } else {
    fp = wire::parse_fpdu(wire_fpdu, dir.crc);
  }
  if (!fp) return false;  // cannot happen: the length was checked
  ++report.counters().iwarp_fpdus;
  if (!fp->crc_ok()) {
    violation(dir, frame, "fpdu.crc", crc_wire_hex(fp->crc_computed),
              hex_bytes(wire_fpdu.last(wire::kFpduCrcLen)));
  }
  if (!fp->pad_zero()) {
    violation(dir, frame, "fpdu.pad", "zero pad bytes", hex_bytes(fp->pad));
  }
  auto h = wire::decode_ddp_header(fp->ulpdu);
  if (!h) {
    violation(dir, frame, "fpdu.length", "a ULPDU_Length of at least 18 (untagged DDP header)",
              std::to_string(ulen));
  } else {
    wire::DdpIssue issue = wire::check_ddp_header(*h);
    if (issue == wire::DdpIssue::kNone) issue = wire::check_ddp_reserved(*h);
    if (issue != wire::DdpIssue::kNone) {
      std::string expected, found;
      switch (issue) {
        case wire::DdpIssue::kBadDdpVersion:
          expected = "1";
          found = std::to_string(h->ddp_version);
          break;
        case wire::DdpIssue::kBadRdmapVersion:
          expected = "1";
          found = std::to_string(h->rdmap_version);
          break;
        case wire::DdpIssue::kDdpReserved:
          expected = "0x0";
          found = hex(h->ddp_reserved);
          break;
        case wire::DdpIssue::kRdmapReserved:
          expected = "reserved RDMAP bits and Inv STag zero";
          found = "rsvd " + hex(h->rdmap_reserved) + ", Inv STag " + hex(h->inv_stag, 8);
          break;
        case wire::DdpIssue::kUnknownOpcode:
          expected = "an opcode 0..7";
          found = std::to_string(h->opcode);
          break;
        case wire::DdpIssue::kTaggedMismatch:
          expected = std::string(wire::opcode_info(h->opcode).name) +
                     (h->tagged ? " in an untagged segment" : " in a tagged segment");
          found = h->tagged ? "T=1" : "T=0";
          break;
        case wire::DdpIssue::kQueueNumber:
          expected = "QN " + std::to_string(wire::opcode_info(h->opcode).queue) + " for " +
                     wire::opcode_info(h->opcode).name;
          found = "QN " + std::to_string(h->qn);
          break;
        case wire::DdpIssue::kNone:
          break;
      }
      violation(dir, frame, ddp_rule(issue), std::move(expected), std::move(found));
    } else if (h->opcode == static_cast<std::uint8_t>(wire::RdmapOpcode::kReadRequest) &&
               fp->ulpdu.size() != wire::kDdpUntaggedLen + wire::kReadRequestLen) {
      violation(dir, frame, "rdmap.read_request_length",
                std::to_string(wire::kDdpUntaggedLen + wire::kReadRequestLen) + " byte ULPDU",
                std::to_string(fp->ulpdu.size()));
    }
  }
  dir.consume(wire_len);
  return true;
}

void IwarpChecker::Impl::finish() {
  for (auto& [key, c] : conns) {
    if (c.initiator < 0) continue;  // not iWARP
    Direction& ini = c.dir[c.initiator];
    Direction& rsp = c.dir[1 - c.initiator];
    if (ini.mpa_seen && !rsp.mpa_seen && rsp.phase != Phase::kDone &&
        (ini.avail() > 0 || !ini.ooo.empty())) {
      violation(ini, ini.frame_of(ini.base), "mpa.reply_missing",
                "an MPA reply before the initiator's FPDUs", "no reply in the capture");
    }
    for (Direction* dir : {&ini, &rsp}) {
      if (dir->phase == Phase::kDone || dir->ooo.empty()) continue;
      const auto& first = *dir->ooo.begin();
      violation(*dir, first.second.frame, "tcp.gap",
                "stream bytes from offset " + std::to_string(dir->delivered),
                "next bytes at offset " + std::to_string(first.first) + " (" +
                    std::to_string(first.first - dir->delivered) + " bytes never captured)");
      if (dir->phase == Phase::kFpdu || dir->phase == Phase::kMpa) {
        violation(*dir, dir->frame_of(dir->base), "stream.truncated", "whole FPDUs",
                  std::to_string(dir->avail()) + " bytes of an unfinished " +
                      (dir->phase == Phase::kMpa ? "MPA frame" : "FPDU") + " before the gap");
      }
    }
  }
  conns.clear();
}

IwarpChecker::IwarpChecker(Report& report) : impl_(std::make_unique<Impl>(report)) {}
IwarpChecker::~IwarpChecker() = default;
void IwarpChecker::on_tcp_segment(std::uint64_t frame_no, const wire::FrameView& frame) {
  impl_->segment(frame_no, frame);
}
void IwarpChecker::finish() {
  impl_->finish();
}

}  // namespace softrdma::lint
