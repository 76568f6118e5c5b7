#include "netdev/neighbours.h"

#include <arpa/inet.h>
#include <linux/neighbour.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cstring>
#include <fstream>
#include <sstream>

#include "wire/bytes.h"

namespace softrdma::netdev {

namespace {
constexpr std::uint16_t kArpRequest = 1, kArpReply = 2;
constexpr std::uint8_t kIcmp6 = 58;
constexpr std::uint8_t kNeighbourSolicitation = 135, kNeighbourAdvertisement = 136;
constexpr std::uint8_t kOptSourceMac = 1, kOptTargetMac = 2;
constexpr std::size_t kNdLen = 24;  // type, code, checksum, flags/reserved, target
constexpr wire::MacAddr kBroadcast{0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};

// ff02::1:ffXX:XXXX, the solicited-node group of `a`, and its 33:33:ff:XX:XX:XX MAC.
IpAddr solicited_node(const IpAddr& a) {
  std::array<std::uint8_t, 16> g{0xFF, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0xFF};
  std::memcpy(g.data() + 13, a.bytes.data() + 13, 3);
  return IpAddr::v6(g);
}
wire::MacAddr multicast_mac6(const IpAddr& group) {
  return {0x33, 0x33, group.bytes[12], group.bytes[13], group.bytes[14], group.bytes[15]};
}

// The MAC in the first link-layer address option of `type` among the ND options at `opt`.
bool nd_option_mac(const std::uint8_t* opt, std::size_t len, std::uint8_t type,
                   wire::MacAddr& mac) {
  while (len >= 8) {
    const std::size_t n = std::size_t{opt[1]} * 8;
    if (n == 0 || n > len) return false;
    if (opt[0] == type && n >= 8) {
      std::memcpy(mac.data(), opt + 2, 6);
      return true;
    }
    opt += n;
    len -= n;
  }
  return false;
}
}  // namespace

NeighbourTable::NeighbourTable(Config cfg, SendFrame send, std::atomic<std::uint64_t>& tx_dropped)
    : cfg_(std::move(cfg)), send_(std::move(send)), tx_dropped_(tx_dropped) {}

bool NeighbourTable::kernel_neighbour(const IpAddr& ip, wire::MacAddr& mac) const {
  if (!ip.is_v4()) return kernel_neighbour6(ip, mac);
  // IP address  HW type  Flags  HW address  Mask  Device; flag 0x2 = complete.
  std::ifstream in("/proc/net/arp");
  std::string line;
  std::getline(in, line);  // the heading
  const std::string want = ip.str();
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string addr, type, flags, hw, mask, dev;
    if (!(f >> addr >> type >> flags >> hw >> mask >> dev)) continue;
    if (addr != want || dev != cfg_.ifname) continue;
    if ((std::strtoul(flags.c_str(), nullptr, 16) & 0x2) == 0) continue;
    unsigned b[6];
    if (std::sscanf(hw.c_str(), "%x:%x:%x:%x:%x:%x", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5]) !=
        6) {
      continue;
    }
    for (int k = 0; k < 6; ++k) mac[k] = static_cast<std::uint8_t>(b[k]);
    return mac != wire::MacAddr{};
  }
  return false;
}

