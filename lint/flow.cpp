#include "lint/flow.h"

#include <arpa/inet.h>

namespace softrdma::lint {

std::string ip_string(const wire::FrameView& f, bool source) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (f.is_ipv6) {
    const auto& a = source ? f.ipv6.src : f.ipv6.dst;
    inet_ntop(AF_INET6, a.data(), buf, sizeof buf);
    return std::string("[") + buf + "]";
  }
  const std::uint32_t a = htonl(source ? f.ipv4.src : f.ipv4.dst);
  inet_ntop(AF_INET, &a, buf, sizeof buf);
  return buf;
}

std::string flow_string(const wire::FrameView& f) {
  std::uint16_t sport = 0, dport = 0;
  if (f.udp) {
    sport = f.udp->src_port;
    dport = f.udp->dst_port;
  } else if (f.tcp) {
    sport = f.tcp->src_port;
    dport = f.tcp->dst_port;
  }
  return ip_string(f, true) + ":" + std::to_string(sport) + " > " + ip_string(f, false) + ":" +
         std::to_string(dport);
}

}  // namespace softrdma::lint
