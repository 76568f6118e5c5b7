#include "netdev/udp.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <linux/filter.h>
#include <linux/sock_diag.h>
#include <linux/udp.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "netdev/datagram_bounds.h"
#include "netdev/gso_run.h"
#include "netdev/icrc_pseudo.h"
#include "netdev/ip_sockaddr.h"
#include "netdev/ipv4_header_view.h"
#include "netdev/packet_tx.h"
#include "wire/net.h"
#include "wire/roce_opcode.h"

#ifndef UDP_GRO
#define UDP_GRO 104
#endif

namespace softrdma::netdev {

namespace {

constexpr int kSockBuf = 16 << 20;
constexpr std::size_t kSendChunk = 64;
constexpr std::size_t kRecvBatch = 32;
// After an empty read of the socket, how long recv_batch leaves it alone.
constexpr std::int64_t kSocketQuietNs = 5'000;
constexpr std::size_t kGroBufSize = 65536;

bool setopt(int fd, int level, int name, int value) {
  return setsockopt(fd, level, name, &value, sizeof value) == 0;
}

void set_buffers(int fd, int rcv, int snd) {
  if (rcv > 0 && !setopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, rcv))
    setopt(fd, SOL_SOCKET, SO_RCVBUF, rcv);
  if (snd > 0 && !setopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, snd))
    setopt(fd, SOL_SOCKET, SO_SNDBUF, snd);
}

std::string endpoint(const IpAddr& a, std::uint16_t port) {
  const std::string host = a.is_v4() ? a.str() : "[" + a.str() + "]";
  return host + ":" + std::to_string(port);
}

// The interface that owns `a` (or, failing that, whose subnet holds it, as 127.0.0.2 is on lo):
// its MTU and index. 1500 and 0 when none is found.
void find_interface(const IpAddr& a, int fd, std::uint32_t& mtu, std::uint32_t& index) {
  mtu = 1500;
  index = 0;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return;
  auto to_ip = [](const sockaddr* sa, IpAddr& out) {
    if (!sa || (sa->sa_family != AF_INET && sa->sa_family != AF_INET6)) return false;
    sockaddr_storage ss{};
    std::memcpy(&ss, sa, sa->sa_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6));
    std::uint16_t port = 0;
    return from_sockaddr(ss, out, port);
  };
  const ifaddrs* exact = nullptr;
  const ifaddrs* subnet = nullptr;
  for (const ifaddrs* i = list; i && !exact; i = i->ifa_next) {
    IpAddr b, mask;
    if (!i->ifa_name || !to_ip(i->ifa_addr, b) || b.is_v4() != a.is_v4()) continue;
    if (b == a) {
      exact = i;
    } else if (!subnet && to_ip(i->ifa_netmask, mask)) {
      bool same = true;
      for (std::size_t k = 0; k < 16; ++k) {
        const std::uint8_t m = a.is_v4() && k < 12 ? 0xFF : mask.bytes[k];
        same = same && ((a.bytes[k] ^ b.bytes[k]) & m) == 0;
      }
      if (same) subnet = i;
    }
  }
  if (const ifaddrs* i = exact ? exact : subnet) {
    ifreq ifr{};
    std::strncpy(ifr.ifr_name, i->ifa_name, IFNAMSIZ - 1);
    if (ioctl(fd, SIOCGIFMTU, &ifr) == 0 && ifr.ifr_mtu > 0) {
      mtu = static_cast<std::uint32_t>(ifr.ifr_mtu);
    }
    index = if_nametoindex(i->ifa_name);
  }
  freeifaddrs(list);
}

// Path MTU discovery on (DF set), which also makes Linux send IPv4 ID 0 from unconnected sockets.
void set_df(int fd, bool v4) {
  if (v4) {
    setopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, IP_PMTUDISC_DO);
  } else {
    setopt(fd, IPPROTO_IPV6, IPV6_MTU_DISCOVER, IPV6_PMTUDISC_DO);
  }
}

// Destination address, traffic class and hop limit of each received datagram as ancillary data.
bool set_recv_info(int fd, bool v4) {
  return v4 ? setopt(fd, IPPROTO_IP, IP_PKTINFO, 1) && setopt(fd, IPPROTO_IP, IP_RECVTOS, 1) &&
                  setopt(fd, IPPROTO_IP, IP_RECVTTL, 1)
            : setopt(fd, IPPROTO_IPV6, IPV6_RECVPKTINFO, 1) &&
                  setopt(fd, IPPROTO_IPV6, IPV6_RECVTCLASS, 1) &&
                  setopt(fd, IPPROTO_IPV6, IPV6_RECVHOPLIMIT, 1);
}

}  // namespace

