#include "netdev/raw_eth.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <linux/ethtool.h>
#include <linux/filter.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "netdev/datagram_bounds.h"
#include "netdev/gso_frame.h"
#include "netdev/gso_run.h"
#include "netdev/icrc_pseudo.h"
#include "netdev/ip_header.h"
#include "netdev/ip_sockaddr.h"
#include "wire/frame.h"
#include "wire/roce_frame.h"

namespace softrdma::netdev {

namespace {

constexpr std::uint8_t kIcmp6 = 58;

// 01:00:5e + the group's low 23 bits (IPv4), or 33:33 + its low 32 bits (IPv6).
wire::MacAddr multicast_mac(const IpAddr& group) {
  const auto& b = group.bytes;
  if (!group.is_v4()) return {0x33, 0x33, b[12], b[13], b[14], b[15]};
  return {0x01, 0x00, 0x5E, static_cast<std::uint8_t>(b[13] & 0x7F), b[14], b[15]};
}

// Calls `f` with each IPv4 address (host order) configured on `ifname`, until it returns true.
template <typename F>
bool each_ipv4(const std::string& ifname, F f, int& err) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) {
    err = errno;
    return false;
  }
  bool found = false;
  for (const ifaddrs* i = list; i && !found; i = i->ifa_next) {
    if (i->ifa_name && ifname == i->ifa_name && i->ifa_addr && i->ifa_addr->sa_family == AF_INET) {
      found = f(ntohl(reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr));
    }
  }
  freeifaddrs(list);
  err = 0;
  return found;
}

}  // namespace

bool interface_ipv4(const std::string& where, const std::string& ifname, IpAddr& out,
                    std::string& error) {
  if (if_nametoindex(ifname.c_str()) == 0) {
    error = where + ": no such interface";
    return false;
  }
  int err = 0;
  const bool found = each_ipv4(
      ifname,
      [&](std::uint32_t ip) {
        out = IpAddr::v4(ip);
        return true;
      },
      err);
  if (err) {
    error = where + ": getifaddrs: " + std::strerror(err);
  } else if (!found) {
    error = where + ": the interface has no IPv4 address";
  }
  return found;
}

std::string interface_with(const IpAddr& ip) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return "";
  std::string name;
  for (const ifaddrs* i = list; i && name.empty(); i = i->ifa_next) {
    if (!i->ifa_name || !i->ifa_addr) continue;
    if (i->ifa_addr->sa_family == AF_INET && ip.is_v4() &&
        ntohl(reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr) == ip.v4_host()) {
      name = i->ifa_name;
    } else if (i->ifa_addr->sa_family == AF_INET6 && !ip.is_v4() &&
               std::memcmp(&reinterpret_cast<const sockaddr_in6*>(i->ifa_addr)->sin6_addr,
                           ip.bytes.data(), 16) == 0) {
      name = i->ifa_name;
    }
  }
  freeifaddrs(list);
  return name;
}

bool read_link(const std::string& where, const std::string& ifname, RawLink& link,
               std::string& error) {
  if (ifname.empty() || ifname.size() >= IFNAMSIZ) {
    error = where + ": bad interface name";
    return false;
  }
  link.ifname = ifname;
  link.ifindex = static_cast<int>(if_nametoindex(ifname.c_str()));
  if (link.ifindex == 0) {
    error = where + ": no such interface";
    return false;
  }
  const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    error = where + ": socket: " + std::strerror(errno);
    return false;
  }
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, ifname.c_str(), IFNAMSIZ - 1);
  bool ok = ioctl(fd, SIOCGIFHWADDR, &ifr) == 0;
  if (!ok) {
    error = where + ": SIOCGIFHWADDR: " + std::strerror(errno);
  } else if (ifr.ifr_hwaddr.sa_family != 1 /* ARPHRD_ETHER */) {
    error = where + ": not an Ethernet interface";
    ok = false;
  } else {
    std::memcpy(link.mac.data(), ifr.ifr_hwaddr.sa_data, 6);
    if (ioctl(fd, SIOCGIFMTU, &ifr) == 0 && ifr.ifr_mtu > 0) {
      link.mtu = static_cast<std::uint32_t>(ifr.ifr_mtu);
    }
    ethtool_drvinfo info{};
    info.cmd = ETHTOOL_GDRVINFO;
    ifr.ifr_data = reinterpret_cast<char*>(&info);
    if (ioctl(fd, SIOCETHTOOL, &ifr) == 0) {
      link.driver.assign(info.driver, strnlen(info.driver, sizeof info.driver));
    }
  }
  close(fd);
  return ok;
}

