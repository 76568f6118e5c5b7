#include "netdev/af_packet.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <linux/filter.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "netdev/icrc_pseudo.h"
#include "wire/frame.h"
#include "wire/roce_frame.h"

namespace softrdma::netdev {

namespace {

constexpr std::size_t kHdrLen = wire::kEthernetLen + wire::kIpv4MinLen + wire::kUdpLen;
constexpr std::size_t kArpLen = wire::kEthernetLen + 28;
constexpr std::uint16_t kArpRequest = 1, kArpReply = 2;
constexpr std::size_t kSendChunk = 64;
constexpr int kSendWaitMs = 100;
constexpr std::uint32_t kBlockSize = 1u << 18;  // 256 KiB: holds many jumbo frames
constexpr std::uint32_t kBlockNr = 64;
constexpr std::uint32_t kFrameSize = 2048;  // only for the ring's frame count
constexpr std::uint32_t kBlockTimeoutMs = 1;
constexpr std::uint8_t kVnetGsoUdpL4 = 5;  // VIRTIO_NET_HDR_GSO_UDP_L4
constexpr std::size_t kVnetHdrLen = 10;    // struct virtio_net_hdr
constexpr std::array<std::uint8_t, kVnetHdrLen> kNoVnet{};
constexpr wire::MacAddr kBroadcast{0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};

bool setopt(int fd, int level, int name, int value) {
  return setsockopt(fd, level, name, &value, sizeof value) == 0;
}

// The classic BPF program: IPv4 UDP to `ip`:4791 (not a fragment), or ARP whose target
// protocol address is `ip`. Offsets are from the Ethernet header.
std::vector<sock_filter> make_filter(std::uint32_t ip) {
  return {
      BPF_STMT(BPF_LD | BPF_H | BPF_ABS, 12),                  // 0: ethertype
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ETH_P_ARP, 10, 0),   // 1: ARP → 12
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ETH_P_IP, 0, 12),    // 2: not IPv4 → reject
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 30),                  // 3: IPv4 destination
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ip, 0, 10),          // 4: not ours → reject
      BPF_STMT(BPF_LD | BPF_B | BPF_ABS, 23),                  // 5: protocol
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, IPPROTO_UDP, 0, 8),  // 6: not UDP → reject
      BPF_STMT(BPF_LD | BPF_H | BPF_ABS, 20),                  // 7: flags, fragment offset
      BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, 0x3FFF, 6, 0),      // 8: fragment → reject
      BPF_STMT(BPF_LDX | BPF_B | BPF_MSH, 14),                 // 9: X = IP header length
      BPF_STMT(BPF_LD | BPF_H | BPF_IND, 16),                  // 10: UDP destination port
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kRoceV2Port, 2, 3),  // 11: 4791 → accept
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 38),                  // 12: ARP target IP
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ip, 0, 1),           // 13: not ours → reject
      BPF_STMT(BPF_RET | BPF_K, 0x40000),                      // 14: accept
      BPF_STMT(BPF_RET | BPF_K, 0),                            // 15: reject
  };
}

wire::MacAddr multicast_mac(std::uint32_t group) {
  return {0x01,
          0x00,
          0x5E,
          static_cast<std::uint8_t>((group >> 16) & 0x7F),
          static_cast<std::uint8_t>(group >> 8),
          static_cast<std::uint8_t>(group)};
}

bool address_on_interface(const std::string& ifname, std::uint32_t ip) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return false;
  bool found = false;
  for (const ifaddrs* i = list; i && !found; i = i->ifa_next) {
    if (!i->ifa_name || ifname != i->ifa_name || !i->ifa_addr ||
        i->ifa_addr->sa_family != AF_INET) {
      continue;
    }
    found = ntohl(reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr) == ip;
  }
  freeifaddrs(list);
  return found;
}

}  // namespace

