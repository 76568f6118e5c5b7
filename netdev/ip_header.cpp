#include "netdev/ip_header.h"

#include "wire/net.h"

namespace softrdma::netdev {

wire::Expected<std::size_t> build_ip_header(wire::MutBytes out, const Packet& p, const IpAddr& src,
                                            std::uint8_t hop_limit) {
  const auto udp_len = static_cast<std::uint16_t>(wire::kUdpLen + p.len);
  if (src.is_v4()) {
    wire::Ipv4 ip;
    ip.tos = p.traffic_class;  // DSCP << 2 | ECN
    ip.total_len = static_cast<std::uint16_t>(wire::kIpv4MinLen + udp_len);
    ip.id = p.ipv4_id;
    ip.df = p.ipv4_df;
    ip.ttl = hop_limit;
    ip.protocol = wire::kIpProtoUdp;
    ip.src = src.v4_host();
    ip.dst = p.dst.v4_host();
    return wire::build_ipv4(out, ip);
  }
  wire::Ipv6 ip;
  ip.traffic_class = p.traffic_class;
  ip.payload_len = udp_len;
  ip.next_header = wire::kIpProtoUdp;
  ip.hop_limit = hop_limit;
  ip.src = src.bytes;
  ip.dst = p.dst.bytes;
  return wire::build_ipv6(out, ip);
}

}  // namespace softrdma::netdev
