#include "netdev/gso_frame.h"

#include <algorithm>
#include <cstring>

#include "netdev/datagram_bounds.h"
#include "netdev/icrc_pseudo.h"
#include "wire/roce_opcode.h"

namespace softrdma::netdev {

Packet datagram_view(const wire::FrameView& v) {
  Packet view;
  view.src = v.is_ipv6 ? IpAddr::v6(v.ipv6.src) : IpAddr::v4(v.ipv4.src);
  view.dst = v.is_ipv6 ? IpAddr::v6(v.ipv6.dst) : IpAddr::v4(v.ipv4.dst);
  view.src_port = v.udp->src_port;
  view.dst_port = v.udp->dst_port;
  view.traffic_class = v.is_ipv6 ? v.ipv6.traffic_class : v.ipv4.tos;
  view.hop_limit = v.is_ipv6 ? v.ipv6.hop_limit : v.ipv4.ttl;
  view.data = const_cast<std::uint8_t*>(v.payload.data());
  view.len = view.cap = static_cast<std::uint32_t>(v.payload.size());
  return view;
}

std::uint32_t uncut_segment_size(const std::uint8_t* frame, std::uint32_t len, std::uint32_t mtu) {
  auto parsed = wire::parse_frame(wire::Bytes(frame, len), 1 /* LINKTYPE_ETHERNET */);
  if (!parsed || !parsed->udp || parsed->udp->dst_port != wire::kRoceV2Port) return 0;
  const wire::FrameView& v = *parsed;
  const Packet whole = datagram_view(v);
  if (whole.len < 2 * kMinDatagram) return 0;
  // The first segment carries the frame's IPv4 ID and flags (the others count on from it).
  const wire::Ipv4IdFlags seen{v.ipv4.id, v.ipv4.df ? wire::Ipv4IdFlags::kDf : std::uint16_t{0}};
  const auto icrc_checks = [&](std::uint32_t size) {
    Packet first = whole;
    first.len = first.cap = size;
    return check_icrc_with(first, seen);
  };
  // A datagram's length is a multiple of 4 (its headers, padded payload and ICRC are). Where the
  // next one would start: a defined opcode and the first's P_Key (one partition, any QP).
  constexpr std::uint32_t kPkeyAt = 2;
  const std::uint32_t max_len = max_datagram_for_mtu(mtu, !v.is_ipv6);
  const std::uint32_t last = std::min(max_len, whole.len - kMinDatagram);
  for (std::uint32_t size = kMinDatagram; size <= last; size += 4) {
    if (std::memcmp(whole.data + kPkeyAt, whole.data + size + kPkeyAt, 2) == 0 &&
        wire::roce_opcode_info(whole.data[size]).defined() && icrc_checks(size)) {
      return size;
    }
  }
  if (whole.len <= max_len) return 0;                                 // one datagram (or a bad one)
  for (std::uint32_t size = kMinDatagram; size <= last; size += 4) {  // too long to be one
    if (icrc_checks(size)) return size;
  }
  return 0;
}

}  // namespace softrdma::netdev
