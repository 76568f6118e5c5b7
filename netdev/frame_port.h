// Whole Ethernet frames to and from a raw backend, for a network stack above it (the userspace
// TCP under iWARP, lwtcp/): the backend's link (interface, MAC, MTU) without its RoCE framing.
// Received frames come out with their checksums complete, and a segmentation-offload frame (a
// veth's TSO/GRO super-segment) whole, as one long TCP segment. Threads: send_frame from any
// thread; recv_frames from one thread at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "wire/net.h"

namespace softrdma::netdev {

// What a raw backend's filter or XDP program takes from the link: RoCEv2 (UDP 4791) for its
// RoCE device, or TCP and ARP for a userspace TCP: kTcp on an IPv4 address no interface holds
// (so the kernel neither answers nor resets its connections), kTcpShared on an address the
// kernel holds too (the stack holds its ports in the kernel, so that the kernel drops what
// comes to them, and leaves the frames of every other port to the kernel: af_packet and dpdk,
// whose frames the kernel still sees; not af_xdp, whose program would take them away).
enum class Steering : std::uint8_t { kRoce, kTcp, kTcpShared };
inline bool steers_tcp(Steering s) {
  return s != Steering::kRoce;
}

class FramePort {
 public:
  // `checksum_good`: the port completed the frame's TCP checksum itself (a partial one, left by
  // an offload on this host as the kernel hands it over), so it is right by construction and
  // needs no check; false: the frame's checksums are as they came.
  using FrameSink =
      std::function<void(const std::uint8_t* frame, std::uint32_t len, bool checksum_good)>;
  virtual ~FramePort() = default;
  // Readable (EPOLLIN) when frames wait.
  virtual int frame_fd() const = 0;
  // Hands up to `max` waiting frames to `sink`, in order (each valid during the call only);
  // returns how many.
  virtual std::size_t recv_frames(const FrameSink& sink, std::size_t max) = 0;
  // Sends one whole frame; false when the OS refused it (counted in tx_errors).
  virtual bool send_frame(const std::uint8_t* frame, std::size_t len) = 0;
  // Frames sent between hold_sends() and release_sends() may wait in the port and leave together
  // at release_sends() (one system call for many); a port that sends each at once ignores both.
  // From the sending thread, one pair at a time.
  virtual void hold_sends() {}
  virtual void release_sends() {}
  // Steering kTcpShared, where the port itself chooses the TCP ports it takes (af_xdp's
  // program): segments to `port` come to the port (`ours`) or stay the kernel's. True where the
  // port takes every TCP frame of the address anyway (af_packet, dpdk: the stack sorts them).
  virtual bool steer_tcp_port(std::uint16_t port, bool ours) {
    (void)port, (void)ours;
    return true;
  }
  // Whether send_tcp_segments works: segmentation offload for TCP over IPv4 and IPv6 on the port.
  virtual bool tcp_segmentation() const { return false; }
  // Whether a userspace TCP should build segments larger than the MTU for the port, to be cut
  // by its segmentation offload or, where it has none, by the stack before send_frame: true
  // where that was measured to pay (af_xdp's batched sends), not on dpdk (its af_packet PMD
  // lost the bursts, and bandwidth halved).
  virtual bool tcp_large_segments() const { return tcp_segmentation(); }
  // Sends an untagged TCP super-segment (IPv4 without options, IPv6 without extension headers;
  // on a VLAN the port puts the tag in) that the kernel or the NIC cuts into segments of `mss`
  // payload bytes (IPv4 IDs counting up from the frame's, PSH and FIN on the last only): its TCP
  // checksum field holds the pseudo-header sum over the whole TCP length, not complemented. False
  // when the OS refused it (counted in tx_errors).
  virtual bool send_tcp_segments(const std::uint8_t* frame, std::size_t len, std::uint16_t mss) {
    (void)frame, (void)len, (void)mss;
    return false;
  }
  virtual wire::MacAddr frame_mac() const = 0;
  virtual std::uint32_t frame_mtu() const = 0;  // the IP MTU
  // The 802.1Q tag (TCI) the port puts on every frame it sends and takes off every frame it hands
  // up, none without a VLAN: frames cross this interface untagged either way.
  virtual std::optional<std::uint16_t> frame_vlan() const { return std::nullopt; }
  // Milliseconds until the port has frames of its own to send (held by faults), -1 for none.
  virtual int frame_timeout_ms() { return -1; }
  // Named counters of the port's own (faults), for the stack's counters.
  virtual std::vector<std::pair<std::string, std::uint64_t>> frame_counters() { return {}; }
};

// Completes the transport checksum of a received frame the kernel left partial (a
// virtio_net_hdr with NEEDS_CSUM: the field holds the pseudo-header sum; `csum_start` and
// `csum_offset` from the frame's start), and the IPv4 header checksum of a super-segment.
// False when the offsets do not fit the frame (then it is malformed).
bool complete_checksum(std::uint8_t* frame, std::uint32_t len, std::uint16_t csum_start,
                       std::uint16_t csum_offset);

// Completes the TCP checksum of an untagged IPv4 or IPv6 frame whose field holds just the
// pseudo-header sum: what a sender on this host leaves to an offload when XDP takes the frame
// before anything could complete it (veth: the kernel trusts such frames, no wire being
// between). A field that holds anything else is left to be checked. Returns whether it completed
// one.
bool complete_partial_tcp(std::uint8_t* frame, std::uint32_t len);

}  // namespace softrdma::netdev
