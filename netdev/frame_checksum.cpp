#include <cstring>

#include "netdev/frame_port.h"

namespace softrdma::netdev {

namespace {

// Stores the checksum of a partial frame whose bytes from csum_start on sum to `sum` (the field
// holding the pseudo-header sum, not complemented: summing the rest over it and complementing
// gives the checksum; a result of 0 is sent as 0xFFFF for UDP, and is 0 never for TCP since the
// pseudo-header is not zero), and fixes a super-segment's IPv4 header checksum.
void store_completed(std::uint8_t* frame, std::uint32_t len, std::uint16_t csum_start,
                     std::uint16_t csum_offset, std::uint32_t sum) {
  std::uint16_t c = wire::checksum_fold(sum);
  if (c == 0) c = 0xFFFF;
  wire::store16(frame + csum_start + csum_offset, c);
  // A super-segment's IPv4 header: its checksum recomputed for the total length it carries.
  std::size_t l3 = wire::kEthernetLen;
  if (len >= l3 + wire::kIpv4MinLen && wire::load16(frame + 12) == 0x0800 &&
      (frame[l3] >> 4) == 4) {
    const std::size_t ihl = std::size_t{frame[l3] & 0x0Fu} * 4;
    if (ihl >= wire::kIpv4MinLen && l3 + ihl <= len) {
      wire::store16(frame + l3 + 10, 0);
      wire::store16(frame + l3 + 10, wire::ipv4_header_checksum(wire::Bytes(frame + l3, ihl)));
    }
  }
}

}  // namespace

bool complete_checksum(std::uint8_t* frame, std::uint32_t len, std::uint16_t csum_start,
                       std::uint16_t csum_offset) {
  if (csum_start >= len || std::uint32_t{csum_start} + csum_offset + 2u > len) return false;
  store_completed(frame, len, csum_start, csum_offset,
                  wire::checksum_add(0, wire::Bytes(frame + csum_start, len - csum_start)));
  return true;
}

bool complete_partial_tcp(std::uint8_t* frame, std::uint32_t len) {
  constexpr std::size_t l3 = wire::kEthernetLen;
  if (len < l3 + wire::kIpv4MinLen) return false;
  std::uint32_t hdr = 0, total = 0;  // the IP header's length, and the packet's
  std::uint16_t expected = 0;        // the pseudo-header sum an offload leaves in the field
  std::uint32_t tcp_len = 0;
  const std::uint16_t type = wire::load16(frame + 12);
  if (type == 0x0800 && (frame[l3] >> 4) == 4 && frame[l3 + 9] == 6 &&
      !(wire::load16(frame + l3 + 6) & 0x3FFF)) {
    hdr = std::uint32_t{frame[l3] & 0x0Fu} * 4;
    total = wire::load16(frame + l3 + 2);
    if (hdr < wire::kIpv4MinLen || total < hdr + wire::kTcpMinLen || l3 + total > len) return false;
    tcp_len = total - hdr;
    const std::uint32_t src = wire::load32(frame + l3 + 12), dst = wire::load32(frame + l3 + 16);
    expected = wire::l4_partial_checksum_ipv4(src, dst, 6, tcp_len);
  } else if (type == 0x86DD && len >= l3 + wire::kIpv6Len && (frame[l3] >> 4) == 6 &&
             frame[l3 + 6] == 6) {
    hdr = wire::kIpv6Len;
    tcp_len = wire::load16(frame + l3 + 4);
    total = hdr + tcp_len;
    if (tcp_len < wire::kTcpMinLen || l3 + total > len) return false;
    wire::Ipv6Addr src, dst;
    std::memcpy(src.data(), frame + l3 + 8, 16);
    std::memcpy(dst.data(), frame + l3 + 24, 16);
    expected = wire::l4_partial_checksum_ipv6(src, dst, 6, tcp_len);
  } else {
    return false;  // not TCP over IPv4 or IPv6 (or an IPv4 fragment)
  }
  if (wire::load16(frame + l3 + hdr + 16) != expected) return false;
  // One pass over the segment: with the field as it is, the sum both tells a whole checksum that
  // happens to equal the pseudo-header sum (the pseudo-header added, it verifies) and, when not,
  // completes the partial one.
  const std::uint32_t sum = wire::checksum_add(0, wire::Bytes(frame + l3 + hdr, tcp_len));
  if (wire::checksum_fold(sum + expected) == 0) return false;
  store_completed(frame, static_cast<std::uint32_t>(l3 + total),
                  static_cast<std::uint16_t>(l3 + hdr), 16, sum);
  return true;
}

}  // namespace softrdma::netdev
