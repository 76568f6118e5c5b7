// What a frame is to the userspace TCP's counters (lwtcp/lwip_stack.cpp): a TCP segment (a
// connection request, SYN without ACK; a RST; another), a malformed one (bad IPv4 or TCP header,
// lengths that do not fit the frame, a bad checksum: dropped and counted before lwIP sees it), or
// something else (ARP, neighbour discovery, a fragment, IPv6 with extension headers).
#pragma once

#include <cstddef>
#include <cstdint>

#include "netdev/netdev.h"

namespace softrdma::lwtcp {

// A connection by its peer's address and port and its own port.
struct PeerKey {
  netdev::IpAddr peer;
  std::uint16_t peer_port = 0, port = 0;
  auto operator<=>(const PeerKey&) const = default;
};

enum class SegmentKind : std::uint8_t { kOther, kTcp, kTcpSyn, kTcpRst, kMalformed };

// `checksum_good`: the port completed the TCP checksum (FramePort::FrameSink), which is then not
// summed again.
SegmentKind classify(const std::uint8_t* frame, std::uint32_t len, bool checksum_good = false);

// Where the TCP header of an untagged frame starts (a whole 20-byte header in the frame): after
// IPv4 (not a fragment) or after IPv6 (TCP its first next header). 0 for any other frame.
// Headers only, no checksums (classify() checks those).
std::size_t tcp_header_at(const std::uint8_t* frame, std::uint32_t len);

// The TCP segment of a frame classify() found TCP (any kind but kOther and kMalformed): its
// length, and the one's-complement sum of its pseudo-header as wire::ones_sum_host reads bytes
// (host order), which is how lwIP adds it. tcp_header_at() says where the segment starts.
struct TcpPseudo {
  std::uint32_t segment_len = 0;
  std::uint16_t sum = 0;
};
TcpPseudo tcp_pseudo(const std::uint8_t* frame, std::size_t tcp);

// The connection of a frame whose TCP header tcp_header_at() found at `tcp`: its peer is the
// destination of a frame we send (`sent`), the source of one we receive.
PeerKey peer_key(const std::uint8_t* frame, std::size_t tcp, bool sent);

// The destination port of a frame tcp_header_at() finds a TCP header in (0 for any other).
std::uint16_t tcp_dst_port(const std::uint8_t* frame, std::uint32_t len);

// Where option `kind` of `optlen` bytes starts in a TCP SYN or SYN-ACK frame that
// tcp_header_at() finds a header in (its offset in the frame); 0 when it has none. Options are
// walked as RFC 9293 lays them out: a malformed list has none.
std::size_t syn_option_at(const std::uint8_t* frame, std::uint32_t len, std::uint8_t kind,
                          std::uint8_t optlen);

// Sets byte `at` of a frame, inside the TCP segment whose header starts at `tcp`, to `v`, the
// segment's checksum updated to match (RFC 1624).
void set_tcp_byte(std::uint8_t* frame, std::size_t tcp, std::size_t at, std::uint8_t v);

// Whether a frame lwIP sends is a TCP reset: its headers only, no checksum (lwIP's own frames
// are well formed; classify() is for what arrives).
bool is_tcp_rst(const std::uint8_t* frame, std::uint32_t len);

}  // namespace softrdma::lwtcp
