#include "netdev/neighbours.h"

#include <arpa/inet.h>
#include <linux/neighbour.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
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
constexpr wire::MacAddr kBroadcast{0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};
}  // namespace

NeighbourTable::NeighbourTable(Config cfg, SendFrame send, std::atomic<std::uint64_t>& tx_dropped)
    : cfg_(std::move(cfg)), send_(std::move(send)), tx_dropped_(tx_dropped) {}

bool NeighbourTable::kernel_neighbour(std::uint32_t ip, wire::MacAddr& mac) const {
  // IP address  HW type  Flags  HW address  Mask  Device; flag 0x2 = complete.
  std::ifstream in("/proc/net/arp");
  std::string line;
  std::getline(in, line);  // the heading
  char want[INET_ADDRSTRLEN];
  const std::uint32_t be = htonl(ip);
  inet_ntop(AF_INET, &be, want, sizeof want);
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

bool NeighbourTable::lookup(std::uint32_t ip, wire::MacAddr& mac, Clock::time_point now) {
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

bool NeighbourTable::enqueue(std::uint32_t ip, std::vector<std::uint8_t> frame,
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

void NeighbourTable::ask(std::uint32_t ip) {
  if (cfg_.resolver == Resolver::kKernel) {
    kernel_resolve(ip);
  } else {
    send_arp(kArpRequest, kBroadcast, ip, wire::MacAddr{});
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
  wire::store32(a + 14, cfg_.local4);
  std::memcpy(a + 18, target_mac.data(), 6);
  wire::store32(a + 24, target_ip);
  send_(f.data(), hl + 46, false);
}

void NeighbourTable::kernel_resolve(std::uint32_t ip) {
  // RTM_NEWNEIGH with NTF_USE: the kernel creates the entry if needed and starts resolving it,
  // as if it had a packet to send; the answer lands in its table, which lookups read.
  struct {
    nlmsghdr nh;
    ndmsg nd;
    rtattr dst_attr;
    std::uint32_t dst;
  } req{};
  req.nh.nlmsg_len = sizeof req;
  req.nh.nlmsg_type = RTM_NEWNEIGH;
  req.nh.nlmsg_flags = NLM_F_REQUEST | NLM_F_CREATE;
  req.nd.ndm_family = AF_INET;
  req.nd.ndm_ifindex = cfg_.ifindex;
  req.nd.ndm_state = NUD_NONE;
  req.nd.ndm_flags = NTF_USE;
  req.dst_attr.rta_len = RTA_LENGTH(sizeof req.dst);
  req.dst_attr.rta_type = NDA_DST;
  req.dst = htonl(ip);
  const int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
  if (fd < 0) return;
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  (void)!sendto(fd, &req, sizeof req, 0, reinterpret_cast<sockaddr*>(&kernel), sizeof kernel);
  close(fd);
}

void NeighbourTable::learn(std::uint32_t ip, const wire::MacAddr& mac) {
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
  if (!eth || eth->ethertype != wire::kEthertypeArp) return;
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
  if (tpa != cfg_.local4 || spa == 0 || sha == cfg_.mac) return;
  bool known = false;
  {
    std::lock_guard lock(mu_);
    known = table_.contains(spa);
  }
  // A reply to us, or a request from a peer we talk to (or are about to), refreshes the cache.
  if (op == kArpReply || (op == kArpRequest && (known || cfg_.answer_arp))) learn(spa, sha);
  if (op == kArpRequest && cfg_.answer_arp) send_arp(kArpReply, sha, spa, sha);
}

bool NeighbourTable::resolved(std::uint32_t ip) const {
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
  std::vector<std::uint32_t> retry;
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
  for (std::uint32_t ip : retry) {
    wire::MacAddr mac;
    if (kernel_neighbour(ip, mac)) {
      learn(ip, mac);
    } else {
      ask(ip);
    }
  }
}

}  // namespace softrdma::netdev
