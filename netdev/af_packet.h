// AF_PACKET backend: RoCEv2 over a named Ethernet interface through a raw packet socket. Frames
// are built by RawEthNetdev and sent through a second packet socket with a virtio_net_hdr, each
// run of equal-sized datagrams to one neighbour as a UDP GSO frame that the kernel or the NIC
// cuts (without vnet headers: one frame each, PACKET_QDISC_BYPASS); they are received through a
// TPACKET_V2 mmap ring behind a classic BPF filter that takes only UDP to port 4791 for our
// address, and ARP (IPv4) or ICMPv6 (IPv6) for it; every other frame is left to the kernel (a
// packet socket only gets copies).
//
// Neighbours: our cache, else the kernel's table, else an ARP request or neighbour solicitation
// we send ourselves; the answer (or a request for our address) fills the cache (NeighbourTable).
// We answer ARP requests for our address only when the address is configured on no interface;
// when it is (the usual case) the kernel answers them.
//
// Steering kTcp opens the same link for a userspace TCP (lwtcp/) instead: the filter takes TCP
// and ARP (IPv6: TCP, fragments and neighbour discovery) for `local`, an address no interface
// holds (so the kernel neither answers nor resets our connections), and the frames go whole
// through FramePort; kTcpShared, the same on an address the kernel holds too.
#pragma once

#include <linux/if_packet.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "netdev/raw_frame_port.h"
#include "netdev/vnet_header.h"

namespace softrdma::netdev {

class AfPacketNetdev : public RawFramePortNetdev {
 public:
  using Steering = netdev::Steering;
  // The first IPv4 address configured on `ifname` (getifaddrs); false with `error` set when the
  // interface does not exist or has none.
  static bool interface_ipv4(const std::string& ifname, IpAddr& out, std::string& error);

  // Opens a packet socket on `ifname` for `local` (IPv4 or IPv6, normally an address configured
  // on the interface), tagging sent frames with `vlan_tci` when given. nullptr with `error` set,
  // e.g. "af_packet:veth0: no such interface" or "af_packet:veth0: socket: Operation not
  // permitted (needs CAP_NET_RAW)". Also holds local:4791 in the kernel's UDP stack.
  static std::unique_ptr<AfPacketNetdev> open(const std::string& ifname, IpAddr local,
                                              std::string& error, FaultConfig faults = {},
                                              std::optional<std::uint16_t> vlan_tci = {},
                                              Steering steer = Steering::kRoce);
  ~AfPacketNetdev() override;
  AfPacketNetdev(const AfPacketNetdev&) = delete;
  AfPacketNetdev& operator=(const AfPacketNetdev&) = delete;

  std::string name() const override { return "af_packet:" + link_.ifname; }
  std::string backend() const override { return "af_packet"; }
  // Takes frames from the ring (RawEthNetdev::take_frame).
  std::size_t recv_batch(std::span<Packet* const> pkts) override;
  // The packet socket: readable when a ring block holds frames we have not read.
  int wait_fd() const override { return fd_; }

  const std::string& ifname() const { return link_.ifname; }

  // FramePort (Steering::kTcp).
  int frame_fd() const override { return fd_; }
  std::size_t recv_frames(const FrameSink& sink, std::size_t max) override;
  // Steering kTcp: a virtio_net_hdr asking for TCPv4 segmentation (GSO), through a second
  // packet socket that goes through the device's queue (the kernel cuts what the device can't).
  bool tcp_segmentation() const override { return gso_fd_ >= 0; }
  bool send_tcp_segments(const std::uint8_t* frame, std::size_t len, std::uint16_t mss) override;
  // RoCE: runs of datagrams as UDP GSO frames through the offload socket.
  bool udp_segmentation() const override { return udp_gso_; }
  bool put_udp_segments(const std::uint8_t* hdr, std::span<const TxFrame> segs,
                        std::uint16_t seg_size) override;
  // tcp_ring_dropped: frames the ring had no room for (a flood faster than the stack reads).
  std::vector<std::pair<std::string, std::uint64_t>> frame_counters() override;

 protected:
  void put_frames(std::span<const TxFrame> frames) override;
  bool put_frame(const std::uint8_t* frame, std::size_t len) override;

 private:
  AfPacketNetdev() = default;
  // A frame as the ring gives it: in its slot, or read whole from the socket's queue.
  struct SlotFrame {
    std::uint8_t* data = nullptr;
    std::uint32_t len = 0;
    VnetHdr vnet{};  // its virtio_net_hdr (all zero, no offload, when frames carry none)
  };
  tpacket2_hdr* next_slot() const;  // the slot read next, when the kernel has filled it
  // The frame of slot `h` (TP_STATUS_COPY: read from the socket once, kept until released);
  // false when it is lost (a counted drop).
  bool slot_frame(tpacket2_hdr* h, SlotFrame& f);
  void release_frame(tpacket2_hdr* h);  // back to the kernel; counts the ring's drops now and then
  void count_ring_drops();              // adds the kernel's count of ring drops to rx_dropped

  int fd_ = -1;
  std::uint8_t* ring_ = nullptr;
  std::size_t ring_size_ = 0;
  std::uint32_t slot_size_ = 0, slots_ = 0;  // sized for the link's MTU

  // Receive state (one receiving thread at a time): the slot read next, and the frame larger
  // than a slot read for it from the socket (copy_len_ bytes; 0: none read yet).
  std::uint32_t frame_ = 0;
  std::vector<std::uint8_t> copy_buf_;
  std::uint32_t copy_len_ = 0;
  std::uint64_t released_ = 0;
  bool vnet_ = false;  // frames carry a virtio_net_hdr (PACKET_VNET_HDR)
  // The socket offloaded frames leave through (TCP super-segments, UDP GSO frames) and, for
  // RoCE, every datagram frame (one socket keeps them in order).
  int gso_fd_ = -1;
  bool udp_gso_ = false;  // RoCE with gso_fd_, until the kernel refuses a UDP GSO frame
};

}  // namespace softrdma::netdev
