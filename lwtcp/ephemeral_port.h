// The local port of a connection bound to port 0, chosen here rather than by lwIP: lwIP draws
// its first port from the dynamic range (0xC000-0xFFFF) and, when that draw is 0xFFFF (one
// process in 16,384), its next port wraps to 0 and tcp_bind fails with ERR_BUF, which a program
// sees as rdma_resolve_addr failing with ENOMEM.
#pragma once

#include <cstdint>
#include <functional>

namespace softrdma::lwtcp {

inline constexpr std::uint32_t kFirstDynamicPort = 0xC000;  // RFC 6335's dynamic ports
inline constexpr std::uint32_t kDynamicPorts = 0x10000 - kFirstDynamicPort;

// Tries the dynamic ports from the one `draw` names (any number) on, wrapping at the end of the
// range, until `bind` (0, EADDRINUSE, or another errno value) takes one. Returns that port, or
// 0 with `err` set: EADDRINUSE when every port was in use, or the other error bind returned.
std::uint16_t bind_dynamic_port(std::uint32_t draw,
                                const std::function<int(std::uint16_t port)>& bind, int& err);

}  // namespace softrdma::lwtcp