UdpNetdev::Sock::~Sock() {
  if (fd >= 0) close(fd);
}

std::unique_ptr<UdpNetdev> UdpNetdev::open(IpAddr local, std::string& error, FaultConfig faults,
                                           std::uint16_t port, bool host_local) {
  std::unique_ptr<UdpNetdev> d(new UdpNetdev());
  const std::string where = "udp:" + endpoint(local, port);
  auto fail = [&](const std::string& what) {
    error = where + ": " + what + std::strerror(errno);
    return nullptr;
  };
  d->addrs_[0] = local;
  d->port_ = port;
  d->v4_ = local.is_v4();
  const int family = d->v4_ ? AF_INET : AF_INET6;
  d->rx_fd_ = socket(family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (d->rx_fd_ < 0) return fail("socket: ");
  const int fd = d->rx_fd_;
  if (!d->v4_ && !setopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, 1)) return fail("IPV6_V6ONLY: ");
  set_buffers(fd, kSockBuf, kSockBuf);
  set_df(fd, d->v4_);
  if (!set_recv_info(fd, d->v4_)) return fail("packet info options: ");
  d->gro_ = setopt(fd, IPPROTO_UDP, UDP_GRO, 1);
  find_interface(local, fd, d->mtu_, d->scope_id_);
  sockaddr_storage ss;
  const socklen_t len = to_sockaddr(local, port, d->scope_id_, ss);
  if (bind(fd, reinterpret_cast<sockaddr*>(&ss), len) != 0) return fail("");
  d->set_multicast_send_options(fd);

  d->pend_efd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  d->epfd_ = epoll_create1(EPOLL_CLOEXEC);
  if (d->pend_efd_ < 0 || d->epfd_ < 0) return fail("eventfd/epoll: ");
  for (int member : {d->rx_fd_, d->pend_efd_}) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = member;
    if (epoll_ctl(d->epfd_, EPOLL_CTL_ADD, member, &ev) != 0) return fail("epoll_ctl: ");
  }
  d->buf_size_ = d->gro_ ? kGroBufSize : kMaxDatagram;
  d->rx_bufs_.resize(d->buf_size_ * kRecvBatch);
  if (faults.any()) d->faults_ = std::make_unique<FaultInjector>(faults, d->counters_);
  if (host_local) {
    // Without it (the name is taken, no memfd): the kernel's path only; still a working device.
    std::string why;
    d->shm_ = ShmLinks::open(local, port, d->epfd_, d->counters_, why);
  }
  return d;
}

UdpNetdev::~UdpNetdev() {
  if (faults_) faults_->flush([this](std::span<const Packet> p) { transmit_copies(p); });
  shm_.reset();
  {
    std::lock_guard lock(send_mu_);
    send_socks_.clear();
    send_order_.clear();
  }
  {
    std::lock_guard lock(group_mu_);
    groups_.clear();
  }
  for (int fd : {epfd_, pend_efd_, rx_fd_}) {
    if (fd >= 0) close(fd);
  }
}

std::string UdpNetdev::name() const {
  return port_ == kRoceV2Port ? "udp:" + addrs_[0].str() : "udp:" + endpoint(addrs_[0], port_);
}

Counters UdpNetdev::counters() const {
  Counters c = Netdev::counters();
  // The socket's drop count (SK_MEMINFO_DROPS, cumulative): datagrams that found its 16 MiB
  // receive buffer full.
  std::uint32_t mem[SK_MEMINFO_VARS] = {};
  socklen_t len = sizeof mem;
  if (rx_fd_ >= 0 && getsockopt(rx_fd_, SOL_SOCKET, SO_MEMINFO, mem, &len) == 0 &&
      len > SK_MEMINFO_DROPS * sizeof mem[0]) {
    c.rx_dropped += mem[SK_MEMINFO_DROPS];
  }
  return c;
}

std::size_t UdpNetdev::send_sockets() const {
  std::lock_guard lock(send_mu_);
  return send_socks_.size();
}

