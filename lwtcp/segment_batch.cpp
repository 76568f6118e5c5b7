#include "lwtcp/segment_batch.h"

#include <algorithm>
#include <cstring>

#include "wire/bytes.h"
#include "wire/net.h"

namespace softrdma::lwtcp {
namespace {

// Offsets in an untagged Ethernet frame carrying IPv4 without options.
constexpr std::size_t kIp = 14, kTcp = 34;
constexpr std::size_t kIpLen = kIp + 2, kIpId = kIp + 4, kIpFrag = kIp + 6, kIpProto = kIp + 9,
                      kIpSum = kIp + 10, kIpAddrs = kIp + 12;
constexpr std::size_t kSeq = kTcp + 4, kAck = kTcp + 8, kOff = kTcp + 12, kFlags = kTcp + 13,
                      kWin = kTcp + 14, kSum = kTcp + 16, kUrg = kTcp + 18;
constexpr std::uint8_t kAckFlag = 0x10, kPshFlag = 0x08, kFinFlag = 0x01;

// The TCP header length of a frame that may join a batch, 0 when it may not: IPv4 without
// options or fragmenting, its length the frame's, TCP with data and ACK (PSH, FIN) as its only
// flags.
std::size_t joinable_tcp_header(const std::uint8_t* f, std::size_t len) {
  if (len < kTcp + 20 || f[12] != 0x08 || f[13] != 0x00 || f[kIp] != 0x45) return 0;
  if (wire::load16(f + kIpLen) + kIp != len || (wire::load16(f + kIpFrag) & 0x3FFF) != 0) return 0;
  if (f[kIpProto] != 6) return 0;
  const std::size_t thl = static_cast<std::size_t>(f[kOff] >> 4) * 4;
  if (thl < 20 || kTcp + thl >= len) return 0;  // no payload: an ACK alone stays alone
  const std::uint8_t flags = f[kFlags];
  if ((flags & kAckFlag) == 0 || (flags & ~(kAckFlag | kPshFlag | kFinFlag)) != 0) return 0;
  return thl;
}

void put_ip_checksum(std::uint8_t* f) {
  wire::store16(f + kIpSum, 0);
  wire::store16(f + kIpSum, wire::ipv4_header_checksum(wire::Bytes(f + kIp, 20)));
}

// Sends the `len` bytes at `b` (headers of `hdr` bytes, then the payload) as segments of `cut`
// bytes of payload through `s` (room for a header and a cut): IDs from `first_id`, sequence
// numbers from the header's, `last_flags` on the last and those without PSH and FIN before.
void emit_cuts(const std::uint8_t* b, std::size_t len, std::size_t hdr, std::uint16_t cut,
               std::uint16_t first_id, std::uint8_t last_flags, std::uint8_t* s,
               const SegmentBatch::FrameOut& out) {
  const std::uint32_t first_seq = wire::load32(b + kSeq);
  std::size_t off = hdr;
  for (std::size_t i = 0; off < len || i == 0; ++i) {
    const std::size_t pl = std::min<std::size_t>(cut, len - off);
    const bool last = off + pl == len;
    std::memcpy(s, b, hdr);
    std::memcpy(s + hdr, b + off, pl);
    wire::store16(s + kIpLen, static_cast<std::uint16_t>(hdr - kIp + pl));
    wire::store16(s + kIpId, static_cast<std::uint16_t>(first_id + i));
    put_ip_checksum(s);
    wire::store32(s + kSeq, first_seq + static_cast<std::uint32_t>(off - hdr));
    s[kFlags] = last ? last_flags : static_cast<std::uint8_t>(last_flags & ~(kPshFlag | kFinFlag));
    wire::store16(s + kSum, 0);
    wire::store16(s + kSum,
                  wire::l4_checksum_ipv4(wire::load32(s + kIpAddrs), wire::load32(s + kIpAddrs + 4),
                                         6, wire::Bytes(s + kTcp, hdr - kTcp + pl)));
    out(s, hdr + pl);
    off += pl;
  }
}

}  // namespace

bool SegmentBatch::append(const std::uint8_t* f, std::size_t len, std::uint16_t cut) {
  const std::size_t thl = joinable_tcp_header(f, len);
  if (thl == 0) return false;
  const std::size_t hdr = kTcp + thl;
  const auto payload = static_cast<std::uint16_t>(len - hdr);
  if (count_ == 0) {
    // A wire segment, or a large one with its cut (which leaves room for the headers).
    if (len > (cut ? kMaxFrame : kMaxSegment) || (cut && cut + hdr > kMaxSegment)) return false;
    std::memcpy(buf_.data(), f, len);
    len_ = len;
    hdr_len_ = hdr;
    mss_ = payload;
    given_cut_ = cut;
    cut_ = cut && cut < payload ? cut : payload;
    first_id_ = wire::load16(f + kIpId);
  } else {
    const std::uint8_t* b = buf_.data();
    const bool same = !closed_ && cut == given_cut_ && hdr == hdr_len_ && payload <= mss_ &&
                      len_ + payload <= kMaxFrame && std::memcmp(b, f, kIp) == 0 &&
                      b[kIp + 1] == f[kIp + 1] &&                             // TOS
                      std::memcmp(b + kIpFrag, f + kIpFrag, 3) == 0 &&        // DF, TTL
                      std::memcmp(b + kIpAddrs, f + kIpAddrs, 8 + 4) == 0 &&  // addresses, ports
                      wire::load16(f + kIpId) == next_id_ && wire::load32(f + kSeq) == next_seq_ &&
                      std::memcmp(b + kAck, f + kAck, 4) == 0 && b[kOff] == f[kOff] &&
                      std::memcmp(b + kWin, f + kWin, 2) == 0 &&
                      std::memcmp(b + kUrg, f + kUrg, hdr - kUrg) == 0;  // urgent, options
    if (!same) return false;
    std::memcpy(buf_.data() + len_, f + hdr, payload);
    len_ += payload;
  }
  ++count_;
  // The next frame's IPv4 ID follows this one's wire segments (one, unless a large segment's).
  next_id_ = static_cast<std::uint16_t>(wire::load16(f + kIpId) + (payload + cut_ - 1) / cut_);
  next_seq_ = wire::load32(f + kSeq) + payload;
  last_flags_ = f[kFlags];
  closed_ = payload < mss_ || (last_flags_ & (kPshFlag | kFinFlag)) != 0;
  return true;
}

std::size_t SegmentBatch::pieces() const {
  if (count_ == 0) return 0;
  const std::size_t payload = len_ - hdr_len_;
  return payload == 0 ? 1 : (payload + cut_ - 1) / cut_;
}

const std::uint8_t* SegmentBatch::frame() {
  std::uint8_t* f = buf_.data();
  if (pieces() > 1) {
    wire::store16(f + kIpLen, static_cast<std::uint16_t>(len_ - kIp));
    put_ip_checksum(f);
    f[kFlags] = last_flags_;
    wire::store16(f + kSum, wire::l4_partial_checksum_ipv4(
                                wire::load32(f + kIpAddrs), wire::load32(f + kIpAddrs + 4), 6,
                                static_cast<std::uint32_t>(len_ - kTcp)));
  }
  return f;
}

void SegmentBatch::segment(const FrameOut& out) {
  if (count_ == 0) return;
  emit_cuts(buf_.data(), len_, hdr_len_, cut_, first_id_, last_flags_, scratch_.data(), out);
}

bool SegmentBatch::cut_frame(const std::uint8_t* f, std::size_t len, std::uint16_t cut,
                             const FrameOut& out) {
  if (len < kTcp + 20 || f[12] != 0x08 || f[13] != 0x00 || f[kIp] != 0x45 || f[kIpProto] != 6 ||
      wire::load16(f + kIpLen) + kIp != len) {
    return false;
  }
  const std::size_t hdr = kTcp + static_cast<std::size_t>(f[kOff] >> 4) * 4;
  if (hdr < kTcp + 20 || hdr > len || cut == 0 || hdr + cut > kMaxSegment) return false;
  std::array<std::uint8_t, kMaxSegment> s;
  emit_cuts(f, len, hdr, cut, wire::load16(f + kIpId), f[kFlags], s.data(), out);
  return true;
}

void SegmentBatch::clear() {
  count_ = 0;
  len_ = 0;
  closed_ = false;
}

}  // namespace softrdma::lwtcp
