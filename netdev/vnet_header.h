// struct virtio_net_hdr (linux/virtio_net.h, which C++ cannot include: a member named `class`)
// as packet sockets with PACKET_VNET_HDR put it before each frame, in the host's order (little-
// endian, as x86 and arm64 are), and the values softrdma uses.
#pragma once

#include <cstdint>

namespace softrdma::netdev {

struct VnetHdr {
  std::uint8_t flags;
  std::uint8_t gso_type;
  std::uint16_t hdr_len, gso_size, csum_start, csum_offset;
};
static_assert(sizeof(VnetHdr) == 10);

inline constexpr std::uint8_t kVnetNeedsCsum = 1;  // VIRTIO_NET_HDR_F_NEEDS_CSUM
inline constexpr std::uint8_t kVnetGsoTcpv4 = 1;   // VIRTIO_NET_HDR_GSO_TCPV4
inline constexpr std::uint8_t kVnetGsoTcpv6 = 4;   // VIRTIO_NET_HDR_GSO_TCPV6
inline constexpr std::uint8_t kVnetGsoUdpL4 = 5;   // VIRTIO_NET_HDR_GSO_UDP_L4
inline constexpr std::uint8_t kVnetGsoEcn = 0x80;  // VIRTIO_NET_HDR_GSO_ECN, or'ed into gso_type

}  // namespace softrdma::netdev