bool RawEthNetdev::start(const std::string& where, const IpAddr& local,
                         NeighbourTable::Config neighbours, const FaultConfig& faults,
                         std::string& error, bool hold_roce_port) {
  addrs_[0] = local;
  local4_ = local.is_v4() ? local.v4_host() : 0;
  hdr_len_ = wire::kEthernetLen + (link_.vlan_tci ? wire::kVlanTagLen : 0) +
             (local.is_v4() ? wire::kIpv4MinLen : wire::kIpv6Len) + wire::kUdpLen;
  // The kernel's neighbours of our address live on the interface that holds it (a VLAN
  // interface over ours, say), else on ours.
  const std::string owner = interface_with(local);
  const int owner_index = owner.empty() ? 0 : static_cast<int>(if_nametoindex(owner.c_str()));
  neighbours.ifname = owner_index ? owner : link_.ifname;
  neighbours.ifindex = owner_index ? owner_index : link_.ifindex;
  neighbours.mac = link_.mac;
  neighbours.local = local;
  neighbours.vlan_tci = link_.vlan_tci;
  neighbours_ = std::make_unique<NeighbourTable>(
      std::move(neighbours),
      [this](const std::uint8_t* f, std::size_t len, bool data) { put_queued(f, len, data); },
      counters_.tx_dropped);
  if (faults.any()) faults_ = std::make_unique<FaultInjector>(faults, counters_);
  if (!hold_roce_port) return true;

  udp_fd_ =
      socket(local.is_v4() ? AF_INET : AF_INET6, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (udp_fd_ < 0) {
    error = where + ": UDP socket: " + std::strerror(errno);
    return false;
  }
  sock_filter reject_all = BPF_STMT(BPF_RET | BPF_K, 0);
  sock_fprog reject{1, &reject_all};
  setsockopt(udp_fd_, SOL_SOCKET, SO_ATTACH_FILTER, &reject, sizeof reject);
  if (!local.is_v4()) {
    const int on = 1;
    setsockopt(udp_fd_, IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof on);
  }
  sockaddr_storage ss;
  const socklen_t ss_len = to_sockaddr(local, kRoceV2Port, 0, ss);
  if (bind(udp_fd_, reinterpret_cast<sockaddr*>(&ss), ss_len) != 0 && errno != EADDRNOTAVAIL) {
    error = where + ": " + local.str() + ":" + std::to_string(kRoceV2Port) + ": " +
            std::strerror(errno);
    return false;
  }
  return true;
}

RawEthNetdev::~RawEthNetdev() {
  if (udp_fd_ >= 0) close(udp_fd_);
}

void RawEthNetdev::flush_faults() {
  if (faults_) faults_->flush([this](std::span<const Packet> p) { transmit(p); });
}

void RawEthNetdev::build_headers(const Packet& p, const wire::MacAddr& dst, std::uint8_t* hdr,
                                 bool offload) const {
  const bool v4 = p.dst.is_v4();
  const wire::Ethernet eth{dst, link_.mac, link_.vlan_tci,
                           v4 ? wire::kEthertypeIpv4 : wire::kEthertypeIpv6};
  const std::size_t eth_len = eth.header_len();
  wire::build_ethernet(wire::MutBytes(hdr, eth_len), eth);
  const std::size_t ip_len = v4 ? wire::kIpv4MinLen : wire::kIpv6Len;
  wire::Udp udp;
  udp.src_port = p.src_port;
  udp.dst_port = p.dst_port;
  udp.length = static_cast<std::uint16_t>(wire::kUdpLen + p.len);
  udp.checksum = 0;
  if (offload) {
    udp.checksum = v4 ? wire::l4_partial_checksum_ipv4(addrs_[0].v4_host(), p.dst.v4_host(),
                                                       wire::kIpProtoUdp, udp.length)
                      : wire::l4_partial_checksum_ipv6(addrs_[0].bytes, p.dst.bytes,
                                                       wire::kIpProtoUdp, udp.length);
  }
  std::uint8_t* udp_hdr = hdr + eth_len + ip_len;
  wire::build_udp(wire::MutBytes(udp_hdr, wire::kUdpLen), udp);
  // The QP's traffic class; IPv4 with the ID and DF that send_batch set (0 with DF).
  build_ip_header(wire::MutBytes(hdr + eth_len, ip_len), p, addrs_[0],
                  p.hop_limit ? p.hop_limit : 64);
  if (v4 || offload) return;
  // IPv6 needs the UDP checksum (RFC 8200): pseudo-header, UDP header, datagram.
  std::uint32_t sum = wire::checksum_add(0, wire::Bytes(addrs_[0].bytes));
  sum = wire::checksum_add(sum, wire::Bytes(p.dst.bytes));
  sum += udp.length + wire::kIpProtoUdp;
  sum = wire::checksum_add(sum, wire::Bytes(udp_hdr, wire::kUdpLen));
  const std::uint16_t c = wire::checksum_fold(wire::checksum_add(sum, wire::Bytes(p.data, p.len)));
  wire::store16(udp_hdr + 6, c ? c : 0xFFFF);
}

std::size_t RawEthNetdev::send_batch(std::span<Packet* const> pkts) {
  const bool v4 = addrs_[0].is_v4();
  const std::uint32_t max_len =
      std::min<std::uint32_t>(kMaxDatagram, max_datagram_for_mtu(link_.mtu, v4));
  std::size_t n = 0;
  for (Packet* p : pkts) {
    if (!sendable(*p, max_len) || p->dst.is_v4() != v4) break;
    p->src = addrs_[0];
    p->reset_ipv4_id();
    // With faults a packet may leave later or twice: its ICRC is fixed now, for ID 0. Without,
    // send_frames fills it for the ID its frame (or UDP GSO segment) gets.
    if (faults_) fill_icrc(*p);
    ++n;
  }
  return emit_batch(
      faults_.get(), pkts, n, counters_, [this](std::span<const Packet> p) { transmit(p); },
      [this](std::span<Packet* const> p) { send_frames(p); });
}

bool RawEthNetdev::frame_for(const Packet& p, NeighbourTable::Clock::time_point now,
                             std::uint8_t* hdr, TxFrame& frame) {
  wire::MacAddr mac;
  const bool group = is_multicast(p.dst);
  if (group) mac = multicast_mac(p.dst);
  const bool have = group || neighbours_->lookup(p.dst, mac, now);
  build_headers(p, have ? mac : wire::MacAddr{}, hdr);
  if (!have) {
    // Queue the whole frame until the neighbour answers (lookup() has asked).
    std::vector<std::uint8_t> whole(hdr_len_ + p.len);
    std::memcpy(whole.data(), hdr, hdr_len_);
    std::memcpy(whole.data() + hdr_len_, p.data, p.len);
    if (!neighbours_->enqueue(p.dst, std::move(whole), mac)) return false;
    std::memcpy(hdr, mac.data(), 6);  // resolved meanwhile: send it now
  }
  frame = TxFrame{hdr, static_cast<std::uint32_t>(hdr_len_), p.data, p.len};
  return true;
}

void RawEthNetdev::transmit(std::span<const Packet> pkts) {
  constexpr std::size_t kChunk = 64;
  const NeighbourTable::Clock::time_point now = NeighbourTable::Clock::now();
  for (std::size_t i = 0; i < pkts.size(); i += kChunk) {
    const std::size_t n = std::min(kChunk, pkts.size() - i);
    std::array<std::array<std::uint8_t, kMaxHdrLen>, kChunk> hdrs;
    std::array<TxFrame, kChunk> frames;
    std::size_t m = 0;
    for (std::size_t k = i; k < i + n; ++k) {
      if (frame_for(pkts[k], now, hdrs[m].data(), frames[m])) ++m;
    }
    if (m > 0) put_frames(std::span<const TxFrame>(frames.data(), m));
  }
}

void RawEthNetdev::send_frames(std::span<Packet* const> pkts) {
  constexpr std::size_t kChunk = 64;
  const NeighbourTable::Clock::time_point now = NeighbourTable::Clock::now();
  // Runs of small datagrams (ACKs, say) gain little and would be frames under some links'
  // smallest GSO size: only datagrams of kMinGsoSegment bytes or more are joined.
  constexpr std::uint32_t kMinGsoSegment = 256;
  bool segment = udp_segmentation();
  // As many as the kernel takes in one UDP GSO frame (UDP_MAX_SEGMENTS was 64 before Linux
  // 6.11), within the 16-bit IPv4 and UDP lengths.
  constexpr std::size_t kMaxSegments = 64;
  const std::size_t max_bytes = 65535 - (hdr_len_ - wire::kEthernetLen);
  std::array<std::array<std::uint8_t, kMaxHdrLen>, kChunk> hdrs;
  std::array<TxFrame, kChunk> frames;
  std::size_t m = 0;
  auto flush = [&] {
    if (m > 0) put_frames(std::span<const TxFrame>(frames.data(), m));
    m = 0;
  };
  for (std::size_t i = 0; i < pkts.size();) {
    Packet& p = *pkts[i];
    const std::size_t j =
        segment && p.len >= kMinGsoSegment ? gso_run_end(pkts, i, kMaxSegments, max_bytes) : i + 1;
    wire::MacAddr mac;
    if (j - i > 1 && !is_multicast(p.dst) && neighbours_->lookup(p.dst, mac, now)) {
      // One UDP GSO frame: segment k gets the frame's ID + k (inet_gso_segment numbers them).
      flush();  // the frames before it go first
      std::uint32_t total = 0;
      for (std::size_t k = i; k < j; ++k) {
        pkts[k]->ipv4_id = static_cast<std::uint16_t>(k - i);
        fill_icrc(*pkts[k]);
        frames[m++] = TxFrame{nullptr, 0, pkts[k]->data, pkts[k]->len};
        total += pkts[k]->len;
      }
      Packet whole = p;
      whole.len = total;
      std::array<std::uint8_t, kMaxHdrLen> hdr;
      build_headers(whole, mac, hdr.data(), true);
      const bool sent = put_udp_segments(hdr.data(), std::span<const TxFrame>(frames.data(), m),
                                         static_cast<std::uint16_t>(p.len));
      m = 0;
      if (sent) {
        i = j;
        continue;
      }
      // Refused: a frame each from now on (these keep the IDs their ICRCs were computed for),
      // the rest of this batch included.
      segment = false;
      for (; i < j; ++i) {
        if (frame_for(*pkts[i], now, hdrs[m].data(), frames[m])) ++m;
      }
      continue;
    }
    fill_icrc(p);
    if (m == kChunk) flush();
    if (frame_for(p, now, hdrs[m].data(), frames[m])) ++m;
    ++i;
  }
  flush();
}

bool RawEthNetdev::put_udp_segments(const std::uint8_t*, std::span<const TxFrame>, std::uint16_t) {
  return false;  // no UDP GSO: never called, udp_segmentation() is false
}

void RawEthNetdev::count_sent(std::span<const TxFrame> frames, std::size_t sent) {
  for (std::size_t i = 0; i < sent; ++i) {
    bump(counters_.tx_packets);
    bump(counters_.tx_bytes, frames[i].len);
  }
  if (sent < frames.size()) bump(counters_.tx_dropped, frames.size() - sent);
}

void RawEthNetdev::put_queued(const std::uint8_t* frame, std::size_t len, bool data) {
  if (!put_frame(frame, len)) {
    bump(counters_.tx_dropped);
  } else if (data) {
    bump(counters_.tx_packets);
    bump(counters_.tx_bytes, len - hdr_len_);
  }
}

bool RawEthNetdev::resolved(const IpAddr& ip) const {
  return neighbours_->resolved(ip);
}

void RawEthNetdev::drop_rx(FaultEvent ev, std::atomic<std::uint64_t>& counter, const Packet& view) {
  bump(counter);
  if (observer_) observer_(ev, view);
}

bool RawEthNetdev::vlan_ours(const std::optional<std::uint16_t>& tci) const {
  if (!tci) return !link_.vlan_tci || vlan_checked_below_;
  return link_.vlan_tci && (*tci & 0xFFF) == (*link_.vlan_tci & 0xFFF);
}

bool RawEthNetdev::take_frame(const std::uint8_t* frame, std::uint32_t len, std::uint32_t orig_len,
                              std::uint32_t gso_size, Packet& out, bool& more) {
  more = false;
  Packet raw;
  raw.dst = addrs_[0];
  raw.data = const_cast<std::uint8_t*>(frame);
  raw.len = raw.cap = len;
  auto eth = wire::parse_ethernet(wire::Bytes(frame, len));
  if (eth && !vlan_ours(eth->vlan_tci)) return false;  // another VLAN's: not for us
  if (eth && eth->ethertype == wire::kEthertypeArp) {
    neighbours_->handle_arp(frame, len);
    return false;
  }
  if (eth && eth->ethertype == wire::kEthertypeIpv6 && len == orig_len &&
      len > eth->header_len() + wire::kIpv6Len && frame[eth->header_len() + 6] == kIcmp6) {
    take_nd(*eth, frame, len);
    return false;
  }
  if (len != orig_len) {
    drop_rx(FaultEvent::kRxMalformed, counters_.rx_malformed, raw);
    return false;
  }
  auto parsed = wire::parse_frame(wire::Bytes(frame, len), 1 /* LINKTYPE_ETHERNET */);
  if (!parsed || parsed->is_ipv6 == addrs_[0].is_v4() || !parsed->udp ||
      (!parsed->is_ipv6 && wire::ipv4_header_checksum(parsed->ip_header) != 0)) {
    drop_rx(FaultEvent::kRxMalformed, counters_.rx_malformed, raw);
    return false;
  }
  const wire::FrameView& v = *parsed;
  Packet view = datagram_view(v);
  const bool segmented = gso_size > 0 && view.len > gso_size;
  // IPv4 ID and flags as the segment would carry them on a wire: segmentation numbers the
  // segments on from the frame's ID (inet_gso_segment; checked in tests/netdev/wire_gso_ids.py).
  wire::Ipv4IdFlags seen{v.ipv4.id, v.ipv4.df ? wire::Ipv4IdFlags::kDf : std::uint16_t{0}};
  if (segmented) {
    // One segment of a GSO frame: the headers on the wire would be ours with its length.
    if (seg_next_ == 0) bump(counters_.rx_gso_frames);
    seen.id = static_cast<std::uint16_t>(seen.id + seg_next_ / gso_size);
    view.data += seg_next_;
    view.len = std::min(gso_size, view.len - seg_next_);
    seg_next_ += view.len;
    more = seg_next_ < v.payload.size();
    if (!more) seg_next_ = 0;
  }
  view.cap = view.len;
  if (view.dst != addrs_[0] || view.dst_port != kRoceV2Port) {
    drop_rx(FaultEvent::kRxNotOurs, counters_.rx_not_ours, view);
    return false;
  }
  if (!fits(view, out)) {
    drop_rx(FaultEvent::kRxMalformed, counters_.rx_malformed, view);
    return false;
  }
  bool icrc_ok;
  if (segmented) {
    icrc_ok = check_icrc_with(view, seen);
  } else {
    auto want = wire::expected_icrc(v);
    icrc_ok = want && *want == wire::load32le(view.data + view.len - wire::kIcrcLen);
  }
  if (!icrc_ok) {
    drop_rx(FaultEvent::kRxIcrc, counters_.rx_icrc_errors, view);
    return false;
  }
  hand_over(view, out);
  if (!v.is_ipv6) {
    out.ipv4_id = seen.id;
    out.ipv4_df = seen.df();
  }
  return true;
}

void RawEthNetdev::take_nd(const wire::Ethernet& eth, const std::uint8_t* frame, std::size_t len) {
  const std::size_t hl = eth.header_len();
  auto ip = wire::parse_ipv6(wire::Bytes(frame + hl, len - hl));
  if (!ip || ip->hop_limit != 255) return;  // RFC 4861: ND comes from the link itself
  const std::size_t icmp_len = std::min<std::size_t>(ip->payload_len, len - hl - wire::kIpv6Len);
  const wire::Bytes icmp(frame + hl + wire::kIpv6Len, icmp_len);
  if (wire::l4_checksum_ipv6(ip->src, ip->dst, kIcmp6, icmp) != 0) return;
  neighbours_->handle_nd(IpAddr::v6(ip->src), IpAddr::v6(ip->dst), icmp.data(), icmp.size(),
                         eth.src);
}

int RawEthNetdev::next_timeout_ms() const {
  const int f = faults_ ? faults_->next_timeout_ms() : -1;
  const int n = neighbours_->next_timeout_ms(NeighbourTable::Clock::now());
  if (f < 0) return n;
  return n < 0 ? f : std::min(f, n);
}

void RawEthNetdev::service() {
  if (faults_) faults_->service([this](std::span<const Packet> p) { transmit(p); });
  neighbours_->service(NeighbourTable::Clock::now());
}

void RawEthNetdev::set_fault_observer(FaultObserver observer) {
  if (faults_) faults_->set_observer(observer);
  observer_ = std::move(observer);
}

}  // namespace softrdma::netdev