bool AfPacketNetdev::interface_ipv4(const std::string& ifname, IpAddr& out, std::string& error) {
  if (if_nametoindex(ifname.c_str()) == 0) {
    error = "af_packet:" + ifname + ": no such interface";
    return false;
  }
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) {
    error = "af_packet:" + ifname + ": getifaddrs: " + std::strerror(errno);
    return false;
  }
  bool found = false;
  for (const ifaddrs* i = list; i && !found; i = i->ifa_next) {
    if (i->ifa_name && ifname == i->ifa_name && i->ifa_addr && i->ifa_addr->sa_family == AF_INET) {
      out = IpAddr::v4(ntohl(reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr));
      found = true;
    }
  }
  freeifaddrs(list);
  if (!found) error = "af_packet:" + ifname + ": the interface has no IPv4 address";
  return found;
}

std::unique_ptr<AfPacketNetdev> AfPacketNetdev::open(const std::string& ifname, IpAddr local,
                                                     std::string& error, FaultConfig faults) {
  std::unique_ptr<AfPacketNetdev> d(new AfPacketNetdev());
  const std::string where = "af_packet:" + ifname;
  auto fail = [&](const std::string& what) {
    const int e = errno;
    error = where + ": " + what + std::strerror(e);
    if (e == EPERM) error += " (needs CAP_NET_RAW)";
    return nullptr;
  };
  if (ifname.empty() || ifname.size() >= IFNAMSIZ) {
    error = where + ": bad interface name";
    return nullptr;
  }
  d->ifname_ = ifname;
  d->ifindex_ = static_cast<int>(if_nametoindex(ifname.c_str()));
  if (d->ifindex_ == 0) {
    error = where + ": no such interface";
    return nullptr;
  }
  if (!local.is_v4()) {
    error = where + ": " + local.str() + ": only IPv4 addresses are supported";
    return nullptr;
  }
  d->addrs_[0] = local;
  d->local4_ = local.v4_host();
  d->answer_arp_ = !address_on_interface(ifname, d->local4_);

  // Opened with protocol 0: nothing is queued until the filter and ring are in place and bind()
  // names the protocol.
  d->fd_ = socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (d->fd_ < 0) return fail("socket: ");
  const int fd = d->fd_;
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, ifname.c_str(), IFNAMSIZ - 1);
  if (ioctl(fd, SIOCGIFHWADDR, &ifr) != 0) return fail("SIOCGIFHWADDR: ");
  if (ifr.ifr_hwaddr.sa_family != 1 /* ARPHRD_ETHER */) {
    error = where + ": not an Ethernet interface";
    return nullptr;
  }
  std::memcpy(d->mac_.data(), ifr.ifr_hwaddr.sa_data, 6);
  if (ioctl(fd, SIOCGIFMTU, &ifr) == 0 && ifr.ifr_mtu > 0) {
    d->mtu_ = static_cast<std::uint32_t>(ifr.ifr_mtu);
  }

  std::vector<sock_filter> filter = make_filter(d->local4_);
  sock_fprog prog{static_cast<unsigned short>(filter.size()), filter.data()};
  if (setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof prog) != 0) {
    return fail("SO_ATTACH_FILTER: ");
  }
  // A virtio_net_hdr before each frame tells us the segment size of a UDP GSO frame: over veth
  // a UDP socket's GSO datagrams arrive unsegmented, several RoCEv2 packets in one frame.
  d->vnet_ = setopt(fd, SOL_PACKET, PACKET_VNET_HDR, 1);
  if (!setopt(fd, SOL_PACKET, PACKET_VERSION, TPACKET_V3)) return fail("TPACKET_V3: ");
  tpacket_req3 req{};
  req.tp_block_size = kBlockSize;
  req.tp_block_nr = kBlockNr;
  req.tp_frame_size = kFrameSize;
  req.tp_frame_nr = kBlockSize / kFrameSize * kBlockNr;
  req.tp_retire_blk_tov = kBlockTimeoutMs;
  if (setsockopt(fd, SOL_PACKET, PACKET_RX_RING, &req, sizeof req) != 0) {
    return fail("PACKET_RX_RING: ");
  }
  d->block_size_ = kBlockSize;
  d->block_nr_ = kBlockNr;
  d->ring_size_ = std::size_t{kBlockSize} * kBlockNr;
  void* ring = mmap(nullptr, d->ring_size_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_LOCKED, fd, 0);
  if (ring == MAP_FAILED) {
    ring = mmap(nullptr, d->ring_size_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  }
  if (ring == MAP_FAILED) return fail("mmap: ");
  d->ring_ = static_cast<std::uint8_t*>(ring);
  if (!setopt(fd, SOL_PACKET, PACKET_QDISC_BYPASS, 1)) return fail("PACKET_QDISC_BYPASS: ");
  setopt(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, 1);  // our own sends are not copied back
  sockaddr_ll sll{};
  sll.sll_family = AF_PACKET;
  sll.sll_protocol = htons(ETH_P_ALL);
  sll.sll_ifindex = d->ifindex_;
  if (bind(fd, reinterpret_cast<sockaddr*>(&sll), sizeof sll) != 0) return fail("bind: ");

  // Hold local:4791 in the kernel's UDP stack, reading nothing.
  d->udp_fd_ = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (d->udp_fd_ < 0) return fail("UDP socket: ");
  sock_filter reject_all = BPF_STMT(BPF_RET | BPF_K, 0);
  sock_fprog reject{1, &reject_all};
  setsockopt(d->udp_fd_, SOL_SOCKET, SO_ATTACH_FILTER, &reject, sizeof reject);
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  sin.sin_port = htons(kRoceV2Port);
  sin.sin_addr.s_addr = htonl(d->local4_);
  if (bind(d->udp_fd_, reinterpret_cast<sockaddr*>(&sin), sizeof sin) != 0 &&
      errno != EADDRNOTAVAIL) {
    return fail(local.str() + ":" + std::to_string(kRoceV2Port) + ": ");
  }
  if (faults.any()) d->faults_ = std::make_unique<FaultInjector>(faults, d->counters_);
  return d;
}

