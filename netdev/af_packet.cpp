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
#include <bit>
#include <cerrno>
#include <cstring>

#include "netdev/packet_tx.h"
#include "netdev/vnet_header.h"
#include "wire/bytes.h"
#include "wire/net.h"

namespace softrdma::netdev {

namespace {

// The receive ring: TPACKET_V2, one frame per slot, each handed over as soon as it is written
// (TPACKET_V3's blocks wait to fill or for their timeout, a millisecond at least: ib_write_lat
// 2 B across a veth pair was 535-540 µs average). A slot holds a frame of the link's MTU, as a
// NIC delivers them one by one: 8192 slots at MTU 1500, 1024 at 9000 (with slots sized for a
// veth's 64 KiB GSO frames the ring held 256 frames, and a peer sending MTU-sized frames overran
// it). Larger frames (a veth's UDP GSO frames, GRO'd TCP) are cut short in their slot, marked
// TP_STATUS_COPY, and queued whole on the socket (PACKET_COPY_THRESH), whose buffer holds
// kCopyQueueBytes of them; a frame neither fits is a counted ring drop.
constexpr std::size_t kRingBytes = std::size_t{16} << 20;
constexpr std::uint32_t kBlockSize = 64 * 1024;
constexpr int kCopyQueueBytes = 32 << 20;
constexpr std::size_t kCopyMax = 256 * 1024;  // a GSO frame (BIG TCP included) and its vnet header
// The slot for frames of `mtu`: the TPACKET2 header and address (80 bytes, aligned), the
// virtio_net_hdr, an Ethernet header with a VLAN tag, and the IP packet; a power of two.
std::uint32_t slot_size(std::uint32_t mtu) {
  return std::bit_ceil(std::max<std::uint32_t>(mtu, 576) + 128);
}
constexpr std::size_t kVnetHdrLen = sizeof(VnetHdr);

bool setopt(int fd, int level, int name, int value) {
  return setsockopt(fd, level, name, &value, sizeof value) == 0;
}

// The IPv4 part of the filter: UDP to `ip`:4791 (not a fragment), or ARP whose target protocol
// address is `ip`. Offsets are from the Ethernet header. Ends with accept, reject.
std::vector<sock_filter> filter4(std::uint32_t ip) {
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

// A classic BPF instruction whose jumps name their targets by index; assemble() turns them into
// offsets.
struct Insn {
  std::uint16_t code;
  std::uint32_t k;
  std::uint8_t jt, jf;  // absolute targets (0: the next instruction)
};

std::vector<sock_filter> assemble(const std::vector<Insn>& prog) {
  std::vector<sock_filter> f;
  for (std::size_t i = 0; i < prog.size(); ++i) {
    const Insn& in = prog[i];
    auto off = [i](std::uint8_t target) {
      return static_cast<std::uint8_t>(target == 0 ? 0 : target - i - 1);
    };
    f.push_back(sock_filter{in.code, off(in.jt), off(in.jf), in.k});
  }
  return f;
}

// The IPv4 filter of the TCP steering (a userspace TCP above us, on an address the kernel does
// not hold): TCP to `ip` (fragments too: the stack reassembles), or ARP whose target protocol
// address is `ip`. Ends with accept, reject.
std::vector<sock_filter> filter4_tcp(std::uint32_t ip) {
  enum : std::uint8_t { kArp = 7, kAccept = 9, kReject = 10 };
  return assemble({
      {BPF_LD | BPF_H | BPF_ABS, 12, 0, 0},                        // 0: ethertype
      {BPF_JMP | BPF_JEQ | BPF_K, ETH_P_ARP, kArp, 0},             // 1
      {BPF_JMP | BPF_JEQ | BPF_K, ETH_P_IP, 0, kReject},           // 2
      {BPF_LD | BPF_W | BPF_ABS, 30, 0, 0},                        // 3: IPv4 destination
      {BPF_JMP | BPF_JEQ | BPF_K, ip, 0, kReject},                 // 4
      {BPF_LD | BPF_B | BPF_ABS, 23, 0, 0},                        // 5: protocol
      {BPF_JMP | BPF_JEQ | BPF_K, IPPROTO_TCP, kAccept, kReject},  // 6
      {BPF_LD | BPF_W | BPF_ABS, 38, 0, 0},                        // 7: ARP target IP
      {BPF_JMP | BPF_JEQ | BPF_K, ip, kAccept, kReject},           // 8
      {BPF_RET | BPF_K, 0x40000, 0, 0},                            // 9: accept
      {BPF_RET | BPF_K, 0, 0, 0},                                  // 10: reject
  });
}

// The IPv6 part, to `ip` (no extension headers before UDP): for RoCE UDP to port 4791 and ICMPv6
// (neighbour discovery); for the TCP steering (`tcp`) TCP, fragments and ICMPv6. Either way also
// ICMPv6 to the address's solicited-node group. Ends with accept, reject.
std::vector<sock_filter> filter6(const IpAddr& ip, bool tcp) {
  std::array<std::uint32_t, 4> w{};
  for (std::size_t i = 0; i < 4; ++i) w[i] = wire::load32(ip.bytes.data() + 4 * i);
  constexpr std::uint8_t kIcmp6 = 58, kFragment = 44;
  constexpr std::uint8_t kOurs = 11;  // the first instruction once the address matched
  const auto solicited = static_cast<std::uint8_t>(kOurs + (tcp ? 3 : 4));
  const auto accept = static_cast<std::uint8_t>(solicited + 9);
  const auto reject = static_cast<std::uint8_t>(accept + 1);
  std::vector<Insn> prog = {
      {BPF_LD | BPF_H | BPF_ABS, 12, 0, 0},                // 0: ethertype
      {BPF_JMP | BPF_JEQ | BPF_K, ETH_P_IPV6, 0, reject},  // 1
      {BPF_LD | BPF_W | BPF_ABS, 38, 0, 0},                // 2: destination
      {BPF_JMP | BPF_JEQ | BPF_K, w[0], 0, solicited},     // 3
      {BPF_LD | BPF_W | BPF_ABS, 42, 0, 0},                // 4
      {BPF_JMP | BPF_JEQ | BPF_K, w[1], 0, reject},        // 5
      {BPF_LD | BPF_W | BPF_ABS, 46, 0, 0},                // 6
      {BPF_JMP | BPF_JEQ | BPF_K, w[2], 0, reject},        // 7
      {BPF_LD | BPF_W | BPF_ABS, 50, 0, 0},                // 8
      {BPF_JMP | BPF_JEQ | BPF_K, w[3], 0, reject},        // 9
      {BPF_LD | BPF_B | BPF_ABS, 20, 0, 0},                // 10: next header
  };
  if (tcp) {  // 11-13
    prog.push_back({BPF_JMP | BPF_JEQ | BPF_K, IPPROTO_TCP, accept, 0});
    prog.push_back({BPF_JMP | BPF_JEQ | BPF_K, kFragment, accept, 0});
    prog.push_back({BPF_JMP | BPF_JEQ | BPF_K, kIcmp6, accept, reject});
  } else {  // 11-14
    prog.push_back({BPF_JMP | BPF_JEQ | BPF_K, IPPROTO_UDP, 0, kOurs + 3});
    prog.push_back({BPF_LD | BPF_H | BPF_ABS, 56, 0, 0});  // UDP destination port
    prog.push_back({BPF_JMP | BPF_JEQ | BPF_K, kRoceV2Port, accept, reject});
    prog.push_back({BPF_JMP | BPF_JEQ | BPF_K, kIcmp6, accept, reject});
  }
  const std::vector<Insn> group = {
      {BPF_JMP | BPF_JEQ | BPF_K, 0xFF020000, 0, reject},  // solicited: ff02::1:ffXX:XXXX
      {BPF_LD | BPF_W | BPF_ABS, 42, 0, 0},
      {BPF_JMP | BPF_JEQ | BPF_K, 0, 0, reject},
      {BPF_LD | BPF_W | BPF_ABS, 46, 0, 0},
      {BPF_JMP | BPF_JEQ | BPF_K, 1, 0, reject},
      {BPF_LD | BPF_W | BPF_ABS, 50, 0, 0},
      {BPF_JMP | BPF_JEQ | BPF_K, 0xFF000000 | (w[3] & 0xFFFFFF), 0, reject},
      {BPF_LD | BPF_B | BPF_ABS, 20, 0, 0},  // next header
      {BPF_JMP | BPF_JEQ | BPF_K, kIcmp6, accept, reject},
      {BPF_RET | BPF_K, 0x40000, 0, 0},  // accept
      {BPF_RET | BPF_K, 0, 0, 0},        // reject
  };
  prog.insert(prog.end(), group.begin(), group.end());
  return assemble(prog);
}

// The classic BPF program: frames of our VLAN (the kernel has moved the tag out of the frame;
// untagged when we have none) that filter4 or filter6 takes.
std::vector<sock_filter> make_filter(const IpAddr& local, std::optional<std::uint16_t> vlan_tci,
                                     AfPacketNetdev::Steering steer) {
  const bool tcp = steers_tcp(steer);
  const std::vector<sock_filter> f =
      local.is_v4() ? (tcp ? filter4_tcp(local.v4_host()) : filter4(local.v4_host()))
                    : filter6(local, tcp);
  // Before it, the VLAN test; a failed one jumps to the final reject.
  constexpr std::uint32_t kTagPresent = SKF_AD_OFF + SKF_AD_VLAN_TAG_PRESENT;
  constexpr std::uint32_t kTag = SKF_AD_OFF + SKF_AD_VLAN_TAG;
  std::vector<sock_filter> vlan = {BPF_STMT(BPF_LD | BPF_W | BPF_ABS, kTagPresent),
                                   BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, vlan_tci ? 1u : 0u, 0, 0)};
  if (vlan_tci) {
    vlan.push_back(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, kTag));
    vlan.push_back(BPF_STMT(BPF_ALU | BPF_AND | BPF_K, 0xFFF));
    vlan.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, *vlan_tci & 0xFFFu, 0, 0));
  }
  const std::size_t reject = vlan.size() + f.size() - 1;
  for (std::size_t i = 0; i < vlan.size(); ++i) {
    if (BPF_CLASS(vlan[i].code) == BPF_JMP) vlan[i].jf = static_cast<std::uint8_t>(reject - i - 1);
  }
  vlan.insert(vlan.end(), f.begin(), f.end());
  return vlan;
}

}  // namespace

