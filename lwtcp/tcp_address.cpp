#include "lwtcp/tcp_address.h"

#include <netinet/in.h>

#include <cstring>

#include "netdev/ip_sockaddr.h"

namespace softrdma::lwtcp {

std::optional<TcpAddress> from_sockaddr(const sockaddr* a, bool v4) {
  sockaddr_storage ss{};
  if (a->sa_family == AF_INET) {
    std::memcpy(&ss, a, sizeof(sockaddr_in));
  } else if (a->sa_family == AF_INET6) {
    std::memcpy(&ss, a, sizeof(sockaddr_in6));
  } else {
    return std::nullopt;
  }
  TcpAddress out;
  netdev::from_sockaddr(ss, out.addr, out.port);
  out.wildcard = out.addr == netdev::IpAddr{} || out.addr == netdev::IpAddr::v4(0);
  if (out.wildcard) {
    out.addr = {};
    return out;
  }
  if (out.addr.is_v4() != v4) return std::nullopt;
  return out;
}

sockaddr_storage to_sockaddr(const netdev::IpAddr& a, std::uint16_t port) {
  sockaddr_storage ss;
  netdev::to_sockaddr(a, port, 0, ss);
  return ss;
}

}  // namespace softrdma::lwtcp
