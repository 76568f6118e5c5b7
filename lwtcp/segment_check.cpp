#include "lwtcp/segment_check.h"

#include <array>
#include <cstring>

#include "wire/bytes.h"
#include "wire/inet_sum.h"
#include "wire/net.h"

namespace softrdma::lwtcp {

namespace {

constexpr std::size_t kIp = wire::kEthernetLen;
constexpr std::uint8_t kProtoTcp = 6;

SegmentKind kind_of(const wire::Tcp& tcp) {
  if (tcp.flags & wire::kTcpRst) return SegmentKind::kTcpRst;
  if ((tcp.flags & (wire::kTcpSyn | wire::kTcpAck)) == wire::kTcpSyn) return SegmentKind::kTcpSyn;
  return SegmentKind::kTcp;
}

SegmentKind classify_ipv4(const wire::Bytes packet, bool checksum_good) {
  const auto ip = wire::parse_ipv4(packet);
  if (!ip || wire::ipv4_header_checksum(packet.first(ip->ihl_bytes)) != 0) {
    return SegmentKind::kMalformed;
  }
  if (ip->protocol != kProtoTcp) return SegmentKind::kOther;
  if (ip->mf || ip->frag_offset != 0) return SegmentKind::kOther;  // lwIP reassembles first
  const wire::Bytes segment = packet.subspan(ip->ihl_bytes, ip->total_len - ip->ihl_bytes);
  const auto tcp = wire::parse_tcp(segment);
  if (!tcp ||
      (!checksum_good && wire::l4_checksum_ipv4(ip->src, ip->dst, kProtoTcp, segment) != 0)) {
    return SegmentKind::kMalformed;
  }
  return kind_of(*tcp);
}

SegmentKind classify_ipv6(const wire::Bytes packet, bool checksum_good) {
  const auto ip = wire::parse_ipv6(packet);
  if (!ip) return SegmentKind::kMalformed;
  if (ip->next_header != kProtoTcp) return SegmentKind::kOther;  // ND, extension headers: lwIP's
  const wire::Bytes segment = packet.subspan(wire::kIpv6Len, ip->payload_len);
  const auto tcp = wire::parse_tcp(segment);
  if (!tcp ||
      (!checksum_good && wire::l4_checksum_ipv6(ip->src, ip->dst, kProtoTcp, segment) != 0)) {
    return SegmentKind::kMalformed;
  }
  return kind_of(*tcp);
}

}  // namespace

SegmentKind classify(const std::uint8_t* frame, std::uint32_t len, bool checksum_good) {
  if (len < kIp) return SegmentKind::kOther;
  const wire::Bytes packet(frame + kIp, len - kIp);
  switch (wire::load16(frame + 12)) {
    case wire::kEthertypeIpv4:
      return classify_ipv4(packet, checksum_good);
    case wire::kEthertypeIpv6:
      return classify_ipv6(packet, checksum_good);
    default:
      return SegmentKind::kOther;
  }
}

TcpPseudo tcp_pseudo(const std::uint8_t* frame, std::size_t tcp) {
  // Addresses, zero, protocol and the segment's length, as the checksum sums them (RFC 9293
  // 3.1, RFC 8200 8.1); summed in one pass from a copy.
  std::array<std::uint8_t, 36> b{};
  TcpPseudo out;
  std::size_t n = 0;
  if (wire::load16(frame + 12) == wire::kEthertypeIpv4) {
    out.segment_len = wire::load16(frame + kIp + 2) - static_cast<std::uint32_t>(tcp - kIp);
    std::memcpy(b.data(), frame + kIp + 12, 8);
    n = 8;
  } else {
    out.segment_len = wire::load16(frame + kIp + 4);
    std::memcpy(b.data(), frame + kIp + 8, 32);
    n = 32;
  }
  b[n + 1] = kProtoTcp;
  wire::store16(b.data() + n + 2, static_cast<std::uint16_t>(out.segment_len));
  out.sum = wire::ones_sum_host(b.data(), n + 4);
  return out;
}

std::size_t tcp_header_at(const std::uint8_t* frame, std::uint32_t len) {
  if (len < kIp + wire::kIpv4MinLen) return 0;
  std::size_t at = 0;
  switch (wire::load16(frame + 12)) {
    case wire::kEthertypeIpv4: {
      const std::size_t ihl = static_cast<std::size_t>(frame[kIp] & 0x0F) * 4;
      const bool fragment = (wire::load16(frame + kIp + 6) & 0x3FFF) != 0;
      if (ihl < wire::kIpv4MinLen || frame[kIp + 9] != kProtoTcp || fragment) return 0;
      at = kIp + ihl;
      break;
    }
    case wire::kEthertypeIpv6:
      if (len < kIp + wire::kIpv6Len || frame[kIp + 6] != kProtoTcp) return 0;
      at = kIp + wire::kIpv6Len;
      break;
    default:
      return 0;
  }
  return len >= at + wire::kTcpMinLen ? at : 0;
}

PeerKey peer_key(const std::uint8_t* frame, std::size_t tcp, bool sent) {
  PeerKey k;
  const std::uint16_t src_port = wire::load16(frame + tcp),
                      dst_port = wire::load16(frame + tcp + 2);
  k.peer_port = sent ? dst_port : src_port;
  k.port = sent ? src_port : dst_port;
  if (wire::load16(frame + 12) == wire::kEthertypeIpv4) {
    k.peer = netdev::IpAddr::v4(wire::load32(frame + kIp + (sent ? 16 : 12)));
  } else {
    std::memcpy(k.peer.bytes.data(), frame + kIp + (sent ? 24 : 8), 16);
  }
  return k;
}

std::uint16_t tcp_dst_port(const std::uint8_t* frame, std::uint32_t len) {
  const std::size_t at = tcp_header_at(frame, len);
  return at ? wire::load16(frame + at + 2) : 0;
}

std::size_t syn_option_at(const std::uint8_t* frame, std::uint32_t len, std::uint8_t kind,
                          std::uint8_t optlen) {
  constexpr std::uint8_t kOptEnd = 0, kOptNop = 1;
  const std::size_t l4 = tcp_header_at(frame, len);
  if (l4 == 0) return 0;
  const std::uint8_t* tcp = frame + l4;
  const std::size_t doff = static_cast<std::size_t>(tcp[12] >> 4) * 4;
  if ((tcp[13] & wire::kTcpSyn) == 0 || doff < wire::kTcpMinLen || len < l4 + doff) return 0;
  for (std::size_t at = wire::kTcpMinLen; at < doff;) {
    const std::uint8_t k = tcp[at];
    if (k == kOptEnd) return 0;
    if (k == kOptNop) {
      ++at;
      continue;
    }
    if (at + 1 >= doff || tcp[at + 1] < 2 || at + tcp[at + 1] > doff) return 0;
    if (k == kind && tcp[at + 1] == optlen) return l4 + at;
    at += tcp[at + 1];
  }
  return 0;
}

void set_tcp_byte(std::uint8_t* frame, std::size_t tcp, std::size_t at, std::uint8_t v) {
  if (frame[at] == v) return;
  // HC' = ~(~HC + ~m + m') over the 16-bit word of the segment that holds the byte.
  const std::size_t word = tcp + ((at - tcp) & ~std::size_t{1});
  const std::uint32_t old_word = wire::load16(frame + word);
  frame[at] = v;
  const std::uint32_t new_word = wire::load16(frame + word);
  std::uint32_t sum =
      (~wire::load16(frame + tcp + 16) & 0xFFFFu) + (~old_word & 0xFFFFu) + new_word;
  sum = (sum & 0xFFFF) + (sum >> 16);
  sum = (sum & 0xFFFF) + (sum >> 16);
  wire::store16(frame + tcp + 16, static_cast<std::uint16_t>(~sum & 0xFFFF));
}

bool is_tcp_rst(const std::uint8_t* frame, std::uint32_t len) {
  const std::size_t at = tcp_header_at(frame, len);
  return at && (frame[at + 13] & wire::kTcpRst) != 0;
}

}  // namespace softrdma::lwtcp
