// Small helpers on the socket addresses rdma_cm takes (IPv4 and IPv6; others have length 0).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>

namespace softrdma::cm {

inline socklen_t addr_len(const sockaddr* a) {
  if (!a) return 0;
  if (a->sa_family == AF_INET) return sizeof(sockaddr_in);
  if (a->sa_family == AF_INET6) return sizeof(sockaddr_in6);
  return 0;
}

inline std::uint16_t port_of(const sockaddr* a) {
  if (a->sa_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(a)->sin_port);
  if (a->sa_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(a)->sin6_port);
  return 0;
}

inline void set_port(sockaddr* a, std::uint16_t port) {
  if (a->sa_family == AF_INET) reinterpret_cast<sockaddr_in*>(a)->sin_port = htons(port);
  if (a->sa_family == AF_INET6) reinterpret_cast<sockaddr_in6*>(a)->sin6_port = htons(port);
}

inline bool is_multicast(const sockaddr* a) {
  if (a->sa_family == AF_INET) {
    return IN_MULTICAST(ntohl(reinterpret_cast<const sockaddr_in*>(a)->sin_addr.s_addr));
  }
  if (a->sa_family == AF_INET6) {
    return IN6_IS_ADDR_MULTICAST(&reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr);
  }
  return false;
}

}  // namespace softrdma::cm
