// Builds a whole RoCEv2 frame (optional Ethernet, IPv4 or IPv6, UDP, transport
// headers, payload, pad, ICRC) as a real NIC would put it on the wire, and checks
// the ICRC of a parsed frame.
#pragma once

#include <cstdint>
#include <optional>

#include "wire/frame.h"
#include "wire/roce_headers.h"

namespace softrdma::wire {

struct RoceAddr {
  bool ipv6 = false;
  std::uint32_t src4 = 0, dst4 = 0;  // host order
  Ipv6Addr src6{}, dst6{};
  std::uint16_t src_port = 0xC000;  // per-QP entropy port (49152–65535)
  std::uint16_t dst_port = kRoceV2Port;
  std::uint8_t traffic_class = 0;  // IPv4 TOS / IPv6 traffic class
  std::uint8_t hop_limit = 64;     // IPv4 TTL / IPv6 hop limit
  std::uint16_t ip_id = 0;
  std::uint32_t flow_label = 0;
  bool udp_checksum = false;    // RoCEv2 normally sends 0
  std::optional<Ethernet> eth;  // written first when set; its ethertype is filled in
};

// The UDP source port rxe derives from a QPN: 0xC000 | (hash & 0x3FFF).
std::uint16_t roce_src_port(std::uint32_t qpn);

Expected<std::size_t> build_roce_frame(MutBytes out, const RoceAddr& addr, const RoceHeaders& h,
                                       Bytes payload);

// The ICRC that the packet in `frame` (a parsed frame whose payload is a RoCEv2
// datagram) should carry. kTruncated when the datagram is too short.
Expected<std::uint32_t> expected_icrc(const FrameView& frame);

}  // namespace softrdma::wire
