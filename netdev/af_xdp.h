// AF_XDP backend: RoCEv2 over a named Ethernet interface through an XDP socket (libxdp) on one
// receive queue, in zero-copy mode where the driver has it, else in copy mode (XDP_COPY, which
// veth and every driver support), with need_wakeup. An XDP program of our own
// (netdev/xdp/roce_redirect.bpf.c, embedded at build time, attached through a BPF link that goes
// away with the process) redirects UDP to our address (IPv4 or IPv6) and port 4791 into the socket
// and passes every other frame, ARP and ND included, to the kernel. Frames are built by
// RawEthNetdev and sent through the TX ring, or in copy mode through a packet socket (packet_tx.h:
// copy mode costs the kernel an skb and a copy per frame either way) with UDP GSO for RoCE, TCP
// GSO for a userspace TCP whose frames fit one chunk;
// neighbours come from the kernel's table, the kernel being asked to resolve
// (netlink NTF_USE) when it has no entry, since ARP replies and advertisements go to it. Needs
// CAP_NET_ADMIN and CAP_BPF (root); one AF_XDP device per interface (one XDP program). A UMEM chunk
// is 4096 bytes: with multi-buffer sockets (Linux 6.6) a frame spans up to three chunks (the MTU
// offered is at most 12 KiB less the Ethernet header), otherwise one. Built only when libxdp,
// libbpf and clang are found (SOFTRDMA_HAVE_AF_XDP is then defined).
//
// Steering kTcp opens the link for a userspace TCP (lwtcp/) instead: the XDP program takes TCP
// and ARP (IPv6: neighbour discovery) for `local`, an address no interface holds, and the frames
// go whole through FramePort; the kernel never sees them, so it neither answers nor resets our
// connections, and every other flow (TCP to the kernel's own addresses included) stays with it.
// On a veth, with multi-buffer sockets, the program then runs in generic (skb) mode: a native
// program on a veth turns its peer's segmentation offloads off and runs in the sender's softirq,
// which then cut every super-segment and paid for each piece's XDP copy; in generic mode the
// peer's super-segments stay whole, and one of up to 64 KiB reaches the socket in up to 17
// chunks. A NIC keeps native mode (generic mode would copy the kernel's own GRO packets).
// RoCE on a veth runs in generic mode the same way: a peer's UDP GSO frame then arrives whole,
// without its segment size, which take_frame's caller finds from the datagrams themselves
// (uncut_segment_size, netdev/gso_frame.h) and cuts as AF_PACKET cuts the frames it is told of.
// Steering kTcpShared (an address the kernel holds too): the program takes only TCP to `local`
// and to the ports steer_tcp_port marked.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "netdev/raw_frame_port.h"

namespace softrdma::netdev {

class AfXdpNetdev : public RawFramePortNetdev {
 public:
  // Opens an XDP socket on queue `queue` of `ifname` for `local` (an IPv4 or IPv6 address
  // configured on the interface), tagging frames with `vlan_tci` when given. nullptr with `error`
  // set, e.g. "af_xdp:veth0: loading the XDP program: Operation not permitted (needs CAP_BPF and
  // CAP_NET_ADMIN)".
  static std::unique_ptr<AfXdpNetdev> open(const std::string& ifname, IpAddr local,
                                           std::string& error, FaultConfig faults = {},
                                           std::optional<std::uint16_t> vlan_tci = {},
                                           std::uint32_t queue = 0,
                                           Steering steer = Steering::kRoce);
  ~AfXdpNetdev() override;
  AfXdpNetdev(const AfXdpNetdev&) = delete;
  AfXdpNetdev& operator=(const AfXdpNetdev&) = delete;

  std::string name() const override { return "af_xdp:" + link_.ifname; }
  std::string backend() const override { return "af_xdp"; }
  // Takes frames from the RX ring and gives their chunks back to the fill ring.
  std::size_t recv_batch(std::span<Packet* const> pkts) override;
  // The XDP socket: readable when the RX ring holds frames (polling it also wakes the kernel).
  int wait_fd() const override { return fd_; }
  // Whether the socket is in zero-copy mode (the driver's own), else copy mode (veth, generic XDP).
  bool zero_copy() const { return zero_copy_; }
  // Whether frames may span several chunks (XDP_USE_SG), and so the MTU exceed one chunk.
  bool multi_buffer() const { return multi_buffer_; }