AfPacketNetdev::~AfPacketNetdev() {
  if (faults_) faults_->flush([this](std::span<const Packet> p) { transmit(p); });
  if (ring_) munmap(ring_, ring_size_);
  for (int fd : {fd_, udp_fd_}) {
    if (fd >= 0) close(fd);
  }
}

void AfPacketNetdev::build_headers(const Packet& p, const wire::MacAddr& dst,
                                   std::uint8_t* hdr) const {
  wire::Ethernet eth;
  eth.dst = dst;
  eth.src = mac_;
  eth.ethertype = wire::kEthertypeIpv4;
  wire::build_ethernet(wire::MutBytes(hdr, wire::kEthernetLen), eth);
  wire::Ipv4 ip;
  ip.tos = p.traffic_class;
  ip.total_len = static_cast<std::uint16_t>(wire::kIpv4MinLen + wire::kUdpLen + p.len);
  ip.id = 0;
  ip.df = true;
  ip.ttl = p.hop_limit ? p.hop_limit : 64;
  ip.protocol = wire::kIpProtoUdp;
  ip.src = local4_;
  ip.dst = p.dst.v4_host();
  wire::build_ipv4(wire::MutBytes(hdr + wire::kEthernetLen, wire::kIpv4MinLen), ip);
  wire::Udp udp;
  udp.src_port = p.src_port;
  udp.dst_port = p.dst_port;
  udp.length = static_cast<std::uint16_t>(wire::kUdpLen + p.len);
  udp.checksum = 0;
  wire::build_udp(wire::MutBytes(hdr + wire::kEthernetLen + wire::kIpv4MinLen, wire::kUdpLen), udp);
}

std::size_t AfPacketNetdev::send_batch(std::span<Packet* const> pkts) {
  const std::uint32_t ip_udp = wire::kIpv4MinLen + wire::kUdpLen;
  const std::uint32_t max_len =
      std::min<std::uint32_t>(kMaxDatagram, mtu_ > ip_udp ? mtu_ - ip_udp : 0);
  std::size_t n = 0;
  for (Packet* p : pkts) {
    if (!p->data || p->len < wire::kBthLen + wire::kIcrcLen || p->len > max_len ||
        !p->dst.is_v4()) {
      break;
    }
    p->src = addrs_[0];
    fill_icrc(*p);
    ++n;
  }
  if (n < pkts.size()) bump(counters_.tx_errors, pkts.size() - n);
  if (n == 0) return 0;
  emit_batch(faults_.get(), pkts.first(n), [this](std::span<const Packet> p) { transmit(p); });
  return n;
}

