#include "netdev/icrc_pseudo.h"

#include <array>
#include <cstring>

#include "wire/icrc.h"
#include "wire/net.h"
#include "wire/roce_opcode.h"

namespace softrdma::netdev {

bool compute_packet_icrc(const IpAddr& src, const IpAddr& dst, std::uint16_t sport,
                         std::uint16_t dport, const std::uint8_t* data, std::uint32_t len,
                         std::uint32_t& icrc) {
  if (len < wire::kBthLen + wire::kIcrcLen || len > 0xFFFF - wire::kUdpLen) return false;
  const auto udp_len = static_cast<std::uint16_t>(wire::kUdpLen + len);
  std::array<std::uint8_t, wire::kIpv6Len> ip{};
  std::size_t ip_len;
  if (src.is_v4()) {
    // TOS, TTL and the checksum are masked by the ICRC; the rest is what Linux sends.
    ip_len = wire::kIpv4MinLen;
    ip[0] = 0x45;
    wire::store16(&ip[2], static_cast<std::uint16_t>(wire::kIpv4MinLen + udp_len));
    wire::store16(&ip[4], 0);       // ID 0: unconnected socket, DF set
    wire::store16(&ip[6], 0x4000);  // DF, fragment offset 0
    ip[8] = 64;
    ip[9] = wire::kIpProtoUdp;
    std::memcpy(&ip[12], &src.bytes[12], 4);
    std::memcpy(&ip[16], &dst.bytes[12], 4);
  } else {
    ip_len = wire::kIpv6Len;
    ip[0] = 0x60;  // traffic class and flow label are masked
    wire::store16(&ip[4], udp_len);
    ip[6] = wire::kIpProtoUdp;
    ip[7] = 64;
    std::memcpy(&ip[8], src.bytes.data(), 16);
    std::memcpy(&ip[24], dst.bytes.data(), 16);
  }
  std::array<std::uint8_t, wire::kUdpLen> udp{};
  wire::store16(&udp[0], sport);
  wire::store16(&udp[2], dport);
  wire::store16(&udp[4], udp_len);
  wire::Error err = wire::Error::kNone;
  icrc = wire::compute_icrc(wire::Bytes(ip.data(), ip_len), wire::Bytes(udp),
                            wire::Bytes(data, len - wire::kIcrcLen), &err);
  return err == wire::Error::kNone;
}

bool fill_icrc(const Packet& p) {
  std::uint32_t icrc = 0;
  if (!p.data || !compute_packet_icrc(p.src, p.dst, p.src_port, p.dst_port, p.data, p.len, icrc)) {
    return false;
  }
  wire::store32le(p.data + p.len - wire::kIcrcLen, icrc);
  return true;
}

bool check_icrc(const Packet& p) {
  std::uint32_t icrc = 0;
  if (!p.data || !compute_packet_icrc(p.src, p.dst, p.src_port, p.dst_port, p.data, p.len, icrc)) {
    return false;
  }
  return wire::load32le(p.data + p.len - wire::kIcrcLen) == icrc;
}

}  // namespace softrdma::netdev
