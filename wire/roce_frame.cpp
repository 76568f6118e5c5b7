#include "wire/roce_frame.h"

#include "wire/icrc.h"

namespace softrdma::wire {

std::uint16_t roce_src_port(std::uint32_t qpn) {
  // A multiplicative hash spreads consecutive QPNs across the 14-bit range.
  const std::uint32_t h = (qpn & kQpnMask) * 0x9E3779B1u;
  return static_cast<std::uint16_t>(0xC000 | ((h >> 18) & 0x3FFF));
}

Expected<std::size_t> build_roce_frame(MutBytes out, const RoceAddr& addr, const RoceHeaders& h,
                                       Bytes payload) {
  const RoceOpcodeInfo& info = roce_opcode_info(h.bth.opcode);
  if (!info.defined()) return Error::kUnknownOpcode;
  const std::size_t roce = roce_len(info, payload.size());
  const std::size_t ip_len = addr.ipv6 ? kIpv6Len : kIpv4MinLen;
  const std::size_t l2 = addr.eth ? addr.eth->header_len() : 0;
  const std::size_t total = l2 + ip_len + kUdpLen + roce;
  if (kUdpLen + roce > 0xFFFF) return Error::kBadValue;
  if (out.size() < total) return Error::kNoRoom;
  std::size_t off = 0;
  if (addr.eth) {
    Ethernet eth = *addr.eth;
    eth.ethertype = addr.ipv6 ? kEthertypeIpv6 : kEthertypeIpv4;
    off += *build_ethernet(out, eth);
  }
  MutBytes ip = out.subspan(off, ip_len);
  const auto udp_len = static_cast<std::uint16_t>(kUdpLen + roce);
  if (addr.ipv6) {
    Ipv6 h6;
    h6.traffic_class = addr.traffic_class;
    h6.flow_label = addr.flow_label & 0xFFFFF;
    h6.payload_len = udp_len;
    h6.next_header = kIpProtoUdp;
    h6.hop_limit = addr.hop_limit;
    h6.src = addr.src6;
    h6.dst = addr.dst6;
    build_ipv6(ip, h6);
  } else {
    Ipv4 h4;
    h4.tos = addr.traffic_class;
    h4.total_len = static_cast<std::uint16_t>(kIpv4MinLen + udp_len);
    h4.id = addr.ip_id;
    h4.df = true;
    h4.ttl = addr.hop_limit;
    h4.protocol = kIpProtoUdp;
    h4.src = addr.src4;
    h4.dst = addr.dst4;
    build_ipv4(ip, h4);
  }
  off += ip_len;
  MutBytes udp = out.subspan(off, udp_len);
  build_udp(udp, Udp{addr.src_port, addr.dst_port, udp_len, 0});
  auto built = build_roce(udp.subspan(kUdpLen), h, payload);
  if (!built) return built.error();
  MutBytes body = udp.subspan(kUdpLen);
  const std::uint32_t icrc =
      compute_icrc(ip, udp.first(kUdpLen), body.first(body.size() - kIcrcLen));
  store32le(body.data() + body.size() - kIcrcLen, icrc);
  if (addr.udp_checksum) {
    std::uint16_t c = addr.ipv6 ? l4_checksum_ipv6(addr.src6, addr.dst6, kIpProtoUdp, udp)
                                : l4_checksum_ipv4(addr.src4, addr.dst4, kIpProtoUdp, udp);
    store16(udp.data() + 6, c == 0 ? 0xFFFF : c);
  }
  return total;
}

Expected<std::uint32_t> expected_icrc(const FrameView& frame) {
  if (!frame.udp || frame.payload.size() < kBthLen + kIcrcLen) return Error::kTruncated;
  Error err = Error::kNone;
  const std::uint32_t c = compute_icrc(frame.ip_header, frame.l4_segment.first(kUdpLen),
                                       frame.payload.first(frame.payload.size() - kIcrcLen), &err);
  if (err != Error::kNone) return err;
  return c;
}

}  // namespace softrdma::wire
