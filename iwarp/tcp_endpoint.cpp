#include "iwarp/tcp_endpoint.h"

#include <netinet/in.h>

#include <cstring>

namespace softrdma::iwarp {

bool endpoint_of(const sockaddr_storage& ss, TcpEndpoint& out) {
  if (ss.ss_family == AF_INET) {
    const auto& a = reinterpret_cast<const sockaddr_in&>(ss);
    out.addr = ntohl(a.sin_addr.s_addr);
    out.port = ntohs(a.sin_port);
    return true;
  }
  if (ss.ss_family == AF_INET6) {
    const auto& a = reinterpret_cast<const sockaddr_in6&>(ss);
    if (!IN6_IS_ADDR_V4MAPPED(&a.sin6_addr)) return false;
    std::uint32_t v4;
    std::memcpy(&v4, &a.sin6_addr.s6_addr[12], 4);
    out.addr = ntohl(v4);
    out.port = ntohs(a.sin6_port);
    return true;
  }
  return false;
}

}  // namespace softrdma::iwarp