std::shared_ptr<UdpNetdev::Sock> UdpNetdev::make_send_socket(std::uint16_t src_port) const {
  auto s = std::make_shared<Sock>();
  s->fd = socket(v4_ ? AF_INET : AF_INET6, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (s->fd < 0) return nullptr;
  if (!v4_) setopt(s->fd, IPPROTO_IPV6, IPV6_V6ONLY, 1);
  setopt(s->fd, SOL_SOCKET, SO_REUSEADDR, 1);
  setopt(s->fd, SOL_SOCKET, SO_REUSEPORT, 1);
  set_buffers(s->fd, 0, kSockBuf);
  setopt(s->fd, SOL_SOCKET, SO_RCVBUF, 4096);
  set_df(s->fd, v4_);
  // It only sends: a filter that accepts nothing keeps stray datagrams from queueing on it.
  sock_filter reject_all = BPF_STMT(BPF_RET | BPF_K, 0);
  sock_fprog prog{1, &reject_all};
  setsockopt(s->fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof prog);
  sockaddr_storage ss;
  const socklen_t len = to_sockaddr(addrs_[0], src_port, scope_id_, ss);
  if (bind(s->fd, reinterpret_cast<sockaddr*>(&ss), len) != 0) return nullptr;
  set_multicast_send_options(s->fd);
  return s;
}

void UdpNetdev::set_multicast_send_options(int fd) const {
  // Datagrams to a group leave through the interface of our address, loop back to members on
  // this host, and carry TTL 64 unless the packet's hop limit (a cmsg) says otherwise.
  if (v4_) {
    ip_mreqn m{};
    m.imr_address.s_addr = htonl(addrs_[0].v4_host());
    m.imr_ifindex = static_cast<int>(scope_id_);
    setsockopt(fd, IPPROTO_IP, IP_MULTICAST_IF, &m, sizeof m);
    setopt(fd, IPPROTO_IP, IP_MULTICAST_LOOP, 1);
    setopt(fd, IPPROTO_IP, IP_MULTICAST_TTL, 64);
  } else {
    if (scope_id_ != 0) setopt(fd, IPPROTO_IPV6, IPV6_MULTICAST_IF, static_cast<int>(scope_id_));
    setopt(fd, IPPROTO_IPV6, IPV6_MULTICAST_LOOP, 1);
    setopt(fd, IPPROTO_IPV6, IPV6_MULTICAST_HOPS, 64);
  }
}

std::size_t UdpNetdev::groups() const {
  std::lock_guard lock(group_mu_);
  return groups_.size();
}

int UdpNetdev::join_group(const IpAddr& group) {
  if (!is_multicast(group) || group.is_v4() != v4_) return EINVAL;
  std::lock_guard lock(group_mu_);
  for (const Group& g : groups_) {
    if (g.addr == group) return 0;
  }
  if (groups_.size() >= kMaxGroups) return ENOBUFS;
  sockaddr_storage ss;
  const socklen_t len = to_sockaddr(group, port_, scope_id_, ss);
  // Can we send to the group? A connect() of a throw-away socket asks for the route (IPv6
  // groups on an interface without a multicast route fail here with ENETUNREACH).
  {
    Sock probe;
    probe.fd = socket(v4_ ? AF_INET : AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (probe.fd < 0) return errno;
    set_multicast_send_options(probe.fd);
    if (connect(probe.fd, reinterpret_cast<sockaddr*>(&ss), len) != 0) return errno;
  }
  auto sock = std::make_unique<Sock>();
  sock->fd = socket(v4_ ? AF_INET : AF_INET6, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  const int fd = sock->fd;
  if (fd < 0) return errno;
  if (!v4_ && !setopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, 1)) return errno;
  if (!setopt(fd, SOL_SOCKET, SO_REUSEADDR, 1) || !setopt(fd, SOL_SOCKET, SO_REUSEPORT, 1) ||
      !set_recv_info(fd, v4_)) {
    return errno;
  }
  set_buffers(fd, kSockBuf, 0);
  if (gro_) setopt(fd, IPPROTO_UDP, UDP_GRO, 1);
  if (bind(fd, reinterpret_cast<sockaddr*>(&ss), len) != 0) return errno;
  if (v4_) {
    setopt(fd, IPPROTO_IP, IP_MULTICAST_ALL, 0);  // only the group joined on this socket
    ip_mreqn m{};
    m.imr_multiaddr.s_addr = htonl(group.v4_host());
    m.imr_address.s_addr = htonl(addrs_[0].v4_host());
    m.imr_ifindex = static_cast<int>(scope_id_);
    if (setsockopt(fd, IPPROTO_IP, IP_ADD_MEMBERSHIP, &m, sizeof m) != 0) return errno;
  } else {
    setopt(fd, IPPROTO_IPV6, IPV6_MULTICAST_ALL, 0);
    ipv6_mreq m{};
    std::memcpy(m.ipv6mr_multiaddr.s6_addr, group.bytes.data(), 16);
    m.ipv6mr_interface = scope_id_;
    if (setsockopt(fd, IPPROTO_IPV6, IPV6_JOIN_GROUP, &m, sizeof m) != 0) return errno;
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = fd;
  if (epoll_ctl(epfd_, EPOLL_CTL_ADD, fd, &ev) != 0) return errno;
  groups_.push_back(Group{group, std::move(sock)});
  have_groups_.store(true, std::memory_order_release);
  return 0;
}

int UdpNetdev::leave_group(const IpAddr& group) {
  if (!is_multicast(group) || group.is_v4() != v4_) return EINVAL;
  std::lock_guard lock(group_mu_);
  auto it =
      std::find_if(groups_.begin(), groups_.end(), [&](const Group& g) { return g.addr == group; });
  if (it == groups_.end()) return 0;
  epoll_ctl(epfd_, EPOLL_CTL_DEL, it->sock->fd, nullptr);
  groups_.erase(it);  // closing the socket drops its membership
  have_groups_.store(!groups_.empty(), std::memory_order_release);
  return 0;
}

UdpNetdev::SendEntry UdpNetdev::send_socket(std::uint16_t src_port) {
  std::lock_guard lock(send_mu_);
  auto it = send_socks_.find(src_port);
  if (it != send_socks_.end()) return it->second;
  if (send_order_.size() >= kMaxSendSockets) {
    return send_socks_.at(send_order_[src_port % send_order_.size()]);
  }
  SendEntry e{make_send_socket(src_port), src_port};
  if (!e.sock) e.port = port_;
  send_socks_.emplace(src_port, e);
  send_order_.push_back(src_port);
  return e;
}

std::size_t UdpNetdev::send_batch(std::span<Packet* const> pkts) {
  const std::uint32_t max_len =
      std::min<std::uint32_t>(kMaxDatagram, max_datagram_for_mtu(mtu_, v4_));
  std::size_t n = 0;
  std::uint16_t last_asked = 0, last_used = 0;
  bool have_last = false;
  for (Packet* p : pkts) {
    if (!sendable(*p, max_len) || p->dst.is_v4() != v4_) break;
    p->src = addrs_[0];
    p->reset_ipv4_id();
    if (!have_last || p->src_port != last_asked) {
      // With faults the ICRC is fixed below, so the source port must be final now; otherwise
      // transmit() settles it for the datagrams that take the kernel's path (a host-local ring
      // needs no socket, and must not take one of the kMaxSendSockets from the kernel's path).
      last_asked = p->src_port;
      last_used = !faults_ || p->src_port == port_ ? p->src_port : send_socket(p->src_port).port;
      have_last = true;
    }
    p->src_port = last_used;
    // With faults, a packet may leave later (delayed, reordered) or twice: its ICRC is fixed
    // now, for ID 0. Without, transmit computes it as the packet leaves (send_chunk: for the
    // ID its UDP GSO segment gets).
    if (faults_) fill_icrc(*p);
    ++n;
  }
  return emit_batch(
      faults_.get(), pkts, n, counters_, [this](std::span<const Packet> p) { transmit_copies(p); },
      [this](std::span<Packet* const> p) { transmit(p); });
}

void UdpNetdev::transmit_copies(std::span<const Packet> pkts) {
  std::array<Packet*, kSendChunk> ptrs;
  for (std::size_t i = 0; i < pkts.size(); i += kSendChunk) {
    const std::size_t m = std::min(kSendChunk, pkts.size() - i);
    // The injector's own copies, already complete (ICRC for ID 0): nothing in them changes.
    for (std::size_t k = 0; k < m; ++k) ptrs[k] = const_cast<Packet*>(&pkts[i + k]);
    transmit(std::span<Packet* const>(ptrs.data(), m));
  }
}

void UdpNetdev::transmit(std::span<Packet* const> pkts) {
  ShmLinks::Batch shm(shm_.get());
  // Without faults, ICRCs are computed here: for a ring only when tracing needs them (nothing
  // can corrupt a datagram there and the receiver does not check one left out).
  const bool filled = faults_ != nullptr;
  std::uint64_t ring_packets = 0, ring_bytes = 0;  // counted once, after the loop
  std::size_t i = 0;
  while (i < pkts.size()) {
    Packet& p = *pkts[i];
    if (shm_ && shm.takes(p)) {
      if (!filled && icrc_always_) fill_icrc(p);
      if (shm.send(p, filled || icrc_always_)) {
        ++ring_packets;
        ring_bytes += p.len;
        ++i;
        continue;
      }
    }
    std::size_t j = i + 1;
    while (j < pkts.size() && j - i < kSendChunk && pkts[j]->src_port == p.src_port &&
           !(shm_ && shm.takes(*pkts[j]))) {
      ++j;
    }
    // The port may differ from the one asked for: none could be bound (the receive socket's
    // instead), or all kMaxSendSockets are taken (a shared one's). With faults, send_batch has
    // settled it already (the ICRC is computed).
    SendEntry out{nullptr, port_};
    if (p.src_port != port_) out = send_socket(p.src_port);
    for (std::size_t k = i; k < j; ++k) pkts[k]->src_port = out.port;
    send_chunk(out.sock ? out.sock->fd : rx_fd_, &pkts[i], j - i);
    i = j;
  }
  if (ring_packets > 0) {
    bump(counters_.tx_packets, ring_packets);
    bump(counters_.tx_bytes, ring_bytes);
  }
}

void UdpNetdev::send_chunk(int fd, Packet* const* pkts, std::size_t n) {
  // Runs of equal-sized datagrams to one destination leave as one message with UDP_SEGMENT
  // (GSO): the kernel (or the NIC) cuts it into the same datagrams on the wire, for a fraction
  // of the per-datagram cost. The last of a run may be shorter. From an unconnected socket with
  // DF the message gets IPv4 ID 0 and its segments 0, 1, 2, ... (inet_gso_segment numbers them
  // on; checked on a veth pair with the kernel segmenting before it, docs/backends.md): the ICRC of
  // each is computed for the ID it will carry. Packets with faults configured have theirs
  // already (ID 0) and leave one by one over IPv4.
  constexpr std::size_t kCmsgSpace =
      CMSG_SPACE(sizeof(int)) * 2 + CMSG_SPACE(sizeof(std::uint16_t));
  constexpr std::size_t kMaxSegments = 64;
  constexpr std::size_t kMaxGsoBytes = 65000;
  std::array<mmsghdr, kSendChunk> msgs{};
  std::array<iovec, kSendChunk> iov{};
  std::array<sockaddr_storage, kSendChunk> addrs;
  std::array<std::size_t, kSendChunk + 1> first{};  // message m covers pkts[first[m], first[m+1])
  alignas(cmsghdr) std::array<std::array<char, kCmsgSpace>, kSendChunk> cbuf{};
  const bool filled = faults_ != nullptr;
  const bool segment = gso_ && (!filled || !v4_);
  std::size_t nmsg = 0;
  for (std::size_t i = 0; i < n;) {
    const Packet& p = *pkts[i];
    // (One socket's: the source ports are the same.)
    const std::size_t j =
        segment ? gso_run_end(std::span<Packet* const>(pkts, n), i, kMaxSegments, kMaxGsoBytes)
                : i + 1;
    for (std::size_t k = i; k < j; ++k) {
      Packet& seg = *pkts[k];
      if (!filled) {
        seg.ipv4_id = static_cast<std::uint16_t>(k - i);
        fill_icrc(seg);
      }
      iov[k].iov_base = seg.data;
      iov[k].iov_len = seg.len;
    }
    msghdr& h = msgs[nmsg].msg_hdr;
    h.msg_name = &addrs[nmsg];
    h.msg_namelen = to_sockaddr(p.dst, p.dst_port, scope_id_, addrs[nmsg]);
    h.msg_iov = &iov[i];
    h.msg_iovlen = j - i;
    h.msg_control = cbuf[nmsg].data();
    h.msg_controllen = kCmsgSpace;
    std::size_t used = 0;
    cmsghdr* c = CMSG_FIRSTHDR(&h);
    const int tc = p.traffic_class;
    c->cmsg_level = v4_ ? IPPROTO_IP : IPPROTO_IPV6;
    c->cmsg_type = v4_ ? IP_TOS : IPV6_TCLASS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &tc, sizeof tc);
    used += CMSG_SPACE(sizeof(int));
    if (p.hop_limit != 0) {
      const int hl = p.hop_limit;
      c = CMSG_NXTHDR(&h, c);
      c->cmsg_level = v4_ ? IPPROTO_IP : IPPROTO_IPV6;
      c->cmsg_type = v4_ ? IP_TTL : IPV6_HOPLIMIT;
      c->cmsg_len = CMSG_LEN(sizeof(int));
      std::memcpy(CMSG_DATA(c), &hl, sizeof hl);
      used += CMSG_SPACE(sizeof(int));
    }
    if (j - i > 1) {
      const auto seg = static_cast<std::uint16_t>(p.len);
      c = CMSG_NXTHDR(&h, c);
      c->cmsg_level = IPPROTO_UDP;
      c->cmsg_type = UDP_SEGMENT;
      c->cmsg_len = CMSG_LEN(sizeof seg);
      std::memcpy(CMSG_DATA(c), &seg, sizeof seg);
      used += CMSG_SPACE(sizeof seg);
    }
    h.msg_controllen = used;
    first[nmsg] = i;
    ++nmsg;
    i = j;
  }
  first[nmsg] = n;
  std::size_t off = 0;
  bool waited = false;
  while (off < nmsg) {
    const int r = sendmmsg(fd, &msgs[off], static_cast<unsigned>(nmsg - off), 0);
    if (r > 0) {
      std::uint64_t bytes = 0;
      for (std::size_t k = first[off]; k < first[off + static_cast<std::size_t>(r)]; ++k) {
        bytes += pkts[k]->len;
      }
      bump(counters_.tx_packets, first[off + static_cast<std::size_t>(r)] - first[off]);
      bump(counters_.tx_bytes, bytes);
      off += static_cast<std::size_t>(r);
      waited = false;
      continue;
    }
    if (errno == EINTR) continue;
    // The socket's send buffer is full: wait (without spinning) for room, once.
    if (errno == EAGAIN && wait_for_room(fd, waited)) continue;
    if (errno == EAGAIN) {
      bump(counters_.tx_errors, first[nmsg] - first[off]);  // still full: lost, like a full ring
      return;
    }
    if (gso_ && first[off + 1] - first[off] > 1 &&
        (errno == EINVAL || errno == EIO || errno == ENOPROTOOPT || errno == EOPNOTSUPP)) {
      // No UDP GSO here: send the rest one datagram at a time from now on.
      gso_ = false;
      send_chunk(fd, pkts + first[off], n - first[off]);
      return;
    }
    bump(counters_.tx_errors, first[off + 1] - first[off]);  // refused (EMSGSIZE, …): skip it
    ++off;
  }
}

void UdpNetdev::set_pending_signal(bool on) {
  if (on == pending_signaled_) return;
  if (on) {
    const std::uint64_t one = 1;
    [[maybe_unused]] ssize_t r = write(pend_efd_, &one, sizeof one);
  } else {
    std::uint64_t v;
    [[maybe_unused]] ssize_t r = read(pend_efd_, &v, sizeof v);
  }
  pending_signaled_ = on;
}

bool UdpNetdev::check_icrc_full(const Packet& view, bool follows, wire::Ipv4IdFlags& seen) {
  seen = wire::kLinuxIpv4IdFlags;
  if (!view.src.is_v4()) return check_icrc_with(view, seen);
  // The ID after the last good datagram's from the same source: UDP GSO segments (a softrdma
  // peer's, numbered on by the kernel or a NIC), a GRO buffer's next segment, a NIC's counter.
  const bool same_source =
      last_ok_.valid && last_ok_.src == view.src && last_ok_.sport == view.src_port;
  const wire::Ipv4IdFlags next{static_cast<std::uint16_t>(last_ok_.id_flags.id + 1),
                               last_ok_.id_flags.flags_frag};
  auto ok = [&](const wire::Ipv4IdFlags& f) {
    last_ok_ = LastOk{view.src, view.src_port, f, true};
    seen = f;
    return true;
  };
  // A GRO buffer's later segments try the next ID first; everything else ID 0 with DF first
  // (Linux's own single datagrams and GSO messages).
  if (follows && same_source && check_icrc_with(view, next)) return ok(next);
  if (check_icrc_with(view, wire::kLinuxIpv4IdFlags)) return ok(wire::kLinuxIpv4IdFlags);
  if (!follows && same_source && check_icrc_with(view, next)) return ok(next);
  if (v4_view_) {
    if (auto h = v4_view_->find(view)) {
      if (check_icrc_with(view, *h)) return ok(*h);
      return false;
    }
  }
  // No view, or it missed this one: solve the ID. A datagram that fits one is another host's
  // or a NIC's: from now on, look at the headers where CAP_NET_RAW allows.
  wire::Ipv4IdFlags solved;
  if (!solve_icrc_ipv4(view, solved)) return false;
  if (!v4_view_tried_) {
    v4_view_tried_ = true;
    v4_view_ = Ipv4HeaderView::open(addrs_[0], port_);
  }
  return ok(solved);
}

bool UdpNetdev::deliver(const Packet& view, const IpAddr& expect, Packet& out, bool icrc_filled,
                        bool follows) {
  if (view.dst != expect) {
    bump(counters_.rx_not_ours);
    if (observer_) observer_(FaultEvent::kRxNotOurs, view);
    return false;
  }
  if (!fits(view, out)) {
    bump(counters_.rx_malformed);
    if (observer_) observer_(FaultEvent::kRxMalformed, view);
    return false;
  }
  wire::Ipv4IdFlags seen = wire::kLinuxIpv4IdFlags;
  if (icrc_filled && !check_icrc_full(view, follows, seen)) {
    bump(counters_.rx_icrc_errors);
    if (observer_) observer_(FaultEvent::kRxIcrc, view);
    return false;
  }
  hand_over(view, out);
  out.ipv4_id = seen.id;
  out.ipv4_df = seen.df();
  if (!icrc_filled && icrc_always_) fill_icrc(out);
  return true;
}

// The unicast socket as the host-local rings see it.
class UdpNetdev::RingsSocket final : public ShmLinks::SocketPath {
 public:
  explicit RingsSocket(UdpNetdev& d) : d_(d) {}
  void read(std::span<Packet* const> pkts, std::size_t& n) override {
    d_.read_socket(d_.rx_fd_, d_.addrs_[0], pkts, n);
  }
  bool backlog() const override { return !d_.pending_.empty(); }
  bool deliver(const Packet& view, bool icrc_filled, Packet& out) override {
    return d_.deliver(view, d_.addrs_[0], out, icrc_filled);
  }

 private:
  UdpNetdev& d_;
};

std::size_t UdpNetdev::recv_batch(std::span<Packet* const> pkts) {
  std::size_t n = 0;
  while (n < pkts.size() && !pending_.empty()) {
    const Pending& q = pending_.front();
    if (deliver(q.view, q.expect, *pkts[n], true, q.follows)) ++n;
    pending_.pop_front();
  }
  if (shm_) {
    RingsSocket socket(*this);
    shm_->receive(pkts, n, socket);
  }
  if (n < pkts.size() && pending_.empty()) {
    const std::int64_t now = std::chrono::steady_clock::now().time_since_epoch().count();
    if (now >= socket_quiet_until_ns_) {
      const std::size_t before = n;
      read_socket(rx_fd_, addrs_[0], pkts, n);
      socket_quiet_until_ns_ = n == before ? now + kSocketQuietNs : 0;
    }
  }
  if (have_groups_.load(std::memory_order_acquire)) {
    std::lock_guard lock(group_mu_);
    for (const Group& g : groups_) read_socket(g.sock->fd, g.addr, pkts, n);
  }
  set_pending_signal(!pending_.empty());
  return n;
}

void UdpNetdev::read_socket(int fd, const IpAddr& bound, std::span<Packet* const> pkts,
                            std::size_t& n) {
  constexpr std::size_t kCmsgSpace = CMSG_SPACE(sizeof(in6_pktinfo)) + 3 * CMSG_SPACE(sizeof(int));
  while (n < pkts.size() && pending_.empty()) {
    const std::size_t want = std::min(kRecvBatch, pkts.size() - n);
    // Left uninitialised but for the fields the kernel reads: zeroing ~9 KiB of headers and
    // control buffers cost more than the (usually empty) read itself.
    std::array<mmsghdr, kRecvBatch> msgs;
    std::array<iovec, kRecvBatch> iov;
    std::array<sockaddr_storage, kRecvBatch> from;
    alignas(cmsghdr) std::array<std::array<char, kCmsgSpace>, kRecvBatch> cbuf;
    for (std::size_t i = 0; i < want; ++i) {
      iov[i].iov_base = rx_bufs_.data() + i * buf_size_;
      iov[i].iov_len = buf_size_;
      msghdr& h = msgs[i].msg_hdr;
      h.msg_name = &from[i];
      h.msg_namelen = sizeof from[i];
      h.msg_iov = &iov[i];
      h.msg_iovlen = 1;
      h.msg_control = cbuf[i].data();
      h.msg_controllen = kCmsgSpace;
      h.msg_flags = 0;
      msgs[i].msg_len = 0;
    }
    const int r = recvmmsg(fd, msgs.data(), static_cast<unsigned>(want), MSG_DONTWAIT, nullptr);
    if (r <= 0) {
      if (r < 0 && errno == EINTR) continue;
      break;
    }
    for (std::size_t i = 0; i < static_cast<std::size_t>(r); ++i) {
      msghdr& h = msgs[i].msg_hdr;
      Packet view;
      view.dst = bound;
      view.dst_port = port_;
      if ((h.msg_flags & MSG_TRUNC) || msgs[i].msg_len == 0 ||
          !from_sockaddr(from[i], view.src, view.src_port)) {
        bump(counters_.rx_malformed);
        if (observer_) {
          view.data = static_cast<std::uint8_t*>(iov[i].iov_base);
          view.len = static_cast<std::uint32_t>(std::min<std::size_t>(msgs[i].msg_len, buf_size_));
          view.cap = view.len;
          observer_(FaultEvent::kRxMalformed, view);
        }
        continue;
      }
      std::size_t seg = msgs[i].msg_len;  // > 0
      for (cmsghdr* c = CMSG_FIRSTHDR(&h); c; c = CMSG_NXTHDR(&h, c)) {
        int v = 0;
        if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO) {
          in_pktinfo pi;
          std::memcpy(&pi, CMSG_DATA(c), sizeof pi);
          view.dst = IpAddr::v4(ntohl(pi.ipi_addr.s_addr));
        } else if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_PKTINFO) {
          in6_pktinfo pi;
          std::memcpy(&pi, CMSG_DATA(c), sizeof pi);
          std::memcpy(view.dst.bytes.data(), pi.ipi6_addr.s6_addr, 16);
        } else if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS) {
          view.traffic_class = *reinterpret_cast<const std::uint8_t*>(CMSG_DATA(c));
        } else if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TTL) {
          std::memcpy(&v, CMSG_DATA(c), sizeof v);
          view.hop_limit = static_cast<std::uint8_t>(v);
        } else if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_TCLASS) {
          std::memcpy(&v, CMSG_DATA(c), sizeof v);
          view.traffic_class = static_cast<std::uint8_t>(v);
        } else if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_HOPLIMIT) {
          std::memcpy(&v, CMSG_DATA(c), sizeof v);
          view.hop_limit = static_cast<std::uint8_t>(v);
        } else if (c->cmsg_level == IPPROTO_UDP && c->cmsg_type == UDP_GRO) {
          std::memcpy(&v, CMSG_DATA(c), sizeof v);
          if (v > 0) seg = static_cast<std::size_t>(v);
        }
      }
      // A GRO buffer holds segments of `seg` bytes, the last one possibly shorter.
      std::uint8_t* base = static_cast<std::uint8_t*>(iov[i].iov_base);
      for (std::size_t off = 0; off < msgs[i].msg_len; off += seg) {
        view.data = base + off;
        view.len = static_cast<std::uint32_t>(std::min(seg, msgs[i].msg_len - off));
        view.cap = view.len;
        const bool follows = off != 0;
        if (n < pkts.size() && pending_.empty()) {
          if (deliver(view, bound, *pkts[n], true, follows)) ++n;
        } else {
          pending_.push_back(Pending{view, bound, follows});
        }
      }
    }
    if (static_cast<std::size_t>(r) < want) break;
  }
}

int UdpNetdev::next_timeout_ms() const {
  const int faults = faults_ ? faults_->next_timeout_ms() : -1;
  if (!shm_ || !shm_->holding()) return faults;
  constexpr int kHeld = static_cast<int>(ShmLinks::kHeldRetry.count());
  return faults < 0 ? kHeld : std::min(faults, kHeld);
}

void UdpNetdev::service() {
  if (faults_) faults_->service([this](std::span<const Packet> p) { transmit_copies(p); });
  if (shm_) shm_->flush_held();  // datagrams waiting for room in a full host-local ring
}

bool UdpNetdev::prepare_sleep(bool wake_me) {
  return !shm_ || shm_->prepare_sleep(wake_me);
}

void UdpNetdev::set_fault_observer(FaultObserver observer) {
  if (faults_) faults_->set_observer(observer);
  observer_ = std::move(observer);
}

}  // namespace softrdma::netdev
