// An IpAddr and port as a socket address and back: sockaddr_in for IPv4, sockaddr_in6 otherwise
// (an IPv4-mapped AF_INET6 address reads as IPv4, as IpAddr holds IPv4).
#pragma once

#include <sys/socket.h>

#include <cstdint>

#include "netdev/netdev.h"

namespace softrdma::netdev {

// `a`:`port` into `ss`, an IPv6 link-local address or group with `scope_id` (the interface of
// our address); returns the address's length.
socklen_t to_sockaddr(const IpAddr& a, std::uint16_t port, std::uint32_t scope_id,
                      sockaddr_storage& ss);

// The address and port of an AF_INET or AF_INET6 `ss`; false (both untouched) for another family.
bool from_sockaddr(const sockaddr_storage& ss, IpAddr& a, std::uint16_t& port);

}  // namespace softrdma::netdev
