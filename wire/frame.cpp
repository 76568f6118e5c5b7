#include "wire/frame.h"

namespace softrdma::wire {

bool link_type_supported(int linktype) {
  switch (static_cast<LinkType>(linktype)) {
    case LinkType::kEthernet:
    case LinkType::kRaw:
    case LinkType::kLinuxSll:
    case LinkType::kLinuxSll2:
      return true;
  }
  return false;
}

namespace {

// Returns the ethertype and the offset of the network header.
Expected<std::size_t> link_header(Bytes frame, int linktype, FrameView& v,
                                  std::uint16_t& ethertype) {
  switch (static_cast<LinkType>(linktype)) {
    case LinkType::kEthernet: {
      auto eth = parse_ethernet(frame);
      if (!eth) return eth.error();
      v.eth = *eth;
      ethertype = eth->ethertype;
      return eth->header_len();
    }
    case LinkType::kLinuxSll:
      if (frame.size() < 16) return Error::kTruncated;
      ethertype = load16(frame.data() + 14);
      return std::size_t{16};
    case LinkType::kLinuxSll2:
      if (frame.size() < 20) return Error::kTruncated;
      ethertype = load16(frame.data());
      return std::size_t{20};
    case LinkType::kRaw:
      if (frame.empty()) return Error::kTruncated;
      ethertype = (frame[0] >> 4) == 6 ? kEthertypeIpv6 : kEthertypeIpv4;
      return std::size_t{0};
  }
  return Error::kNotRoce;
}

}  // namespace

Expected<FrameView> parse_frame(Bytes frame, int linktype) {
  FrameView v;
  std::uint16_t ethertype = 0;
  auto off = link_header(frame, linktype, v, ethertype);
  if (!off) return off.error();
  Bytes net = frame.subspan(*off);
  if (ethertype == kEthertypeIpv4) {
    auto ip = parse_ipv4(net);
    if (!ip) return ip.error();
    v.ipv4 = *ip;
    v.ip_header = net.first(ip->ihl_bytes);
    v.l4_proto = ip->protocol;
    if (ip->mf || ip->frag_offset) return Error::kNotRoce;  // fragments are not reassembled
    v.l4_segment = net.subspan(ip->ihl_bytes, ip->total_len - ip->ihl_bytes);
  } else if (ethertype == kEthertypeIpv6) {
    auto ip = parse_ipv6(net);
    if (!ip) return ip.error();
    v.is_ipv6 = true;
    v.ipv6 = *ip;
    v.ip_header = net.first(kIpv6Len);
    v.l4_proto = ip->next_header;
    v.l4_segment = net.subspan(kIpv6Len, ip->payload_len);
  } else {
    return Error::kNotRoce;
  }
  if (v.l4_proto == kIpProtoUdp) {
    auto udp = parse_udp(v.l4_segment);
    if (!udp) return udp.error();
    v.udp = *udp;
    v.payload = v.l4_segment.subspan(kUdpLen, udp->length - kUdpLen);
  } else if (v.l4_proto == kIpProtoTcp) {
    auto tcp = parse_tcp(v.l4_segment);
    if (!tcp) return tcp.error();
    v.tcp = *tcp;
    v.payload = v.l4_segment.subspan(tcp->header_len);
  } else {
    return Error::kNotRoce;
  }
  return v;
}

}  // namespace softrdma::wire
