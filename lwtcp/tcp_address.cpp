#include "lwtcp/tcp_address.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstring>

namespace softrdma::lwtcp {

std::optional<TcpAddress> from_sockaddr(const sockaddr* a, bool v4) {
  TcpAddress out;
  if (a->sa_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(a);
    out.port = ntohs(in->sin_port);
    out.wildcard = in->sin_addr.s_addr == INADDR_ANY;
    if (out.wildcard) return out;
    if (!v4) return std::nullopt;
    out.addr = netdev::IpAddr::v4(ntohl(in->sin_addr.s_addr));
    return out;
  }
  if (a->sa_family != AF_INET6) return std::nullopt;
  const auto* in6 = reinterpret_cast<const sockaddr_in6*>(a);
  out.port = ntohs(in6->sin6_port);
  out.wildcard = IN6_IS_ADDR_UNSPECIFIED(&in6->sin6_addr);
  if (out.wildcard) return out;
  std::memcpy(out.addr.bytes.data(), in6->sin6_addr.s6_addr, 16);
  if (out.addr.is_v4() != v4) return std::nullopt;
  return out;
}

sockaddr_storage to_sockaddr(const netdev::IpAddr& a, std::uint16_t port) {
  sockaddr_storage ss{};
  if (a.is_v4()) {
    auto& in = reinterpret_cast<sockaddr_in&>(ss);
    in.sin_family = AF_INET;
    in.sin_addr.s_addr = htonl(a.v4_host());
    in.sin_port = htons(port);
  } else {
    auto& in6 = reinterpret_cast<sockaddr_in6&>(ss);
    in6.sin6_family = AF_INET6;
    std::memcpy(in6.sin6_addr.s6_addr, a.bytes.data(), 16);
    in6.sin6_port = htons(port);
  }
  return ss;
}

}  // namespace softrdma::lwtcp
