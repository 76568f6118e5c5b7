// The RoCEv2 invariant CRC, as real NICs compute it: CRC-32 over eight 0xFF bytes,
// the IP header with its variant fields masked to ones, the UDP header with the
// checksum masked, the BTH with byte 4 masked, then everything up to the ICRC.
#pragma once

#include <cstdint>

#include "wire/bytes.h"

namespace softrdma::wire {

// ip_header: the IPv4 header (any IHL) or the 40-byte IPv6 header; udp_header: 8 bytes;
// roce: the UDP payload without its trailing 4 ICRC bytes (starts with the BTH).
// Returns the ICRC as a number; it travels least-significant byte first.
// Returns 0 and sets *err (when given) if a span is too short.
std::uint32_t compute_icrc(Bytes ip_header, Bytes udp_header, Bytes roce, Error* err = nullptr);

// The IPv4 header's bytes 4-7 (identification, flags and fragment offset), which the ICRC
// covers but a UDP socket does not show.
struct Ipv4IdFlags {
  std::uint16_t id = 0;
  std::uint16_t flags_frag = 0;
  static constexpr std::uint16_t kDf = 0x4000;
  bool df() const { return (flags_frag & kDf) != 0; }
  // Not a fragment: no flag but DF, offset 0.
  bool unfragmented() const { return flags_frag == kDf || flags_frag == 0; }
};
// What Linux puts on an unconnected socket's DF datagrams, and softrdma's sends carry.
inline constexpr Ipv4IdFlags kLinuxIpv4IdFlags{0, Ipv4IdFlags::kDf};
// The one value of those bytes under which `icrc` is right for the rest of the datagram
// (ip_header as guessed: its bytes 4-7 are ignored; the other spans as compute_icrc). The CRC
// is linear in its input and a bijection over any 4 consecutive bytes, so exactly one value
// fits: a receiver that knows the flags (DF or none, offset 0) still checks 16 of the 32 bits.
// Returns nullopt-like {false} through `ok` when a span is too short or the header is not IPv4.
Ipv4IdFlags icrc_solve_ipv4_id(Bytes ip_header, Bytes udp_header, Bytes roce, std::uint32_t icrc,
                               bool* ok = nullptr);

}  // namespace softrdma::wire
