#include "lwtcp/segment_batch.h"

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
constexpr std::uint8_t kAckFlag = 0x10, kPshFlag = 0x08;

// The TCP header length of a frame that may join a batch, 0 when it may not: IPv4 without
// options or fragmenting, its length the frame's, TCP with data and ACK (PSH) as its only flags.
std::size_t joinable_tcp_header(const std::uint8_t* f, std::size_t len) {
  if (len < kTcp + 20 || f[12] != 0x08 || f[13] != 0x00 || f[kIp] != 0x45) return 0;
  if (wire::load16(f + kIpLen) + kIp != len || (wire::load16(f + kIpFrag) & 0x3FFF) != 0) return 0;
  if (f[kIpProto] != 6) return 0;
  const std::size_t thl = static_cast<std::size_t>(f[kOff] >> 4) * 4;
  if (thl < 20 || kTcp + thl >= len) return 0;  // no payload: an ACK alone stays alone
  const std::uint8_t flags = f[kFlags];
  if ((flags & kAckFlag) == 0 || (flags & ~(kAckFlag | kPshFlag)) != 0) return 0;
  return thl;
}

void put_ip_checksum(std::uint8_t* f) {
  wire::store16(f + kIpSum, 0);
  wire::store16(f + kIpSum, wire::ipv4_header_checksum(wire::Bytes(f + kIp, 20)));
}

}  // namespace

bool SegmentBatch::append(const std::uint8_t* f, std::size_t len) {
  const std::size_t thl = joinable_tcp_header(f, len);
  if (thl == 0) return false;
  const std::size_t hdr = kTcp + thl;
  const auto payload = static_cast<std::uint16_t>(len - hdr);
  if (count_ == 0) {
    if (len > kMaxSegment) return false;
    std::memcpy(buf_.data(), f, len);
    len_ = len;
    hdr_len_ = hdr;
    mss_ = payload;
  } else {
    const std::uint8_t* b = buf_.data();
    const bool same =
        !closed_ && hdr == hdr_len_ && payload <= mss_ && len_ + payload <= kMaxFrame &&
        std::memcmp(b, f, kIp) == 0 && b[kIp + 1] == f[kIp + 1] &&  // TOS
        std::memcmp(b + kIpFrag, f + kIpFrag, 3) == 0 &&            // DF, TTL
        std::memcmp(b + kIpAddrs, f + kIpAddrs, 8 + 4) == 0 &&      // addresses, ports
        wire::load16(f + kIpId) == static_cast<std::uint16_t>(last_id_ + 1) &&
        wire::load32(f + kSeq) == next_seq_ && std::memcmp(b + kAck, f + kAck, 4) == 0 &&
        b[kOff] == f[kOff] && std::memcmp(b + kWin, f + kWin, 2) == 0 &&
        std::memcmp(b + kUrg, f + kUrg, hdr - kUrg) == 0;  // urgent, options
    if (!same) return false;
    std::memcpy(buf_.data() + len_, f + hdr, payload);
    len_ += payload;
  }
  ++count_;
  last_id_ = wire::load16(f + kIpId);
  next_seq_ = wire::load32(f + kSeq) + payload;
  last_flags_ = f[kFlags];
  closed_ = payload < mss_ || (last_flags_ & kPshFlag) != 0;
  return true;
}

const std::uint8_t* SegmentBatch::frame() {
  std::uint8_t* f = buf_.data();
  if (count_ > 1) {
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
  const std::uint8_t* b = buf_.data();
  const std::uint16_t first_id = static_cast<std::uint16_t>(last_id_ - (count_ - 1));
  const std::uint32_t first_seq = wire::load32(b + kSeq);
  std::size_t off = hdr_len_;
  for (std::size_t i = 0; i < count_; ++i) {
    const std::size_t pl = i + 1 < count_ ? mss_ : len_ - off;
    std::uint8_t* s = scratch_.data();
    std::memcpy(s, b, hdr_len_);
    std::memcpy(s + hdr_len_, b + off, pl);
    wire::store16(s + kIpLen, static_cast<std::uint16_t>(hdr_len_ - kIp + pl));
    wire::store16(s + kIpId, static_cast<std::uint16_t>(first_id + i));
    put_ip_checksum(s);
    wire::store32(s + kSeq, first_seq + static_cast<std::uint32_t>(i * mss_));
    s[kFlags] = i + 1 < count_ ? static_cast<std::uint8_t>(last_flags_ & ~kPshFlag) : last_flags_;
    wire::store16(s + kSum, 0);
    wire::store16(s + kSum,
                  wire::l4_checksum_ipv4(wire::load32(s + kIpAddrs), wire::load32(s + kIpAddrs + 4),
                                         6, wire::Bytes(s + kTcp, hdr_len_ - kTcp + pl)));
    out(s, hdr_len_ + pl);
    off += pl;
  }
}

void SegmentBatch::clear() {
  count_ = 0;
  len_ = 0;
  closed_ = false;
}

}  // namespace softrdma::lwtcp
