#include "netdev/ipv4_header_view.h"

#include <arpa/inet.h>
#include <linux/filter.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "wire/bytes.h"
#include "wire/net.h"
#include "wire/roce_opcode.h"

#ifndef PACKET_IGNORE_OUTGOING
#define PACKET_IGNORE_OUTGOING 23
#endif

namespace softrdma::netdev {

namespace {
constexpr std::size_t kSnap = wire::kIpv4MinLen + wire::kUdpLen + wire::kBthLen;
}  // namespace

std::unique_ptr<Ipv4HeaderView> Ipv4HeaderView::open(const IpAddr& addr, std::uint16_t port) {
  if (!addr.is_v4()) return nullptr;
  // SOCK_DGRAM: the data starts at the IP header, whatever the link layer.
  const int fd = socket(AF_PACKET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, htons(ETH_P_IP));
  if (fd < 0) return nullptr;
  // IPv4, IHL 5, UDP, not a fragment, to addr:port; the first kSnap bytes only.
  sock_filter prog[] = {
      BPF_STMT(BPF_LD | BPF_B | BPF_ABS, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0x45, 0, 9),
      BPF_STMT(BPF_LD | BPF_B | BPF_ABS, 9),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 17, 0, 7),
      BPF_STMT(BPF_LD | BPF_H | BPF_ABS, 6),
      BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, 0x3FFF, 5, 0),  // MF or an offset
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 16),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, addr.v4_host(), 0, 3),
      BPF_STMT(BPF_LD | BPF_H | BPF_ABS, 22),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, port, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, kSnap),
      BPF_STMT(BPF_RET | BPF_K, 0),
  };
  sock_fprog fprog{static_cast<unsigned short>(std::size(prog)), prog};
  const int one = 1;
  const int rcvbuf = 1 << 20;  // about a thousand headers; find() drains it
  if (setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &fprog, sizeof fprog) != 0) {
    close(fd);
    return nullptr;
  }
  setsockopt(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof one);  // our own sends
  setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof rcvbuf);
  sockaddr_ll ll{};
  ll.sll_family = AF_PACKET;
  ll.sll_protocol = htons(ETH_P_IP);
  ll.sll_ifindex = 0;  // every interface: the filter picks our address
  if (bind(fd, reinterpret_cast<sockaddr*>(&ll), sizeof ll) != 0) {
    close(fd);
    return nullptr;
  }
  std::unique_ptr<Ipv4HeaderView> v(new Ipv4HeaderView);
  v->fd_ = fd;
  return v;
}

Ipv4HeaderView::~Ipv4HeaderView() {
  if (fd_ >= 0) close(fd_);
}

void Ipv4HeaderView::drain() {
  std::array<std::uint8_t, kSnap> b;
  for (std::size_t i = 0; i < kRecords; ++i) {
    sockaddr_ll from{};
    socklen_t fl = sizeof from;
    const ssize_t n =
        recvfrom(fd_, b.data(), b.size(), MSG_DONTWAIT, reinterpret_cast<sockaddr*>(&from), &fl);
    if (n < 0) return;
    if (static_cast<std::size_t>(n) < kSnap || from.sll_pkttype == PACKET_OUTGOING) continue;
    Record& r = ring_[next_];
    next_ = (next_ + 1) % kRecords;
    r.src = wire::load32(&b[12]);
    r.sport = wire::load16(&b[20]);
    r.udp_len = wire::load16(&b[24]);
    std::memcpy(r.bth.data(), &b[28], r.bth.size());
    r.id_flags = wire::Ipv4IdFlags{wire::load16(&b[4]), wire::load16(&b[6])};
    r.used = false;
  }
}

std::optional<wire::Ipv4IdFlags> Ipv4HeaderView::find(const Packet& p) {
  if (!p.src.is_v4() || p.len < wire::kBthLen) return std::nullopt;
  drain();
  const std::uint32_t src = p.src.v4_host();
  const auto udp_len = static_cast<std::uint16_t>(wire::kUdpLen + p.len);
  // Oldest first: datagrams are read in about the order their headers were seen.
  for (std::size_t k = 0; k < kRecords; ++k) {
    Record& r = ring_[(next_ + k) % kRecords];
    if (r.used || r.src != src || r.sport != p.src_port || r.udp_len != udp_len ||
        std::memcmp(r.bth.data(), p.data, r.bth.size()) != 0) {
      continue;
    }
    r.used = true;
    return r.id_flags;
  }
  return std::nullopt;
}

}  // namespace softrdma::netdev
