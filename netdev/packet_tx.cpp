#include "netdev/packet_tx.h"

#include <linux/if_packet.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>

#include "netdev/vnet_header.h"
#include "wire/bytes.h"
#include "wire/net.h"

namespace softrdma::netdev {

namespace {

constexpr std::size_t kSendChunk = 64;
constexpr int kSendWaitMs = 100;
constexpr int kSendBuffer = 4 << 20;  // room for a few UDP GSO frames (the default: about three)
constexpr VnetHdr kNoVnet{};

bool setopt(int fd, int level, int name, int value) {
  return setsockopt(fd, level, name, &value, sizeof value) == 0;
}

}  // namespace

int open_offload_socket(int ifindex) {
  const int fd = socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_ll sll{};
  sll.sll_family = AF_PACKET;
  sll.sll_ifindex = ifindex;
  if (!setopt(fd, SOL_PACKET, PACKET_VNET_HDR, 1) ||
      bind(fd, reinterpret_cast<sockaddr*>(&sll), sizeof sll) != 0) {
    close(fd);
    return -1;
  }
  if (!setopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, kSendBuffer)) {
    setopt(fd, SOL_SOCKET, SO_SNDBUF, kSendBuffer);
  }
  return fd;
}

void send_frames(int fd, bool vnet, std::span<const TxFrame> frames, AtomicCounters& counters) {
  std::array<iovec, 3 * kSendChunk> iov{};
  std::array<mmsghdr, kSendChunk> msgs{};
  for (std::size_t i = 0; i < frames.size(); i += kSendChunk) {
    const std::size_t m = std::min(kSendChunk, frames.size() - i);
    for (std::size_t k = 0; k < m; ++k) {
      const TxFrame& f = frames[i + k];
      iovec* v = &iov[3 * k];
      std::size_t nv = 0;
      if (vnet) v[nv++] = iovec{const_cast<VnetHdr*>(&kNoVnet), sizeof kNoVnet};
      v[nv++] = iovec{const_cast<std::uint8_t*>(f.hdr), f.hdr_len};
      v[nv++] = iovec{const_cast<std::uint8_t*>(f.data), f.len};
      msgs[k] = mmsghdr{};
      msgs[k].msg_hdr.msg_iov = v;
      msgs[k].msg_hdr.msg_iovlen = nv;
    }
    std::size_t off = 0;
    bool waited = false;
    while (off < m) {
      const int r = sendmmsg(fd, &msgs[off], static_cast<unsigned>(m - off), 0);
      if (r > 0) {
        for (std::size_t j = off; j < off + static_cast<std::size_t>(r); ++j) {
          bump(counters.tx_packets);
          bump(counters.tx_bytes, frames[i + j].len);
        }
        off += static_cast<std::size_t>(r);
        waited = false;
        continue;
      }
      if (errno == EINTR) continue;
      if (errno == EAGAIN && wait_for_room(fd, waited)) continue;
      if (errno == EAGAIN || errno == ENOBUFS) {
        bump(counters.tx_dropped);  // the device queue is full: lost, like on a wire
      } else {
        bump(counters.tx_errors);
      }
      ++off;
    }
  }
}

