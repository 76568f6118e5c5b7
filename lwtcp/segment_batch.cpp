#include "lwtcp/segment_batch.h"

#include <algorithm>
#include <cstring>

#include "wire/bytes.h"
#include "wire/net.h"

namespace softrdma::lwtcp {
namespace {

// An untagged Ethernet frame: IPv4 without options or IPv6 without extension headers, then TCP.
constexpr std::size_t kIp = 14, kTcp4 = kIp + 20, kTcp6 = kIp + 40;
// IPv4 fields.
constexpr std::size_t kIpLen = kIp + 2, kIpId = kIp + 4, kIpFrag = kIp + 6, kIpProto = kIp + 9,
                      kIpSum = kIp + 10, kIpAddrs = kIp + 12;
// IPv6 fields.
constexpr std::size_t kIp6PayloadLen = kIp + 4, kIp6Next = kIp + 6, kIp6Src = kIp + 8,
                      kIp6Dst = kIp + 24;
// TCP fields, from the TCP header.
constexpr std::size_t kSeq = 4, kAck = 8, kOff = 12, kFlags = 13, kWin = 14, kSum = 16, kUrg = 18;
constexpr std::uint8_t kAckFlag = 0x10, kPshFlag = 0x08, kFinFlag = 0x01, kProtoTcp = 6;

// Where TCP starts in a frame of either family whose IP length is the frame's (IPv4: not a
// fragment); 0 for any other frame.
std::size_t tcp_offset(const std::uint8_t* f, std::size_t len) {
  if (len < kTcp4 + 20) return 0;
  if (f[12] == 0x08 && f[13] == 0x00) {
    if (f[kIp] != 0x45 || f[kIpProto] != kProtoTcp) return 0;
    if (wire::load16(f + kIpLen) + kIp != len || (wire::load16(f + kIpFrag) & 0x3FFF) != 0)
      return 0;
    return kTcp4;
  }
  if (f[12] == 0x86 && f[13] == 0xDD) {
    if (len < kTcp6 + 20 || (f[kIp] >> 4) != 6 || f[kIp6Next] != kProtoTcp) return 0;
    if (wire::load16(f + kIp6PayloadLen) + kTcp6 != len) return 0;
    return kTcp6;
  }
  return 0;
}

wire::Ipv6Addr ipv6_at(const std::uint8_t* p) {
  wire::Ipv6Addr a;
  std::memcpy(a.data(), p, a.size());
  return a;
}

// The IP length fields of a frame of `len` bytes whose TCP starts at `tcp` (IPv4: its header
// checksum too).
void put_ip_length(std::uint8_t* f, std::size_t tcp, std::size_t len) {
  if (tcp == kTcp6) {
    wire::store16(f + kIp6PayloadLen, static_cast<std::uint16_t>(len - kTcp6));
    return;
  }
  wire::store16(f + kIpLen, static_cast<std::uint16_t>(len - kIp));
  wire::store16(f + kIpSum, 0);
  wire::store16(f + kIpSum, wire::ipv4_header_checksum(wire::Bytes(f + kIp, 20)));
}

// The complete TCP checksum of a frame's segment (its field zeroed first).
void put_tcp_checksum(std::uint8_t* f, std::size_t tcp, std::size_t len) {
  wire::store16(f + tcp + kSum, 0);
  const wire::Bytes segment(f + tcp, len - tcp);
  wire::store16(
      f + tcp + kSum,
      tcp == kTcp6
          ? wire::l4_checksum_ipv6(ipv6_at(f + kIp6Src), ipv6_at(f + kIp6Dst), kProtoTcp, segment)
          : wire::l4_checksum_ipv4(wire::load32(f + kIpAddrs), wire::load32(f + kIpAddrs + 4),
                                   kProtoTcp, segment));
}

// The TCP header length of a frame that may join a batch, 0 when it may not (and `tcp` where its
// TCP starts): tcp_offset()'s, TCP with data and ACK (PSH, FIN) as its only flags.
std::size_t joinable_tcp_header(const std::uint8_t* f, std::size_t len, std::size_t& tcp) {
  tcp = tcp_offset(f, len);
  if (tcp == 0) return 0;
  const std::size_t thl = static_cast<std::size_t>(f[tcp + kOff] >> 4) * 4;
  if (thl < 20 || tcp + thl >= len) return 0;  // no payload: an ACK alone stays alone
  const std::uint8_t flags = f[tcp + kFlags];
  if ((flags & kAckFlag) == 0 || (flags & ~(kAckFlag | kPshFlag | kFinFlag)) != 0) return 0;
  return thl;
}

// Whether `f` has the headers of the batch's first frame `b` but for what differs between
// consecutive segments (IPv4 ID and length, IPv6 payload length, sequence number, flags,
// checksums).
bool same_headers(const std::uint8_t* b, const std::uint8_t* f, std::size_t tcp, std::size_t hdr) {
  if (std::memcmp(b, f, kIp) != 0) return false;  // Ethernet
  if (tcp == kTcp6) {
    if (std::memcmp(b + kIp, f + kIp, 4) != 0 || b[kIp + 7] != f[kIp + 7])
      return false;  // TC, flow, hops
  } else if (b[kIp + 1] != f[kIp + 1] || std::memcmp(b + kIpFrag, f + kIpFrag, 3) != 0) {
    return false;  // TOS; DF, TTL
  }
  const std::size_t addrs = tcp == kTcp6 ? kIp6Src : kIpAddrs;
  return std::memcmp(b + addrs, f + addrs, tcp - addrs + 4) == 0 &&  // addresses, ports
         std::memcmp(b + tcp + kAck, f + tcp + kAck, 4) == 0 && b[tcp + kOff] == f[tcp + kOff] &&
         std::memcmp(b + tcp + kWin, f + tcp + kWin, 2) == 0 &&
         std::memcmp(b + tcp + kUrg, f + tcp + kUrg, hdr - tcp - kUrg) == 0;  // urgent, options
}

// Sends the `len` bytes at `b` (headers of `hdr` bytes, TCP from `tcp`, then the payload) as
// segments of `cut` bytes of payload through `s` (room for a header and a cut): IPv4 IDs from
// `first_id`, sequence numbers from the header's, `last_flags` on the last and those without PSH
// and FIN before.
void emit_cuts(const std::uint8_t* b, std::size_t len, std::size_t tcp, std::size_t hdr,
               std::uint16_t cut, std::uint16_t first_id, std::uint8_t last_flags, std::uint8_t* s,
               const SegmentBatch::FrameOut& out) {
  const std::uint32_t first_seq = wire::load32(b + tcp + kSeq);
  std::size_t off = hdr;
  for (std::size_t i = 0; off < len || i == 0; ++i) {
    const std::size_t pl = std::min<std::size_t>(cut, len - off);
    const bool last = off + pl == len;
    std::memcpy(s, b, hdr);
    std::memcpy(s + hdr, b + off, pl);
    if (tcp == kTcp4) wire::store16(s + kIpId, static_cast<std::uint16_t>(first_id + i));
    put_ip_length(s, tcp, hdr + pl);
    wire::store32(s + tcp + kSeq, first_seq + static_cast<std::uint32_t>(off - hdr));
    s[tcp + kFlags] =
        last ? last_flags : static_cast<std::uint8_t>(last_flags & ~(kPshFlag | kFinFlag));
    put_tcp_checksum(s, tcp, hdr + pl);
    out(s, hdr + pl);
    off += pl;
  }
}

}  // namespace

bool SegmentBatch::append(const std::uint8_t* f, std::size_t len, std::uint16_t cut) {
  std::size_t tcp = 0;
  const std::size_t thl = joinable_tcp_header(f, len, tcp);
  if (thl == 0) return false;
  const std::size_t hdr = tcp + thl;
  const auto payload = static_cast<std::uint16_t>(len - hdr);
  if (count_ == 0) {
    // A wire segment, or a large one with its cut (which leaves room for the headers).
    if (len > (cut ? kMaxFrame : kMaxSegment) || (cut && cut + hdr > kMaxSegment)) return false;
    std::memcpy(buf_.data(), f, len);
    len_ = len;
    tcp_ = tcp;
    hdr_len_ = hdr;
    mss_ = payload;
    given_cut_ = cut;
    cut_ = cut && cut < payload ? cut : payload;
    first_id_ = tcp == kTcp4 ? wire::load16(f + kIpId) : 0;
  } else {
    const bool same =
        !closed_ && cut == given_cut_ && tcp == tcp_ && hdr == hdr_len_ && payload <= mss_ &&
        len_ + payload <= kMaxFrame && (tcp == kTcp6 || wire::load16(f + kIpId) == next_id_) &&
        wire::load32(f + tcp + kSeq) == next_seq_ && same_headers(buf_.data(), f, tcp, hdr);
    if (!same) return false;
    std::memcpy(buf_.data() + len_, f + hdr, payload);
    len_ += payload;
  }
  ++count_;
  // The next frame's IPv4 ID follows this one's wire segments (one, unless a large segment's).
  if (tcp == kTcp4) {
    next_id_ = static_cast<std::uint16_t>(wire::load16(f + kIpId) + (payload + cut_ - 1) / cut_);
  }
  next_seq_ = wire::load32(f + tcp + kSeq) + payload;
  last_flags_ = f[tcp + kFlags];
  closed_ = payload < mss_ || (last_flags_ & (kPshFlag | kFinFlag)) != 0;
  return true;
}

std::size_t SegmentBatch::pieces() const {
  if (count_ == 0) return 0;
  const std::size_t payload = len_ - hdr_len_;
  return payload == 0 ? 1 : (payload + cut_ - 1) / cut_;
}

std::uint8_t* SegmentBatch::frame() {
  std::uint8_t* f = buf_.data();
  if (pieces() > 1) {
    put_ip_length(f, tcp_, len_);
    f[tcp_ + kFlags] = last_flags_;
    const auto tcp_len = static_cast<std::uint32_t>(len_ - tcp_);
    wire::store16(
        f + tcp_ + kSum,
        tcp_ == kTcp6
            ? wire::l4_partial_checksum_ipv6(ipv6_at(f + kIp6Src), ipv6_at(f + kIp6Dst), kProtoTcp,
                                             tcp_len)
            : wire::l4_partial_checksum_ipv4(wire::load32(f + kIpAddrs),
                                             wire::load32(f + kIpAddrs + 4), kProtoTcp, tcp_len));
  }
  return f;
}

void SegmentBatch::segment(const FrameOut& out) {
  if (count_ == 0) return;
  emit_cuts(buf_.data(), len_, tcp_, hdr_len_, cut_, first_id_, last_flags_, scratch_.data(), out);
}

bool SegmentBatch::cut_frame(const std::uint8_t* f, std::size_t len, std::uint16_t cut,
                             const FrameOut& out) {
  const std::size_t tcp = tcp_offset(f, len);
  if (tcp == 0) return false;
  const std::size_t hdr = tcp + static_cast<std::size_t>(f[tcp + kOff] >> 4) * 4;
  if (hdr < tcp + 20 || hdr > len || cut == 0 || hdr + cut > kMaxSegment) return false;
  std::array<std::uint8_t, kMaxSegment> s;
  const std::uint16_t id = tcp == kTcp4 ? wire::load16(f + kIpId) : 0;
  emit_cuts(f, len, tcp, hdr, cut, id, f[tcp + kFlags], s.data(), out);
  return true;
}

std::size_t SegmentBatch::tcp_at(const std::uint8_t* frame, std::size_t len) {
  return tcp_offset(frame, len);
}

void SegmentBatch::clear() {
  count_ = 0;
  len_ = 0;
  closed_ = false;
}

}  // namespace softrdma::lwtcp