bool AfPacketNetdev::interface_ipv4(const std::string& ifname, IpAddr& out, std::string& error) {
  return netdev::interface_ipv4("af_packet:" + ifname, ifname, out, error);
}

std::unique_ptr<AfPacketNetdev> AfPacketNetdev::open(const std::string& ifname, IpAddr local,
                                                     std::string& error, FaultConfig faults,
                                                     std::optional<std::uint16_t> vlan_tci,
                                                     Steering steer) {
  std::unique_ptr<AfPacketNetdev> d(new AfPacketNetdev());
  const std::string where = "af_packet:" + ifname;
  if (steer == Steering::kTcp && !interface_with(local).empty()) {
    // The kernel would answer our segments with resets: without held ports (kTcpShared), a
    // userspace TCP needs an address of its own.
    error = where + ": a userspace TCP needs an address no interface holds, not " + local.str();
    return nullptr;
  }
  auto fail = [&](const std::string& what) {
    const int e = errno;
    error = where + ": " + what + std::strerror(e);
    if (e == EPERM) error += " (needs CAP_NET_RAW)";
    return nullptr;
  };
  if (!read_link(where, ifname, d->link_, error)) return nullptr;
  d->link_.vlan_tci = vlan_tci;

  // Opened with protocol 0: nothing is queued until the filter and ring are in place and bind()
  // names the protocol.
  d->fd_ = socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (d->fd_ < 0) return fail("socket: ");
  const int fd = d->fd_;
  std::vector<sock_filter> filter = make_filter(local, vlan_tci, steer);
  sock_fprog prog{static_cast<unsigned short>(filter.size()), filter.data()};
  if (setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof prog) != 0) {
    return fail("SO_ATTACH_FILTER: ");
  }
  // A virtio_net_hdr before each frame tells us the segment size of a UDP GSO frame: over veth
  // a UDP socket's GSO datagrams arrive unsegmented, several RoCEv2 packets in one frame.
  d->vnet_ = setopt(fd, SOL_PACKET, PACKET_VNET_HDR, 1);
  if (!setopt(fd, SOL_PACKET, PACKET_VERSION, TPACKET_V2)) return fail("TPACKET_V2: ");
  d->slot_size_ = slot_size(d->link_.mtu);
  const std::uint32_t block = std::max(kBlockSize, d->slot_size_);
  tpacket_req req{};
  req.tp_block_size = block;
  req.tp_block_nr = static_cast<unsigned>(kRingBytes / block);
  req.tp_frame_size = d->slot_size_;
  req.tp_frame_nr = req.tp_block_nr * (block / d->slot_size_);
  if (setsockopt(fd, SOL_PACKET, PACKET_RX_RING, &req, sizeof req) != 0) {
    return fail("PACKET_RX_RING: ");
  }
  d->slots_ = req.tp_frame_nr;
  d->ring_size_ = std::size_t{block} * req.tp_block_nr;
  // Frames larger than a slot: whole on the socket's queue (root may go past rmem_max).
  if (!setopt(fd, SOL_PACKET, PACKET_COPY_THRESH, 1)) return fail("PACKET_COPY_THRESH: ");
  if (!setopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, kCopyQueueBytes)) {
    setopt(fd, SOL_SOCKET, SO_RCVBUF, kCopyQueueBytes);
  }
  d->copy_buf_.resize(kCopyMax);
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
  sll.sll_ifindex = d->link_.ifindex;
  if (bind(fd, reinterpret_cast<sockaddr*>(&sll), sizeof sll) != 0) return fail("bind: ");
  if (d->vnet_) {
    // Offloaded frames leave through a socket of their own (packet_tx.h).
    d->gso_fd_ = open_offload_socket(d->link_.ifindex);
    d->udp_gso_ = d->gso_fd_ >= 0 && steer == Steering::kRoce;
  }

  NeighbourTable::Config nc;
  nc.answer_arp = interface_with(local).empty();
  nc.resolver = NeighbourTable::Resolver::kOwnArp;
  d->vlan_checked_below_ = true;  // by the filter: the ring's frames have lost their tag
  if (!d->start(where, local, nc, faults, error, steer == Steering::kRoce)) return nullptr;
  return d;
}

