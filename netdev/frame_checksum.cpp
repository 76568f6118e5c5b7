#include "netdev/frame_port.h"

namespace softrdma::netdev {

bool complete_checksum(std::uint8_t* frame, std::uint32_t len, std::uint16_t csum_start,
                       std::uint16_t csum_offset) {
  if (csum_start >= len || std::uint32_t{csum_start} + csum_offset + 2u > len) return false;
  // The field holds the pseudo-header sum (not complemented): summing the rest over it and
  // complementing gives the checksum (a result of 0 is sent as 0xFFFF for UDP, and is 0 never
  // for TCP since the pseudo-header is not zero).
  std::uint16_t c =
      wire::checksum_fold(wire::checksum_add(0, wire::Bytes(frame + csum_start, len - csum_start)));
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
  return true;
}

bool complete_partial_tcp4(std::uint8_t* frame, std::uint32_t len) {
  constexpr std::size_t l3 = wire::kEthernetLen;
  if (len < l3 + wire::kIpv4MinLen || wire::load16(frame + 12) != 0x0800 || (frame[l3] >> 4) != 4 ||
      frame[l3 + 9] != 6 || (wire::load16(frame + l3 + 6) & 0x3FFF)) {
    return false;  // not IPv4 TCP, or a fragment
  }
  const std::uint32_t ihl = std::uint32_t{frame[l3] & 0x0Fu} * 4;
  const std::uint32_t total = wire::load16(frame + l3 + 2);
  if (ihl < wire::kIpv4MinLen || total < ihl + wire::kTcpMinLen || l3 + total > len) return false;
  const std::uint32_t src = wire::load32(frame + l3 + 12), dst = wire::load32(frame + l3 + 16);
  const std::uint8_t* seg = frame + l3 + ihl;
  if (wire::load16(seg + 16) != wire::l4_partial_checksum_ipv4(src, dst, 6, total - ihl) ||
      wire::l4_checksum_ipv4(src, dst, 6, wire::Bytes(seg, total - ihl)) == 0) {
    return false;
  }
  return complete_checksum(frame, static_cast<std::uint32_t>(l3 + total),
                           static_cast<std::uint16_t>(l3 + ihl), 16);
}

}  // namespace softrdma::netdev
