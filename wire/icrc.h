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

}  // namespace softrdma::wire