AfPacketNetdev::~AfPacketNetdev() {
  flush_faults();
  if (ring_) munmap(ring_, ring_size_);
  if (fd_ >= 0) close(fd_);
  if (gso_fd_ >= 0) close(gso_fd_);
}

void AfPacketNetdev::put_frames(std::span<const TxFrame> frames) {
  // RoCE frames go through the offload socket when there is one, in order with its UDP GSO
  // frames; with PACKET_VNET_HDR every send starts with a virtio_net_hdr (all zero: no offload).
  if (udp_gso_) {
    netdev::send_frames(gso_fd_, true, frames, counters_);
  } else {
    netdev::send_frames(fd_, vnet_, frames, counters_);
  }
}

bool AfPacketNetdev::put_frame(const std::uint8_t* frame, std::size_t len) {
  VnetHdr none{};
  std::array<iovec, 2> v{};
  std::size_t k = 0;
  if (vnet_) v[k++] = iovec{&none, sizeof none};
  v[k++] = iovec{const_cast<std::uint8_t*>(frame), len};
  msghdr h{};
  h.msg_iov = v.data();
  h.msg_iovlen = k;
  ssize_t r;
  do {
    r = sendmsg(fd_, &h, 0);
  } while (r < 0 && errno == EINTR);
  return r >= 0;
}