  // FramePort (Steering::kTcp).
  int frame_fd() const override { return fd_; }
  std::size_t recv_frames(const FrameSink& sink, std::size_t max) override;
  // Steering kTcpShared: marks `port` in the XDP program's tcp_ports (its segments come here,
  // the rest of the address's go to the kernel).
  bool steer_tcp_port(std::uint16_t port, bool ours) override;
  // Between them, frames wait in the TX ring and one kick sends them all (unless the ring fills);
  // in copy mode they wait here and leave through the packet socket in one sendmmsg.
  void hold_sends() override;
  bool tcp_large_segments() const override { return true; }
  void release_sends() override;
  bool send_frame(const std::uint8_t* frame, std::size_t len) override;
  // Copy mode: super-segments leave through the packet socket as TCP GSO frames, cut by the
  // kernel (packet_tx.h); in zero-copy mode the stack cuts them and they take the TX ring.
  bool tcp_segmentation() const override { return tcp_gso_; }
  bool send_tcp_segments(const std::uint8_t* frame, std::size_t len, std::uint16_t mss) override;
  // RoCE in copy mode: frames leave through a packet socket (packet_tx.h), runs of datagrams as
  // UDP GSO frames; in zero-copy mode through the TX ring.
  bool udp_segmentation() const override { return udp_gso_; }
  bool put_udp_segments(const std::uint8_t* hdr, std::span<const TxFrame> segs,
                        std::uint16_t seg_size) override;
  // tcp_ring_dropped: frames the kernel dropped for want of room in the RX or fill ring.
  std::vector<std::pair<std::string, std::uint64_t>> frame_counters() override;
  // rx_dropped includes the frames the kernel dropped for want of room in the RX or fill ring.
  Counters counters() const override;

 protected:
  void put_frames(std::span<const TxFrame> frames) override;
  bool put_frame(const std::uint8_t* frame, std::size_t len) override;

 private:
  struct Xsk;  // libxdp/libbpf state
  AfXdpNetdev();
  // Copies the frames into TX chunks and has the kernel send them; returns how many (a prefix)
  // found a chunk and a ring slot.
  std::size_t push(std::span<const TxFrame> frames);
  // Takes back the chunks of sent frames (tx_mu_ held).
  void reclaim();
  // Makes the kernel send what the TX ring holds (tx_mu_ held).
  void kick();
  // Frames the kernel dropped at our socket so far: RX ring full, or no chunk in the fill ring.
  std::uint64_t ring_drops() const;
  // Gives received chunks back to the fill ring.
  void refill();
  // Hands the frames of up to `max` RX descriptors to `take` (frame, length; a multi-buffer
  // frame gathered into rx_frame_ first) until it returns false, gives their chunks back and
  // wakes the kernel when it waits for chunks; returns how many frames were taken.
  std::size_t drain_rx(std::size_t max,
                       const std::function<bool(std::uint8_t*, std::uint32_t)>& take);
  // Turns a received frame into packets from pkts[n] on (a whole UDP GSO frame into one a
  // segment); returns the new n. A frame whose segments outnumber the packets left waits in
  // rx_frame_ (cut_len_) for the next recv_batch.
  std::size_t take_datagrams(std::uint8_t* frame, std::uint32_t len, std::span<Packet* const> pkts,
                             std::size_t n);

  std::unique_ptr<Xsk> x_;
  int fd_ = -1;
  bool zero_copy_ = false;
  bool multi_buffer_ = false;
  std::uint32_t max_frame_ = 0;         // bytes sent: one chunk, or three with multi-buffer
  std::vector<std::uint8_t> rx_frame_;  // a multi-buffer frame being gathered (max_frame_, or
                                        // a 64 KiB super-segment in generic mode)
  std::size_t rx_frame_len_ = 0;        // its bytes so far (beyond rx_frame_: dropped)
  bool cut_whole_ = false;              // RoCE in generic mode: frames may be whole UDP GSO frames
  std::uint32_t cut_len_ = 0;           // a whole frame in rx_frame_ with segments still to take
  std::uint32_t cut_size_ = 0;          // and its segment size
  std::mutex tx_mu_;                    // one TX ring: senders take turns
  std::vector<std::uint64_t> fill_pending_;  // received chunks not yet back in the fill ring
  std::vector<std::uint64_t> tx_free_;       // free TX chunks (addresses in the UMEM)
  std::uint32_t tx_outstanding_ = 0;         // submitted, not yet completed
  bool tx_held_ = false;                     // hold_sends(): no kick until release_sends()
  int gso_fd_ = -1;                          // copy mode: the packet socket frames leave by
  bool udp_gso_ = false;                     // until the kernel refuses a UDP GSO frame
  bool tcp_gso_ = false;                     // a userspace TCP's frames take gso_fd_ (copy mode)
  static constexpr std::size_t kHeldFrames = 64;
  std::vector<std::pair<std::size_t, std::size_t>> held_;  // frames held (offset, length)
  std::vector<std::uint8_t> held_bytes_;                   // their bytes, tags put in
  std::vector<std::uint8_t> vlan_scratch_;
  // Sends the held frames through gso_fd_ (tx_mu_ held).
  void send_held();
};

}  // namespace softrdma::netdev