void AfPacketNetdev::transmit(std::span<const Packet> pkts) {
  const Clock::time_point now = Clock::now();
  for (std::size_t i = 0; i < pkts.size(); i += kSendChunk) {
    const std::size_t n = std::min(kSendChunk, pkts.size() - i);
    std::array<std::array<std::uint8_t, kHdrLen>, kSendChunk> hdrs;
    std::array<iovec, 3 * kSendChunk> iov{};
    std::array<mmsghdr, kSendChunk> msgs{};
    std::array<std::size_t, kSendChunk> which{};
    std::size_t m = 0;
    for (std::size_t k = i; k < i + n; ++k) {
      const Packet& p = pkts[k];
      const std::uint32_t dst = p.dst.v4_host();
      wire::MacAddr mac;
      bool have = is_multicast(p.dst);
      if (have) {
        mac = multicast_mac(dst);
      } else {
        have = lookup(dst, mac, now);
      }
      build_headers(p, have ? mac : wire::MacAddr{}, hdrs[m].data());
      if (!have) {
        // Queue the whole frame until the neighbour answers (lookup() has asked).
        std::vector<std::uint8_t> frame(kHdrLen + p.len);
        std::memcpy(frame.data(), hdrs[m].data(), kHdrLen);
        std::memcpy(frame.data() + kHdrLen, p.data, p.len);
        std::lock_guard lock(neigh_mu_);
        Neighbour& nb = neigh_[dst];
        std::size_t queued = 0;
        for (const auto& [ip, e] : neigh_) queued += e.queued.size();
        if (nb.valid) {  // resolved meanwhile: send it below
          std::memcpy(hdrs[m].data(), nb.mac.data(), 6);
        } else if (queued >= kMaxQueued) {
          bump(counters_.tx_dropped);
          continue;
        } else {
          nb.queued.push_back(std::move(frame));
          continue;
        }
      }
      // With PACKET_VNET_HDR every send starts with a virtio_net_hdr: all zero, no offloads.
      iovec* v = &iov[3 * m];
      std::size_t nv = 0;
      if (vnet_) v[nv++] = iovec{const_cast<std::uint8_t*>(kNoVnet.data()), kVnetHdrLen};
      v[nv++] = iovec{hdrs[m].data(), kHdrLen};
      v[nv++] = iovec{p.data, p.len};
      msgs[m].msg_hdr.msg_iov = v;
      msgs[m].msg_hdr.msg_iovlen = nv;
      which[m] = k;
      ++m;
    }
    std::size_t off = 0;
    bool waited = false;
    while (off < m) {
      const int r = sendmmsg(fd_, &msgs[off], static_cast<unsigned>(m - off), 0);
      if (r > 0) {
        for (std::size_t j = off; j < off + static_cast<std::size_t>(r); ++j) {
          bump(counters_.tx_packets);
          bump(counters_.tx_bytes, pkts[which[j]].len);
        }
        off += static_cast<std::size_t>(r);
        waited = false;
        continue;
      }
      if (errno == EINTR) continue;
      if (errno == EAGAIN && !waited) {
        pollfd pfd{fd_, POLLOUT, 0};
        poll(&pfd, 1, kSendWaitMs);
        waited = true;
        continue;
      }
      if (errno == EAGAIN || errno == ENOBUFS) {
        bump(counters_.tx_dropped);  // the device queue is full: lost, like on a wire
      } else {
        bump(counters_.tx_errors);
      }
      ++off;
    }
  }
}

ssize_t AfPacketNetdev::send_frame(const std::uint8_t* frame, std::size_t len) {
  std::array<iovec, 2> v{};
  std::size_t k = 0;
  if (vnet_) v[k++] = iovec{const_cast<std::uint8_t*>(kNoVnet.data()), kVnetHdrLen};
  v[k++] = iovec{const_cast<std::uint8_t*>(frame), len};
  msghdr h{};
  h.msg_iov = v.data();
  h.msg_iovlen = k;
  return sendmsg(fd_, &h, 0);
}

void AfPacketNetdev::send_frames(const std::vector<std::vector<std::uint8_t>>& frames) {
  for (const auto& f : frames) {
    ssize_t r;
    do {
      r = send_frame(f.data(), f.size());
    } while (r < 0 && errno == EINTR);
    if (r < 0) {
      bump(errno == EAGAIN || errno == ENOBUFS ? counters_.tx_dropped : counters_.tx_errors);
    } else if (f.size() > kHdrLen) {
      bump(counters_.tx_packets);
      bump(counters_.tx_bytes, f.size() - kHdrLen);
    }
  }
}

