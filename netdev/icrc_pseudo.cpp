#include "netdev/icrc_pseudo.h"

#include <array>
#include <cstring>

#include "wire/icrc.h"
#include "wire/net.h"
#include "wire/roce_opcode.h"

namespace softrdma::netdev {

namespace {

// The IP and UDP headers Linux puts on the wire for a datagram (IPv4: ID 0, DF set; variant
// fields as the ICRC masks them anyway).
struct PseudoHeaders {
  std::array<std::uint8_t, wire::kIpv6Len> ip{};
  std::size_t ip_len = 0;
  std::array<std::uint8_t, wire::kUdpLen> udp{};

  bool build(const IpAddr& src, const IpAddr& dst, std::uint16_t sport, std::uint16_t dport,
             std::uint32_t len) {
    if (len < wire::kBthLen + wire::kIcrcLen || len > 0xFFFF - wire::kUdpLen) return false;
    const auto udp_len = static_cast<std::uint16_t>(wire::kUdpLen + len);
    if (src.is_v4()) {
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
    wire::store16(&udp[0], sport);
    wire::store16(&udp[2], dport);
    wire::store16(&udp[4], udp_len);
    return true;
  }
  wire::Bytes ip_bytes() const { return wire::Bytes(ip.data(), ip_len); }
  wire::Bytes udp_bytes() const { return wire::Bytes(udp); }
};

}  // namespace

bool compute_packet_icrc(const IpAddr& src, const IpAddr& dst, std::uint16_t sport,
                         std::uint16_t dport, const std::uint8_t* data, std::uint32_t len,
                         std::uint32_t& icrc) {
  PseudoHeaders h;
  if (!h.build(src, dst, sport, dport, len)) return false;
  wire::Error err = wire::Error::kNone;
  icrc = wire::compute_icrc(h.ip_bytes(), h.udp_bytes(), wire::Bytes(data, len - wire::kIcrcLen),
                            &err);
  return err == wire::Error::kNone;
}

namespace {

// The ICRC `p` should carry under these IPv4 ID and flags (ignored for IPv6).
bool icrc_for(const Packet& p, const wire::Ipv4IdFlags& id_flags, std::uint32_t& icrc) {
  PseudoHeaders h;
  if (!p.data || !h.build(p.src, p.dst, p.src_port, p.dst_port, p.len)) return false;
  if (p.src.is_v4()) {
    wire::store16(&h.ip[4], id_flags.id);
    wire::store16(&h.ip[6], id_flags.flags_frag);
  }
  wire::Error err = wire::Error::kNone;
  icrc = wire::compute_icrc(h.ip_bytes(), h.udp_bytes(),
                            wire::Bytes(p.data, p.len - wire::kIcrcLen), &err);
  return err == wire::Error::kNone;
}

}  // namespace

bool fill_icrc(const Packet& p) {
  const wire::Ipv4IdFlags as_sent{p.ipv4_id, p.ipv4_df ? wire::Ipv4IdFlags::kDf : std::uint16_t{0}};
  std::uint32_t icrc = 0;
  if (!icrc_for(p, as_sent, icrc)) return false;
  wire::store32le(p.data + p.len - wire::kIcrcLen, icrc);
  return true;
}

bool check_icrc_with(const Packet& p, const wire::Ipv4IdFlags& seen) {
  std::uint32_t want = 0;
  return icrc_for(p, seen, want) && wire::load32le(p.data + p.len - wire::kIcrcLen) == want;
}

bool solve_icrc_ipv4(const Packet& p, wire::Ipv4IdFlags& seen) {
  PseudoHeaders h;
  if (!p.data || !p.src.is_v4() || !h.build(p.src, p.dst, p.src_port, p.dst_port, p.len)) {
    return false;
  }
  bool ok = false;
  const wire::Ipv4IdFlags f = wire::icrc_solve_ipv4_id(
      h.ip_bytes(), h.udp_bytes(), wire::Bytes(p.data, p.len - wire::kIcrcLen),
      wire::load32le(p.data + p.len - wire::kIcrcLen), &ok);
  if (!ok || !f.unfragmented()) return false;
  seen = f;
  return true;
}

bool check_icrc(const Packet& p, wire::Ipv4IdFlags* seen) {
  wire::Ipv4IdFlags found = wire::kLinuxIpv4IdFlags;
  // Sent with another IPv4 ID or without DF (other hosts' kernels, NICs), which the socket
  // does not show: the ICRC fits exactly one ID/flags word; it must be an unfragmented one.
  if (!check_icrc_with(p, found) && !solve_icrc_ipv4(p, found)) return false;
  if (seen) *seen = found;
  return true;
}

}  // namespace softrdma::netdev
