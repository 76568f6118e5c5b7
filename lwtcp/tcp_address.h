// The CM's socket addresses as the userspace TCP takes them: one address, IPv4 or IPv6, and
// either family's form of it (programs that resolve with AF_INET6 hand IPv4 in IPv4-mapped).
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <optional>

#include "netdev/netdev.h"

namespace softrdma::lwtcp {

struct TcpAddress {
  netdev::IpAddr addr;  // the wildcard: all zero
  std::uint16_t port = 0;
  bool wildcard = false;
};

// `a` for a stack of family `v4` (else IPv6): AF_INET or an IPv4-mapped AF_INET6 address for an
// IPv4 stack, a native AF_INET6 one for an IPv6 stack, either family's wildcard for both;
// nullopt for any other.
std::optional<TcpAddress> from_sockaddr(const sockaddr* a, bool v4);

// `a`:`port` as sockaddr_in (IPv4) or sockaddr_in6.
sockaddr_storage to_sockaddr(const netdev::IpAddr& a, std::uint16_t port);

}  // namespace softrdma::lwtcp