bool AfPacketNetdev::kernel_neighbour(std::uint32_t ip, wire::MacAddr& mac) const {
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
    if (addr != want || dev != ifname_) continue;
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

bool AfPacketNetdev::lookup(std::uint32_t ip, wire::MacAddr& mac, Clock::time_point now) {
  {
    std::lock_guard lock(neigh_mu_);
    auto it = neigh_.find(ip);
    if (it != neigh_.end() && it->second.valid && it->second.expires > now) {
      mac = it->second.mac;
      return true;
    }
    if (it != neigh_.end() && !it->second.valid && !it->second.queued.empty()) {
      return false;  // being resolved: ARP already sent
    }
  }
  if (kernel_neighbour(ip, mac)) {
    std::lock_guard lock(neigh_mu_);
    Neighbour& nb = neigh_[ip];
    nb.mac = mac;
    nb.valid = true;
    nb.expires = now + kNeighbourTtl;
    nb.tries = 0;
    return true;
  }
  {
    std::lock_guard lock(neigh_mu_);
    Neighbour& nb = neigh_[ip];
    nb.valid = false;
    nb.tries = 1;
    nb.expires = now + kArpRetry;
  }
  send_arp(kArpRequest, kBroadcast, ip, wire::MacAddr{});
  return false;
}

void AfPacketNetdev::send_arp(std::uint16_t op, const wire::MacAddr& dst_mac,
                              std::uint32_t target_ip, const wire::MacAddr& target_mac) {
  std::array<std::uint8_t, 60> f{};  // padded to the Ethernet minimum
  wire::Ethernet eth;
  eth.dst = dst_mac;
  eth.src = mac_;
  eth.ethertype = wire::kEthertypeArp;
  wire::build_ethernet(wire::MutBytes(f.data(), wire::kEthernetLen), eth);
  std::uint8_t* a = f.data() + wire::kEthernetLen;
  wire::store16(a, 1);  // Ethernet
  wire::store16(a + 2, wire::kEthertypeIpv4);
  a[4] = 6;
  a[5] = 4;
  wire::store16(a + 6, op);
  std::memcpy(a + 8, mac_.data(), 6);
  wire::store32(a + 14, local4_);
  std::memcpy(a + 18, target_mac.data(), 6);
  wire::store32(a + 24, target_ip);
  while (send_frame(f.data(), f.size()) < 0 && errno == EINTR) {
  }
}

void AfPacketNetdev::learn(std::uint32_t ip, const wire::MacAddr& mac) {
  std::vector<std::vector<std::uint8_t>> ready;
  {
    std::lock_guard lock(neigh_mu_);
    Neighbour& nb = neigh_[ip];
    nb.mac = mac;
    nb.valid = true;
    nb.expires = Clock::now() + kNeighbourTtl;
    nb.tries = 0;
    for (auto& f : nb.queued) {
      std::memcpy(f.data(), mac.data(), 6);
      ready.push_back(std::move(f));
    }
    nb.queued.clear();
  }
  send_frames(ready);
}

void AfPacketNetdev::handle_arp(const std::uint8_t* frame, std::size_t len) {
  if (len < kArpLen) return;
  const std::uint8_t* a = frame + wire::kEthernetLen;
  if (wire::load16(a) != 1 || wire::load16(a + 2) != wire::kEthertypeIpv4 || a[4] != 6 ||
      a[5] != 4) {
    return;
  }
  const std::uint16_t op = wire::load16(a + 6);
  wire::MacAddr sha;
  std::memcpy(sha.data(), a + 8, 6);
  const std::uint32_t spa = wire::load32(a + 14);
  const std::uint32_t tpa = wire::load32(a + 24);
  if (tpa != local4_ || spa == 0 || sha == mac_) return;
  bool known = false;
  {
    std::lock_guard lock(neigh_mu_);
    auto it = neigh_.find(spa);
    known = it != neigh_.end();
  }
  // A reply to us, or a request from a peer we talk to (or are about to), refreshes the cache.
  if (op == kArpReply || (op == kArpRequest && (known || answer_arp_))) learn(spa, sha);
  if (op == kArpRequest && answer_arp_) send_arp(kArpReply, sha, spa, sha);
}

bool AfPacketNetdev::resolved(const IpAddr& ip) const {
  if (!ip.is_v4()) return false;
  std::lock_guard lock(neigh_mu_);
  auto it = neigh_.find(ip.v4_host());
  return it != neigh_.end() && it->second.valid && it->second.expires > Clock::now();
}

void AfPacketNetdev::drop_rx(FaultEvent ev, std::atomic<std::uint64_t>& counter,
                             const std::uint8_t* data, std::uint32_t len) {
  bump(counter);
  if (!observer_) return;
  Packet view;
  view.dst = addrs_[0];
  view.data = const_cast<std::uint8_t*>(data);
  view.len = len;
  view.cap = len;
  observer_(ev, view);
}

bool AfPacketNetdev::take(const std::uint8_t* frame, std::uint32_t len, std::uint32_t orig_len,
                          std::uint32_t gso_size, Packet& out, bool& more) {
  more = false;
  if (len >= wire::kEthernetLen && wire::load16(frame + 12) == wire::kEthertypeArp) {
    handle_arp(frame, len);
    return false;
  }
  if (len != orig_len) {
    drop_rx(FaultEvent::kRxMalformed, counters_.rx_malformed, frame, len);
    return false;
  }
  auto parsed = wire::parse_frame(wire::Bytes(frame, len), 1 /* LINKTYPE_ETHERNET */);
  if (!parsed || parsed->is_ipv6 || !parsed->udp ||
      wire::ipv4_header_checksum(parsed->ip_header) != 0) {
    drop_rx(FaultEvent::kRxMalformed, counters_.rx_malformed, frame, len);
    return false;
  }
  const wire::FrameView& v = *parsed;
  Packet view;
  view.src = IpAddr::v4(v.ipv4.src);
  view.dst = IpAddr::v4(v.ipv4.dst);
  view.src_port = v.udp->src_port;
  view.dst_port = v.udp->dst_port;
  view.traffic_class = v.ipv4.tos;
  view.hop_limit = v.ipv4.ttl;
  view.data = const_cast<std::uint8_t*>(v.payload.data());
  view.len = static_cast<std::uint32_t>(v.payload.size());
  const bool segmented = gso_size > 0 && view.len > gso_size;
  if (segmented) {
    // One segment of a GSO frame: the headers on the wire would be ours with its length.
    view.data += seg_next_;
    view.len = std::min(gso_size, view.len - seg_next_);
    seg_next_ += view.len;
    more = seg_next_ < v.payload.size();
    if (!more) seg_next_ = 0;
  }
  view.cap = view.len;
  if (view.dst != addrs_[0] || view.dst_port != kRoceV2Port) {
    bump(counters_.rx_not_ours);
    if (observer_) observer_(FaultEvent::kRxNotOurs, view);
    return false;
  }
  if (view.len < wire::kBthLen + wire::kIcrcLen || view.len > out.cap || !out.data) {
    bump(counters_.rx_malformed);
    if (observer_) observer_(FaultEvent::kRxMalformed, view);
    return false;
  }
  bool icrc_ok;
  if (segmented) {
    icrc_ok = check_icrc(view);
  } else {
    auto want = wire::expected_icrc(v);
    icrc_ok = want && *want == wire::load32le(view.data + view.len - wire::kIcrcLen);
  }
  if (!icrc_ok) {
    bump(counters_.rx_icrc_errors);
    if (observer_) observer_(FaultEvent::kRxIcrc, view);
    return false;
  }
  std::uint8_t* buf = out.data;
  const std::uint32_t cap = out.cap;
  std::memcpy(buf, view.data, view.len);
  out = view;
  out.data = buf;
  out.cap = cap;
  bump(counters_.rx_packets);
  bump(counters_.rx_bytes, view.len);
  return true;
}

void AfPacketNetdev::release_block() {
  auto* bd = reinterpret_cast<tpacket_block_desc*>(ring_ + std::size_t{block_} * block_size_);
  __atomic_store_n(&bd->hdr.bh1.block_status, TP_STATUS_KERNEL, __ATOMIC_RELEASE);
  block_ = (block_ + 1) % block_nr_;
  left_in_block_ = 0;
  next_frame_ = nullptr;
  tpacket_stats_v3 st{};
  socklen_t sl = sizeof st;
  if (getsockopt(fd_, SOL_PACKET, PACKET_STATISTICS, &st, &sl) == 0 && st.tp_drops > 0) {
    bump(counters_.rx_dropped, st.tp_drops);  // the ring was full (reading resets the count)
  }
}

std::size_t AfPacketNetdev::recv_batch(std::span<Packet* const> pkts) {
  std::size_t n = 0;
  while (n < pkts.size()) {
    auto* bd = reinterpret_cast<tpacket_block_desc*>(ring_ + std::size_t{block_} * block_size_);
    if (!next_frame_) {
      if ((__atomic_load_n(&bd->hdr.bh1.block_status, __ATOMIC_ACQUIRE) & TP_STATUS_USER) == 0) {
        break;  // the kernel still fills this block
      }
      left_in_block_ = bd->hdr.bh1.num_pkts;
      next_frame_ = reinterpret_cast<const std::uint8_t*>(bd) + bd->hdr.bh1.offset_to_first_pkt;
      if (left_in_block_ == 0) {
        release_block();
        continue;
      }
    }
    const auto* h = reinterpret_cast<const tpacket3_hdr*>(next_frame_);
    std::uint32_t gso_size = 0;
    if (vnet_ && h->tp_mac >= kVnetHdrLen) {
      const std::uint8_t* vh = next_frame_ + h->tp_mac - kVnetHdrLen;
      if ((vh[1] & 0x7F) == kVnetGsoUdpL4) gso_size = std::uint32_t{vh[4]} | vh[5] << 8;
    }
    bool more = false;
    if (take(next_frame_ + h->tp_mac, h->tp_snaplen, h->tp_len, gso_size, *pkts[n], more)) ++n;
    if (more) continue;  // the next segment of this frame
    if (--left_in_block_ == 0) {
      release_block();
    } else {
      next_frame_ += h->tp_next_offset;
    }
  }
  return n;
}

int AfPacketNetdev::next_timeout_ms() const {
  int t = faults_ ? faults_->next_timeout_ms() : -1;
  const Clock::time_point now = Clock::now();
  std::lock_guard lock(neigh_mu_);
  for (const auto& [ip, nb] : neigh_) {
    if (nb.valid || nb.queued.empty()) continue;
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(nb.expires - now).count();
    const int due = static_cast<int>(std::max<long long>(0, ms) + 1);
    t = t < 0 ? due : std::min(t, due);
  }
  return t;
}

void AfPacketNetdev::service() {
  if (faults_) faults_->service([this](std::span<const Packet> p) { transmit(p); });
  const Clock::time_point now = Clock::now();
  std::vector<std::uint32_t> ask;
  std::vector<std::pair<std::uint32_t, wire::MacAddr>> found;
  {
    std::lock_guard lock(neigh_mu_);
    for (auto it = neigh_.begin(); it != neigh_.end();) {
      Neighbour& nb = it->second;
      if (nb.valid && nb.expires <= now) {
        it = neigh_.erase(it);  // stale: resolved again on the next send
        continue;
      }
      if (!nb.valid && nb.expires <= now) {
        if (nb.tries >= kArpTries) {
          bump(counters_.tx_dropped, nb.queued.size());
          it = neigh_.erase(it);
          continue;
        }
        ++nb.tries;
        nb.expires = now + kArpRetry;
        ask.push_back(it->first);
      }
      ++it;
    }
  }
  for (std::uint32_t ip : ask) {
    wire::MacAddr mac;
    if (kernel_neighbour(ip, mac)) {
      found.emplace_back(ip, mac);
    } else {
      send_arp(kArpRequest, kBroadcast, ip, wire::MacAddr{});
    }
  }
  for (const auto& [ip, mac] : found) learn(ip, mac);
}

void AfPacketNetdev::set_fault_observer(FaultObserver observer) {
  if (faults_) faults_->set_observer(observer);
  observer_ = std::move(observer);
}

}  // namespace softrdma::netdev
