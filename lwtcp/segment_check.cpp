#include "lwtcp/segment_check.h"

#include "wire/bytes.h"
#include "wire/net.h"

namespace softrdma::lwtcp {

SegmentKind classify(const std::uint8_t* frame, std::uint32_t len) {
  constexpr std::size_t kIp = wire::kEthernetLen;
  if (len < kIp || wire::load16(frame + 12) != wire::kEthertypeIpv4) return SegmentKind::kOther;
  const wire::Bytes packet(frame + kIp, len - kIp);
  const auto ip = wire::parse_ipv4(packet);
  if (!ip || wire::ipv4_header_checksum(packet.first(ip->ihl_bytes)) != 0) {
    return SegmentKind::kMalformed;
  }
  if (ip->protocol != 6) return SegmentKind::kOther;
  if (ip->mf || ip->frag_offset != 0) return SegmentKind::kOther;  // lwIP reassembles first
  const wire::Bytes segment = packet.subspan(ip->ihl_bytes, ip->total_len - ip->ihl_bytes);
  const auto tcp = wire::parse_tcp(segment);
  if (!tcp || wire::l4_checksum_ipv4(ip->src, ip->dst, 6, segment) != 0) {
    return SegmentKind::kMalformed;
  }
  if (tcp->flags & wire::kTcpRst) return SegmentKind::kTcpRst;
  if ((tcp->flags & (wire::kTcpSyn | wire::kTcpAck)) == wire::kTcpSyn) return SegmentKind::kTcpSyn;
  return SegmentKind::kTcp;
}

std::uint16_t tcp_dst_port(const std::uint8_t* frame, std::uint32_t len) {
  constexpr std::size_t kIp = wire::kEthernetLen;
  if (len < kIp + 20 || wire::load16(frame + 12) != wire::kEthertypeIpv4) return 0;
  const std::size_t ihl = static_cast<std::size_t>(frame[kIp] & 0x0F) * 4;
  if (frame[kIp + 9] != 6 || len < kIp + ihl + 4) return 0;
  return wire::load16(frame + kIp + ihl + 2);
}

bool is_tcp_rst(const std::uint8_t* frame, std::uint32_t len) {
  constexpr std::size_t kIp = wire::kEthernetLen;
  if (len < kIp + 20 || wire::load16(frame + 12) != wire::kEthertypeIpv4) return false;
  const std::size_t ihl = static_cast<std::size_t>(frame[kIp] & 0x0F) * 4;
  if (frame[kIp + 9] != 6 || len < kIp + ihl + 20) return false;
  return (frame[kIp + ihl + 13] & wire::kTcpRst) != 0;
}

}  // namespace softrdma::lwtcp
