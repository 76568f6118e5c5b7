// What a frame is to the userspace TCP's counters (lwtcp/lwip_stack.cpp): a TCP segment (a
// connection request, SYN without ACK; a RST; another), a malformed one (bad IPv4 or TCP header,
// lengths that do not fit the frame, a bad checksum: dropped and counted before lwIP sees it), or
// something else (ARP, a fragment).
#pragma once

#include <cstdint>

namespace softrdma::lwtcp {

enum class SegmentKind : std::uint8_t { kOther, kTcp, kTcpSyn, kTcpRst, kMalformed };

SegmentKind classify(const std::uint8_t* frame, std::uint32_t len);

// The destination port of an untagged TCP/IPv4 frame classify() took for a segment (0 for any
// other frame).
std::uint16_t tcp_dst_port(const std::uint8_t* frame, std::uint32_t len);

// Whether a frame lwIP sends is a TCP reset: its headers only, no checksum (lwIP's own frames
// are well formed; classify() is for what arrives).
bool is_tcp_rst(const std::uint8_t* frame, std::uint32_t len);

}  // namespace softrdma::lwtcp
