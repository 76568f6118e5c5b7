#include "netdev/ip_sockaddr.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstring>

namespace softrdma::netdev {

socklen_t to_sockaddr(const IpAddr& a, std::uint16_t port, std::uint32_t scope_id,
                      sockaddr_storage& ss) {
  std::memset(&ss, 0, sizeof ss);
  if (a.is_v4()) {
    auto* s = reinterpret_cast<sockaddr_in*>(&ss);
    s->sin_family = AF_INET;
    s->sin_port = htons(port);
    s->sin_addr.s_addr = htonl(a.v4_host());
    return sizeof(sockaddr_in);
  }
  auto* s = reinterpret_cast<sockaddr_in6*>(&ss);
  s->sin6_family = AF_INET6;
  s->sin6_port = htons(port);
  std::memcpy(s->sin6_addr.s6_addr, a.bytes.data(), 16);
  if ((a.bytes[0] == 0xFE && (a.bytes[1] & 0xC0) == 0x80) || a.bytes[0] == 0xFF) {
    s->sin6_scope_id = scope_id;  // link-local, or a group: the interface of our address
  }
  return sizeof(sockaddr_in6);
}

bool from_sockaddr(const sockaddr_storage& ss, IpAddr& a, std::uint16_t& port) {
  if (ss.ss_family == AF_INET) {
    const auto* s = reinterpret_cast<const sockaddr_in*>(&ss);
    a = IpAddr::v4(ntohl(s->sin_addr.s_addr));
    port = ntohs(s->sin_port);
    return true;
  }
  if (ss.ss_family == AF_INET6) {
    const auto* s = reinterpret_cast<const sockaddr_in6*>(&ss);
    std::memcpy(a.bytes.data(), s->sin6_addr.s6_addr, 16);
    port = ntohs(s->sin6_port);
    return true;
  }
  return false;
}

}  // namespace softrdma::netdev