bool NeighbourTable::kernel_neighbour6(const IpAddr& ip, wire::MacAddr& mac) const {
  // The kernel has no /proc table for IPv6 neighbours: dump them over netlink.
  const int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
  if (fd < 0) return false;
  struct {
    nlmsghdr nh;
    ndmsg nd;
  } req{};
  req.nh.nlmsg_len = sizeof req;
  req.nh.nlmsg_type = RTM_GETNEIGH;
  req.nh.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
  req.nd.ndm_family = AF_INET6;
  req.nd.ndm_ifindex = cfg_.ifindex;
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  bool found = false, done = false;
  if (sendto(fd, &req, sizeof req, 0, reinterpret_cast<sockaddr*>(&kernel), sizeof kernel) < 0) {
    done = true;
  }
  alignas(nlmsghdr) std::array<char, 16384> buf;
  constexpr std::uint16_t kUsable =
      NUD_REACHABLE | NUD_STALE | NUD_DELAY | NUD_PROBE | NUD_PERMANENT | NUD_NOARP;
  while (!done) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) break;
    const ssize_t n = recv(fd, buf.data(), buf.size(), 0);
    if (n <= 0) break;
    auto len = static_cast<std::uint32_t>(n);
    for (auto* h = reinterpret_cast<nlmsghdr*>(buf.data()); NLMSG_OK(h, len);
         h = NLMSG_NEXT(h, len)) {
      if (h->nlmsg_type == NLMSG_DONE || h->nlmsg_type == NLMSG_ERROR) {
        done = true;
        break;
      }
      if (h->nlmsg_type != RTM_NEWNEIGH || found) continue;
      const auto* nd = static_cast<const ndmsg*>(NLMSG_DATA(h));
      if (nd->ndm_ifindex != cfg_.ifindex || (nd->ndm_state & kUsable) == 0) continue;
      bool match = false, have_mac = false;
      wire::MacAddr m{};
      int alen = static_cast<int>(RTM_PAYLOAD(h));
      for (auto* a = reinterpret_cast<rtattr*>(const_cast<ndmsg*>(nd) + 1); RTA_OK(a, alen);
           a = RTA_NEXT(a, alen)) {
        if (a->rta_type == NDA_DST && RTA_PAYLOAD(a) == 16) {
          match = std::memcmp(RTA_DATA(a), ip.bytes.data(), 16) == 0;
        } else if (a->rta_type == NDA_LLADDR && RTA_PAYLOAD(a) == 6) {
          std::memcpy(m.data(), RTA_DATA(a), 6);
          have_mac = true;
        }
      }
      if (match && have_mac && m != wire::MacAddr{}) {
        mac = m;
        found = true;
      }
    }
  }
  close(fd);
  return found;
}

bool NeighbourTable::lookup(const IpAddr& ip, wire::MacAddr& mac, Clock::time_point now) {
  {
    std::lock_guard lock(mu_);
    auto it = table_.find(ip);
    if (it != table_.end() && it->second.valid && it->second.expires > now) {
      mac = it->second.mac;
      return true;
    }
    if (it != table_.end() && !it->second.valid && !it->second.queued.empty()) {
      return false;  // being resolved: asked already
    }
  }
  if (kernel_neighbour(ip, mac)) {
    std::lock_guard lock(mu_);
    Entry& e = table_[ip];
    e.mac = mac;
    e.valid = true;
    e.expires = now + kTtl;
    e.tries = 0;
    return true;
  }
  {
    std::lock_guard lock(mu_);
    Entry& e = table_[ip];
    e.valid = false;
    e.tries = 1;
    e.expires = now + cfg_.retry;
  }
  ask(ip);
  return false;
}