bool send_udp_gso(int fd, const std::uint8_t* hdr, std::size_t hdr_len,
                  std::span<const TxFrame> segs, std::uint16_t seg_size, AtomicCounters& counters) {
  if (segs.empty() || segs.size() > kSendChunk) return false;
  // The kernel completes each segment's UDP checksum from the pseudo-header sum in `hdr`
  // (VIRTIO_NET_HDR_F_NEEDS_CSUM: required with UDP GSO).
  VnetHdr vh{};
  vh.flags = kVnetNeedsCsum;
  vh.gso_type = kVnetGsoUdpL4;
  vh.hdr_len = static_cast<std::uint16_t>(hdr_len);
  vh.gso_size = seg_size;
  vh.csum_start = static_cast<std::uint16_t>(hdr_len - wire::kUdpLen);
  vh.csum_offset = 6;  // the UDP checksum field
  std::array<iovec, 2 + kSendChunk> v{};
  v[0] = iovec{&vh, sizeof vh};
  v[1] = iovec{const_cast<std::uint8_t*>(hdr), hdr_len};
  std::uint64_t bytes = 0;
  for (std::size_t k = 0; k < segs.size(); ++k) {
    v[2 + k] = iovec{const_cast<std::uint8_t*>(segs[k].data), segs[k].len};
    bytes += segs[k].len;
  }
  const int err = send_iov(fd, v.data(), 2 + segs.size());
  if (err == EINVAL || err == EOPNOTSUPP || err == EPROTONOSUPPORT) return false;
  if (err == EAGAIN || err == ENOBUFS) {
    bump(counters.tx_dropped, segs.size());  // the device queue is full: lost, like on a wire
  } else if (err != 0) {
    bump(counters.tx_errors, segs.size());
  } else {
    bump(counters.tx_packets, segs.size());
    bump(counters.tx_bytes, bytes);
  }
  return true;
}

bool send_tcp_gso(int fd, const std::uint8_t* frame, std::size_t len, std::uint16_t mss,
                  std::optional<std::uint16_t> vlan_tci, AtomicCounters& counters) {
  // Untagged, IPv4 without options or IPv6 without extension headers; on a VLAN the tag goes in
  // after the addresses (and the offsets move by its length).
  const bool v6 = len >= 14 && wire::load16(frame + 12) == wire::kEthertypeIpv6;
  const std::size_t tcp_at = v6 ? 14 + 40 : 14 + 20;
  if (len < tcp_at + 20) return false;
  const std::size_t tag = vlan_tci ? wire::kVlanTagLen : 0;
  VnetHdr vh{};
  vh.flags = kVnetNeedsCsum;
  vh.gso_type = v6 ? kVnetGsoTcpv6 : kVnetGsoTcpv4;
  vh.hdr_len = static_cast<std::uint16_t>(tag + tcp_at + (frame[tcp_at + 12] >> 4) * 4);
  vh.gso_size = mss;
  vh.csum_start = static_cast<std::uint16_t>(tag + tcp_at);
  vh.csum_offset = 16;  // the TCP checksum field
  const auto vlan = wire::vlan_tag(vlan_tci.value_or(0));
  auto* f = const_cast<std::uint8_t*>(frame);
  std::array<iovec, 4> v{iovec{&vh, sizeof vh}, iovec{f, 12},
                         iovec{const_cast<std::uint8_t*>(vlan.data()), tag},
                         iovec{f + 12, len - 12}};
  const int err = send_iov(fd, v.data(), v.size());
  if (err == EAGAIN || err == ENOBUFS) {
    bump(counters.tx_dropped);  // the device queue is full: lost, like on a wire
    return true;
  }
  if (err != 0) {
    bump(counters.tx_errors);
    return false;
  }
  bump(counters.tx_packets, (len + tag - vh.hdr_len + mss - 1) / mss);
  bump(counters.tx_bytes, len + tag);
  return true;
}

bool send_whole_frame(int fd, const std::uint8_t* frame, std::size_t len) {
  VnetHdr none{};
  std::array<iovec, 2> v{iovec{&none, sizeof none}, iovec{const_cast<std::uint8_t*>(frame), len}};
  return send_iov(fd, v.data(), v.size()) == 0;
}

int send_iov(int fd, iovec* v, std::size_t n) {
  msghdr h{};
  h.msg_iov = v;
  h.msg_iovlen = n;
  bool waited = false;
  for (;;) {
    if (sendmsg(fd, &h, 0) >= 0) return 0;
    if (errno == EINTR) continue;
    if (errno == EAGAIN && wait_for_room(fd, waited)) continue;
    return errno;
  }
}

bool wait_for_room(int fd, bool& waited) {
  if (waited) return false;
  pollfd pfd{fd, POLLOUT, 0};
  poll(&pfd, 1, kSendWaitMs);
  waited = true;
  return true;
}

}  // namespace softrdma::netdev