bool AfPacketNetdev::send_tcp_segments(const std::uint8_t* frame, std::size_t len,
                                       std::uint16_t mss) {
  return gso_fd_ >= 0 && send_tcp_gso(gso_fd_, frame, len, mss, link_.vlan_tci, counters_);
}

bool AfPacketNetdev::put_udp_segments(const std::uint8_t* hdr, std::span<const TxFrame> segs,
                                      std::uint16_t seg_size) {
  if (send_udp_gso(gso_fd_, hdr, hdr_len(), segs, seg_size, counters_)) return true;
  udp_gso_ = false;  // this kernel takes no UDP GSO from packet sockets
  return false;
}

tpacket2_hdr* AfPacketNetdev::next_slot() const {
  auto* h = reinterpret_cast<tpacket2_hdr*>(ring_ + std::size_t{frame_} * slot_size_);
  return (__atomic_load_n(&h->tp_status, __ATOMIC_ACQUIRE) & TP_STATUS_USER) ? h : nullptr;
}

bool AfPacketNetdev::slot_frame(tpacket2_hdr* h, SlotFrame& f) {
  std::uint8_t* base = reinterpret_cast<std::uint8_t*>(h);
  const std::uint8_t* vnet = nullptr;
  if (!(h->tp_status & TP_STATUS_COPY)) {
    if (h->tp_snaplen < h->tp_len) {  // larger than a slot and no room on the socket's queue
      bump(counters_.rx_dropped);
      return false;
    }
    f.data = base + h->tp_mac;
    f.len = h->tp_snaplen;
    if (vnet_ && h->tp_mac >= kVnetHdrLen) vnet = f.data - kVnetHdrLen;
  } else {
    // The whole frame is next on the socket's queue (queued before the slot was handed over).
    const std::size_t head = vnet_ ? kVnetHdrLen : 0;
    if (copy_len_ == 0) {
      ssize_t r;
      do {
        r = recv(fd_, copy_buf_.data(), copy_buf_.size(), MSG_DONTWAIT | MSG_TRUNC);
      } while (r < 0 && errno == EINTR);
      if (r < 0 || static_cast<std::size_t>(r) > copy_buf_.size() ||
          static_cast<std::size_t>(r) <= head) {
        bump(counters_.rx_malformed);
        return false;
      }
      copy_len_ = static_cast<std::uint32_t>(r);
    }
    f.data = copy_buf_.data() + head;
    f.len = copy_len_ - static_cast<std::uint32_t>(head);
    if (vnet_) vnet = copy_buf_.data();
  }
  f.vnet = VnetHdr{};
  if (vnet) std::memcpy(&f.vnet, vnet, kVnetHdrLen);
  return true;
}

