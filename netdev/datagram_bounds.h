// The sizes of datagram a backend sends and hands out: BTH and ICRC at the least; on send, no
// more than the link's MTU leaves after the IP and UDP headers; on receive, no more than the
// caller's buffer holds.
#pragma once

#include <cstdint>

#include "netdev/netdev.h"
#include "wire/net.h"
#include "wire/roce_opcode.h"

namespace softrdma::netdev {

inline constexpr auto kMinDatagram = static_cast<std::uint32_t>(wire::kBthLen + wire::kIcrcLen);

// The largest datagram an IPv4 (`v4`) or IPv6 packet of `mtu` bytes carries; 0 for an MTU too
// small for the headers.
inline std::uint32_t max_datagram_for_mtu(std::uint32_t mtu, bool v4) {
  const auto ip_udp =
      static_cast<std::uint32_t>((v4 ? wire::kIpv4MinLen : wire::kIpv6Len) + wire::kUdpLen);
  return mtu > ip_udp ? mtu - ip_udp : 0;
}

// A packet the caller passed to send_batch that a backend takes (it stops at the first other).
inline bool sendable(const Packet& p, std::uint32_t max_len) {
  return p.data && p.len >= kMinDatagram && p.len <= max_len;
}

// A received datagram `view` that fits into the caller's `out`; any other is malformed.
inline bool fits(const Packet& view, const Packet& out) {
  return view.len >= kMinDatagram && view.len <= out.cap && out.data;
}

}  // namespace softrdma::netdev
