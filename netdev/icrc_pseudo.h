// Fills and checks the ICRC of a Packet carried in a UDP datagram, over the IP/UDP headers
// Linux puts on the wire for it (IPv4: the packet's ID and DF; IPv6: next header UDP; variant
// fields masked).
#pragma once

#include <cstdint>

#include "netdev/netdev.h"
#include "wire/icrc.h"

namespace softrdma::netdev {

// The ICRC of `len` bytes at `data` (BTH … pad, then the 4 ICRC bytes, which are not read),
// carried from src:sport to dst:dport (IPv4: with ID 0 and DF). IPv4 when src is IPv4-mapped,
// IPv6 otherwise.
// Returns false when the datagram is shorter than BTH + ICRC.
bool compute_packet_icrc(const IpAddr& src, const IpAddr& dst, std::uint16_t sport,
                         std::uint16_t dport, const std::uint8_t* data, std::uint32_t len,
                         std::uint32_t& icrc);

// Stores the ICRC of `p` (from its addressing, and for IPv4 its ipv4_id and ipv4_df) into its
// last 4 bytes; false if too short.
bool fill_icrc(const Packet& p);
// True when the last 4 bytes of `p` hold the ICRC its addressing and content call for. A UDP
// socket does not show the IPv4 ID and flags: an IPv4 datagram passes when its ICRC is right for
// ID 0 with DF (Linux's own), or for the one ID/flags word it then fits, when that word is an
// unfragmented datagram's (DF or not, offset 0). That leaves 16 of the ICRC's 32 bits checked
// for such senders; the udp backend checks all 32 where it can read the header
// (netdev/ipv4_header_view.h; docs/backends.md, "What the ICRC check covers").
// `seen`, when given, gets the ID and DF the datagram was found to carry (ID 0 and DF when
// its ICRC is right for them).
bool check_icrc(const Packet& p, wire::Ipv4IdFlags* seen = nullptr);
// The two halves of check_icrc. check_icrc_with: the ICRC is right for these IPv4 ID and flags
// (all 32 bits checked; IPv6 has neither, and `seen` is not read). solve_icrc_ipv4: the ID and
// flags the ICRC of the IPv4 datagram `p` fits, when they are an unfragmented datagram's.
bool check_icrc_with(const Packet& p, const wire::Ipv4IdFlags& seen);
bool solve_icrc_ipv4(const Packet& p, wire::Ipv4IdFlags& seen);

}  // namespace softrdma::netdev