bool NeighbourTable::enqueue(const IpAddr& ip, std::vector<std::uint8_t> frame,
                             wire::MacAddr& mac) {
  std::lock_guard lock(mu_);
  Entry& e = table_[ip];
  if (e.valid) {
    mac = e.mac;
    return true;
  }
  if (queued_ >= kMaxQueued) {
    tx_dropped_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  e.queued.push_back(std::move(frame));
  ++queued_;
  return false;
}

void NeighbourTable::ask(const IpAddr& ip) {
  if (cfg_.resolver == Resolver::kKernel) {
    kernel_resolve(ip);
  } else if (ip.is_v4()) {
    send_arp(kArpRequest, kBroadcast, ip.v4_host(), wire::MacAddr{});
  } else {
    send_ns(ip);
  }
}

void NeighbourTable::send_arp(std::uint16_t op, const wire::MacAddr& dst_mac,
                              std::uint32_t target_ip, const wire::MacAddr& target_mac) {
  std::array<std::uint8_t, 64> f{};  // padded to the Ethernet minimum (60, or 64 when tagged)
  const wire::Ethernet eth{dst_mac, cfg_.mac, cfg_.vlan_tci, wire::kEthertypeArp};
  const std::size_t hl = eth.header_len();
  wire::build_ethernet(wire::MutBytes(f.data(), hl), eth);
  std::uint8_t* a = f.data() + hl;
  wire::store16(a, 1);  // Ethernet
  wire::store16(a + 2, wire::kEthertypeIpv4);
  a[4] = 6;
  a[5] = 4;
  wire::store16(a + 6, op);
  std::memcpy(a + 8, cfg_.mac.data(), 6);
  wire::store32(a + 14, cfg_.local.v4_host());
  std::memcpy(a + 18, target_mac.data(), 6);
  wire::store32(a + 24, target_ip);
  send_(f.data(), hl + 46, false);
}

void NeighbourTable::send_icmp6(const wire::MacAddr& dst_mac, const IpAddr& dst, std::uint8_t* icmp,
                                std::size_t len) {
  std::array<std::uint8_t, 128> f{};
  const wire::Ethernet eth{dst_mac, cfg_.mac, cfg_.vlan_tci, wire::kEthertypeIpv6};
  const std::size_t hl = eth.header_len();
  wire::build_ethernet(wire::MutBytes(f.data(), hl), eth);
  wire::Ipv6 ip;
  ip.payload_len = static_cast<std::uint16_t>(len);
  ip.next_header = kIcmp6;
  ip.hop_limit = 255;  // RFC 4861: ND messages are dropped unless 255
  ip.src = cfg_.local.bytes;
  ip.dst = dst.bytes;
  wire::build_ipv6(wire::MutBytes(f.data() + hl, wire::kIpv6Len), ip);
  wire::store16(icmp + 2, 0);
  wire::store16(icmp + 2, wire::l4_checksum_ipv6(ip.src, ip.dst, kIcmp6, wire::Bytes(icmp, len)));
  std::memcpy(f.data() + hl + wire::kIpv6Len, icmp, len);
  send_(f.data(), hl + wire::kIpv6Len + len, false);
}

void NeighbourTable::send_ns(const IpAddr& target) {
  std::array<std::uint8_t, kNdLen + 8> m{};
  m[0] = kNeighbourSolicitation;
  std::memcpy(m.data() + 8, target.bytes.data(), 16);
  m[kNdLen] = kOptSourceMac;
  m[kNdLen + 1] = 1;  // 8 bytes
  std::memcpy(m.data() + kNdLen + 2, cfg_.mac.data(), 6);
  const IpAddr group = solicited_node(target);
  send_icmp6(multicast_mac6(group), group, m.data(), m.size());
}

void NeighbourTable::send_na(const IpAddr& to, const wire::MacAddr& to_mac) {
  std::array<std::uint8_t, kNdLen + 8> m{};
  m[0] = kNeighbourAdvertisement;
  m[4] = 0x60;  // Solicited, Override
  std::memcpy(m.data() + 8, cfg_.local.bytes.data(), 16);
  m[kNdLen] = kOptTargetMac;
  m[kNdLen + 1] = 1;
  std::memcpy(m.data() + kNdLen + 2, cfg_.mac.data(), 6);
  send_icmp6(to_mac, to, m.data(), m.size());
}

void NeighbourTable::kernel_resolve(const IpAddr& ip) {
  // RTM_NEWNEIGH with NTF_USE: the kernel creates the entry if needed and starts resolving it,
  // as if it had a packet to send; the answer lands in its table, which lookups read.
  struct {
    nlmsghdr nh;
    ndmsg nd;
    rtattr dst_attr;
    std::array<std::uint8_t, 16> dst;
  } req{};
  const std::size_t alen = ip.is_v4() ? 4 : 16;
  req.nh.nlmsg_len = static_cast<std::uint32_t>(NLMSG_LENGTH(sizeof(ndmsg)) + RTA_LENGTH(alen));
  req.nh.nlmsg_type = RTM_NEWNEIGH;
  req.nh.nlmsg_flags = NLM_F_REQUEST | NLM_F_CREATE;
  req.nd.ndm_family = ip.is_v4() ? AF_INET : AF_INET6;
  req.nd.ndm_ifindex = cfg_.ifindex;
  req.nd.ndm_state = NUD_NONE;
  req.nd.ndm_flags = NTF_USE;
  req.dst_attr.rta_len = static_cast<unsigned short>(RTA_LENGTH(alen));
  req.dst_attr.rta_type = NDA_DST;
  std::memcpy(req.dst.data(), ip.bytes.data() + (16 - alen), alen);
  const int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
  if (fd < 0) return;
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  (void)!sendto(fd, &req, req.nh.nlmsg_len, 0, reinterpret_cast<sockaddr*>(&kernel), sizeof kernel);
  close(fd);
}

void NeighbourTable::learn(const IpAddr& ip, const wire::MacAddr& mac) {
  std::deque<std::vector<std::uint8_t>> ready;
  {
    std::lock_guard lock(mu_);
    Entry& e = table_[ip];
    e.mac = mac;
    e.valid = true;
    e.expires = Clock::now() + kTtl;
    e.tries = 0;
    queued_ -= e.queued.size();
    ready.swap(e.queued);
  }
  for (auto& f : ready) {
    std::memcpy(f.data(), mac.data(), 6);
    send_(f.data(), f.size(), true);
  }
}

void NeighbourTable::handle_arp(const std::uint8_t* frame, std::size_t len) {
  auto eth = wire::parse_ethernet(wire::Bytes(frame, len));
  if (!eth || eth->ethertype != wire::kEthertypeArp || !cfg_.local.is_v4()) return;
  const std::size_t hl = eth->header_len();
  if (len < hl + 28) return;
  const std::uint8_t* a = frame + hl;
  if (wire::load16(a) != 1 || wire::load16(a + 2) != wire::kEthertypeIpv4 || a[4] != 6 ||
      a[5] != 4) {
    return;
  }
  const std::uint16_t op = wire::load16(a + 6);
  wire::MacAddr sha;
  std::memcpy(sha.data(), a + 8, 6);
  const std::uint32_t spa = wire::load32(a + 14);
  const std::uint32_t tpa = wire::load32(a + 24);
  if (tpa != cfg_.local.v4_host() || spa == 0 || sha == cfg_.mac) return;
  const IpAddr sender = IpAddr::v4(spa);
  bool known = false;
  {
    std::lock_guard lock(mu_);
    known = table_.contains(sender);
  }
  // A reply to us, or a request from a peer we talk to (or are about to), refreshes the cache.
  if (op == kArpReply || (op == kArpRequest && (known || cfg_.answer_arp))) learn(sender, sha);
  if (op == kArpRequest && cfg_.answer_arp) send_arp(kArpReply, sha, spa, sha);
}

void NeighbourTable::handle_nd(const IpAddr& src, const IpAddr& dst, const std::uint8_t* icmp,
                               std::size_t len, const wire::MacAddr& eth_src) {
  (void)dst;
  if (len < kNdLen || icmp[1] != 0 || cfg_.local.is_v4() || eth_src == cfg_.mac) return;
  IpAddr target;
  std::memcpy(target.bytes.data(), icmp + 8, 16);
  wire::MacAddr mac;
  if (icmp[0] == kNeighbourSolicitation) {
    // For our address, from a sender with an address (not duplicate address detection).
    if (target != cfg_.local || src == IpAddr{}) return;
    if (!nd_option_mac(icmp + kNdLen, len - kNdLen, kOptSourceMac, mac)) mac = eth_src;
    bool known = false;
    {
      std::lock_guard lock(mu_);
      known = table_.contains(src);
    }
    if (known || cfg_.answer_arp) learn(src, mac);
    if (cfg_.answer_arp) send_na(src, mac);
  } else if (icmp[0] == kNeighbourAdvertisement) {
    if (!nd_option_mac(icmp + kNdLen, len - kNdLen, kOptTargetMac, mac)) mac = eth_src;
    bool asked = false;
    {
      std::lock_guard lock(mu_);
      asked = table_.contains(target);
    }
    if (asked) learn(target, mac);
  }
}

bool NeighbourTable::resolved(const IpAddr& ip) const {
  std::lock_guard lock(mu_);
  auto it = table_.find(ip);
  return it != table_.end() && it->second.valid && it->second.expires > Clock::now();
}

int NeighbourTable::next_timeout_ms(Clock::time_point now) const {
  int t = -1;
  std::lock_guard lock(mu_);
  for (const auto& [ip, e] : table_) {
    if (e.valid || e.queued.empty()) continue;
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(e.expires - now).count();
    const int due = static_cast<int>(std::max<long long>(0, ms) + 1);
    t = t < 0 ? due : std::min(t, due);
  }
  return t;
}

void NeighbourTable::service(Clock::time_point now) {
  std::vector<IpAddr> retry;
  {
    std::lock_guard lock(mu_);
    for (auto it = table_.begin(); it != table_.end();) {
      Entry& e = it->second;
      if (e.valid && e.expires <= now) {
        it = table_.erase(it);  // stale: resolved again on the next send
        continue;
      }
      if (!e.valid && e.expires <= now) {
        if (e.tries >= cfg_.tries) {
          tx_dropped_.fetch_add(e.queued.size(), std::memory_order_relaxed);
          queued_ -= e.queued.size();
          it = table_.erase(it);
          continue;
        }
        ++e.tries;
        e.expires = now + cfg_.retry;
        retry.push_back(it->first);
      }
      ++it;
    }
  }
  for (const IpAddr& ip : retry) {
    wire::MacAddr mac;
    if (kernel_neighbour(ip, mac)) {
      learn(ip, mac);
    } else {
      ask(ip);
    }
  }
}

}  // namespace softrdma::netdev
