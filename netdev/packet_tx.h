// Sending Ethernet frames through packet sockets (AF_PACKET), for the raw backends: frames in
// pieces, and UDP GSO frames behind a virtio_net_hdr (PACKET_VNET_HDR) that the NIC's
// segmentation offload or the kernel cuts into datagrams. Counts into the device's counters.
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "netdev/netdev.h"

namespace softrdma::netdev {

// One frame to send, in two pieces: our headers and the datagram.
struct TxFrame {
  const std::uint8_t* hdr;
  std::uint32_t hdr_len;
  const std::uint8_t* data;
  std::uint32_t len;  // the datagram (counted in tx_bytes)
};

// A packet socket on interface `ifindex` for sending only (bound with protocol 0), with vnet
// headers, through the interface's queue: PACKET_QDISC_BYPASS would drop a GSO frame the device
// cannot segment, where the queue's path cuts it in software. -1 when the kernel refuses.
int open_offload_socket(int ifindex);

// Sends each frame through `fd` (behind an empty virtio_net_hdr when `vnet`), batched with
// sendmmsg, waiting briefly once for room; counts tx_packets and tx_bytes, and tx_dropped (a
// full queue, lost as on a wire) or tx_errors for the rest.
void send_frames(int fd, bool vnet, std::span<const TxFrame> frames, AtomicCounters& counters);

// Sends the datagrams of `segs` (`seg_size` bytes each, the last no longer; at most 64) as one
// UDP GSO frame behind `hdr` (hdr_len bytes ending with the UDP header, its checksum seeded with
// the pseudo-header sum) through the vnet socket `fd`; counts them. False when the kernel
// refused the frame as such (nothing sent or counted: it takes no UDP GSO from packet sockets).
bool send_udp_gso(int fd, const std::uint8_t* hdr, std::size_t hdr_len,
                  std::span<const TxFrame> segs, std::uint16_t seg_size, AtomicCounters& counters);

// Sends an untagged TCP super-segment (FramePort::send_tcp_segments: IPv4 without options or
// IPv6 without extension headers, the TCP checksum field holding the pseudo-header sum) through
// the vnet socket `fd` for the kernel or the NIC to cut into segments of `mss` payload bytes,
// tagged with `vlan_tci` when given; counts them. False when the OS refused it (tx_errors).
bool send_tcp_gso(int fd, const std::uint8_t* frame, std::size_t len, std::uint16_t mss,
                  std::optional<std::uint16_t> vlan_tci, AtomicCounters& counters);

// Sends one whole frame through the vnet socket `fd` (behind an empty virtio_net_hdr); false when
// the OS refused it.
bool send_whole_frame(int fd, const std::uint8_t* frame, std::size_t len);

// After EAGAIN on a socket's send: the first time (`waited` false) waits without spinning, up to
// 100 ms, for room, and is true (send again); false when it has waited already (the rest is
// lost, as on a full queue).
bool wait_for_room(int fd, bool& waited);

// Sends one message of `n` iovecs through `fd`, waiting briefly once for room: 0 when sent,
// else the errno.
int send_iov(int fd, iovec* v, std::size_t n);

}  // namespace softrdma::netdev