void AfPacketNetdev::release_frame(tpacket2_hdr* h) {
  __atomic_store_n(&h->tp_status, TP_STATUS_KERNEL, __ATOMIC_RELEASE);
  frame_ = (frame_ + 1) % slots_;
  copy_len_ = 0;
  if (++released_ % 64 == 0) count_ring_drops();
}

void AfPacketNetdev::count_ring_drops() {
  tpacket_stats st{};
  socklen_t sl = sizeof st;
  if (getsockopt(fd_, SOL_PACKET, PACKET_STATISTICS, &st, &sl) == 0 && st.tp_drops > 0) {
    bump(counters_.rx_dropped, st.tp_drops);  // the ring was full (reading resets the count)
  }
}

std::vector<std::pair<std::string, std::uint64_t>> AfPacketNetdev::frame_counters() {
  count_ring_drops();
  return {{"tcp_ring_dropped", counters_.rx_dropped.load(std::memory_order_relaxed)}};
}

std::size_t AfPacketNetdev::recv_frames(const FrameSink& sink, std::size_t max) {
  std::size_t n = 0;
  while (n < max) {
    tpacket2_hdr* h = next_slot();
    if (!h) break;
    SlotFrame f;
    if (slot_frame(h, f)) {
      bool ok = true;
      const bool partial = (f.vnet.flags & kVnetNeedsCsum) != 0;
      if (partial) {  // the kernel left the checksum partial
        ok = complete_checksum(f.data, f.len, f.vnet.csum_start, f.vnet.csum_offset);
      }
      if (ok) {
        bump(counters_.rx_packets);
        bump(counters_.rx_bytes, f.len);
        sink(f.data, f.len, partial);
        ++n;
      } else {
        bump(counters_.rx_malformed);  // bad offload offsets
      }
    }
    release_frame(h);
  }
  return n;
}

std::size_t AfPacketNetdev::recv_batch(std::span<Packet* const> pkts) {
  std::size_t n = 0;
  while (n < pkts.size()) {
    tpacket2_hdr* h = next_slot();
    if (!h) break;
    SlotFrame f;
    if (!slot_frame(h, f)) {
      release_frame(h);
      continue;
    }
    const bool udp_gso = (f.vnet.gso_type & ~kVnetGsoEcn) == kVnetGsoUdpL4;
    const std::uint32_t gso_size = udp_gso ? f.vnet.gso_size : 0;
    bool more = false;
    if (take_frame(f.data, f.len, f.len, gso_size, *pkts[n], more)) ++n;
    if (more) continue;  // the next segment of this frame
    release_frame(h);
  }
  return n;
}

}  // namespace softrdma::netdev
