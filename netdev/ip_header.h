// The IP header in front of a packet's UDP datagram, as a raw backend sends it and a trace
// records it: one builder for both.
#pragma once

#include <cstdint>

#include "netdev/netdev.h"
#include "wire/bytes.h"

namespace softrdma::netdev {

// Writes the IPv4 or IPv6 header (by the family of `src`) of a UDP datagram carrying p.len
// bytes from `src` to p.dst: p's traffic class, `hop_limit`, and for IPv4 p's ID and DF bit.
// Its length, or kNoRoom.
wire::Expected<std::size_t> build_ip_header(wire::MutBytes out, const Packet& p, const IpAddr& src,
                                            std::uint8_t hop_limit);

}  // namespace softrdma::netdev
