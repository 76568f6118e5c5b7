#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>

#include <cstring>

#include "netdev/netdev.h"

namespace softrdma::netdev {

namespace {
constexpr std::array<std::uint8_t, 12> kV4MappedPrefix = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF};
}  // namespace

void Netdev::hand_over(const Packet& view, Packet& out) {
  std::uint8_t* buf = out.data;
  const std::uint32_t cap = out.cap;
  std::memcpy(buf, view.data, view.len);
  out = view;
  out.data = buf;
  out.cap = cap;
  bump(counters_.rx_packets);
  bump(counters_.rx_bytes, view.len);
}

IpAddr IpAddr::v4(std::uint32_t host_order) {
  IpAddr a;
  std::memcpy(a.bytes.data(), kV4MappedPrefix.data(), kV4MappedPrefix.size());
  a.bytes[12] = static_cast<std::uint8_t>(host_order >> 24);
  a.bytes[13] = static_cast<std::uint8_t>(host_order >> 16);
  a.bytes[14] = static_cast<std::uint8_t>(host_order >> 8);
  a.bytes[15] = static_cast<std::uint8_t>(host_order);
  return a;
}

bool IpAddr::parse(const std::string& s, IpAddr& out) {
  in_addr a4{};
  if (inet_pton(AF_INET, s.c_str(), &a4) == 1) {
    out = v4(ntohl(a4.s_addr));
    return true;
  }
  in6_addr a6{};
  if (inet_pton(AF_INET6, s.c_str(), &a6) == 1) {
    std::memcpy(out.bytes.data(), a6.s6_addr, 16);
    return true;
  }
  return false;
}

bool IpAddr::is_v4() const {
  return std::memcmp(bytes.data(), kV4MappedPrefix.data(), kV4MappedPrefix.size()) == 0;
}

std::uint32_t IpAddr::v4_host() const {
  return static_cast<std::uint32_t>(bytes[12]) << 24 | static_cast<std::uint32_t>(bytes[13]) << 16 |
         static_cast<std::uint32_t>(bytes[14]) << 8 | bytes[15];
}

std::string IpAddr::str() const {
  char buf[INET6_ADDRSTRLEN] = {};
  if (is_v4()) {
    in_addr a4{};
    a4.s_addr = htonl(v4_host());
    inet_ntop(AF_INET, &a4, buf, sizeof buf);
  } else {
    in6_addr a6{};
    std::memcpy(a6.s6_addr, bytes.data(), 16);
    inet_ntop(AF_INET6, &a6, buf, sizeof buf);
  }
  return buf;
}

Counters AtomicCounters::snapshot() const {
  constexpr auto r = std::memory_order_relaxed;
  Counters c;
  c.tx_packets = tx_packets.load(r);
  c.tx_bytes = tx_bytes.load(r);
  c.rx_packets = rx_packets.load(r);
  c.rx_bytes = rx_bytes.load(r);
  c.rx_icrc_errors = rx_icrc_errors.load(r);
  c.rx_malformed = rx_malformed.load(r);
  c.rx_not_ours = rx_not_ours.load(r);
  c.tx_errors = tx_errors.load(r);
  c.tx_dropped = tx_dropped.load(r);
  c.tx_held = tx_held.load(r);
  c.rx_dropped = rx_dropped.load(r);
  c.rx_gso_frames = rx_gso_frames.load(r);
  c.fault_dropped = fault_dropped.load(r);
  c.fault_duplicated = fault_duplicated.load(r);
  c.fault_reordered = fault_reordered.load(r);
  c.fault_corrupted = fault_corrupted.load(r);
  c.fault_delayed = fault_delayed.load(r);
  return c;
}

std::string interface_of(const IpAddr& a) {
  const IpAddr loopback6 = IpAddr::v6({0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1});
  if ((a.is_v4() && (a.v4_host() >> 24) == 127) || a == loopback6) return "lo";
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return "";
  std::string name;
  for (const ifaddrs* i = list; i && name.empty(); i = i->ifa_next) {
    if (!i->ifa_addr) continue;
    IpAddr have;
    if (i->ifa_addr->sa_family == AF_INET) {
      have = IpAddr::v4(ntohl(reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr));
    } else if (i->ifa_addr->sa_family == AF_INET6) {
      std::memcpy(have.bytes.data(), &reinterpret_cast<const sockaddr_in6*>(i->ifa_addr)->sin6_addr,
                  16);
    } else {
      continue;
    }
    if (have == a) name = i->ifa_name;
  }
  freeifaddrs(list);
  return name;
}

}  // namespace softrdma::netdev
