// Fills and checks the ICRC of a Packet carried in a UDP datagram, over the IP/UDP headers
// Linux puts on the wire for it (IPv4: ID 0, DF set; IPv6: next header UDP; variant fields masked).
#pragma once

#include <cstdint>

#include "netdev/netdev.h"

namespace softrdma::netdev {

// The ICRC of `len` bytes at `data` (BTH … pad, then the 4 ICRC bytes, which are not read),
// carried from src:sport to dst:dport. IPv4 when src is IPv4-mapped, IPv6 otherwise.
// Returns false when the datagram is shorter than BTH + ICRC.
bool compute_packet_icrc(const IpAddr& src, const IpAddr& dst, std::uint16_t sport,
                         std::uint16_t dport, const std::uint8_t* data, std::uint32_t len,
                         std::uint32_t& icrc);

// Stores the ICRC of `p` (from its addressing) into its last 4 bytes; false if too short.
bool fill_icrc(const Packet& p);
// True when the last 4 bytes of `p` hold the ICRC its addressing and content call for.
bool check_icrc(const Packet& p);

}  // namespace softrdma::netdev
