// Which raw backend carries softiwarp0's userspace TCP, and how it is steered there:
// af_packet:IFACE[:ADDRESS], af_xdp:IFACE[:ADDRESS] or dpdk:DEVICE@ADDRESS on an address (IPv4
// or IPv6) no interface holds (steering kTcp: the kernel never sees our connections), or with
// `--tcp user` on an address the kernel holds too (kTcpShared: the stack holds its ports in the
// kernel; on af_xdp the XDP program steers those ports alone, and a packet socket beside it shows
// the stack ARP and neighbour discovery, lwtcp/split_port.h); any other spec or choice keeps
// iWARP on kernel TCP.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "netdev/faults.h"
#include "netdev/frame_port.h"
#include "netdev/netdev.h"

namespace softrdma::lwtcp {

// softiwarp0's TCP as the user chose it (SOFTRDMA_TCP, `softrdma run --tcp`): kAuto is the
// userspace TCP on an address no interface holds and the kernel's on any other.
enum class TcpChoice : std::uint8_t { kAuto, kKernel, kUser };
// "auto", "kernel" or "user"; false for anything else.
bool parse_tcp_choice(const std::string& s, TcpChoice& out);

// The steering that puts iWARP on the userspace TCP for `spec` (the device's --netdev, its
// address `address`) and `choice`, or none (kernel TCP).
std::optional<netdev::Steering> user_tcp_steering(const std::string& spec,
                                                  const netdev::IpAddr& address,
                                                  TcpChoice choice = TcpChoice::kAuto);

// The spec softroce0 opens beside softiwarp0 (--transport iwarp): af_xdp:IFACE:ADDRESS under
// the userspace TCP becomes af_packet:IFACE:ADDRESS, since the XDP program (one an
// interface) steers to the TCP, and so does dpdk:VDEV,iface=IFACE@ADDRESS under the userspace
// TCP, since the port is the TCP's (a PCI NIC's spec stays: softroce0 takes the port, and
// softiwarp0 stays on kernel TCP); any other spec stays as it is.
std::string roce_spec_beside_user_tcp(const std::string& spec, TcpChoice choice = TcpChoice::kAuto);

// The TCP's port (netdev::open_frame_port, steered as `steer`), with `faults` on what it sends;
// nullptr with `error` set.
std::unique_ptr<netdev::FramePort> open_raw_port(
    const std::string& spec, const netdev::IpAddr& address, netdev::Steering steer,
    std::optional<std::uint16_t> vlan, const netdev::FaultConfig& faults, std::string& error);

}  // namespace softrdma::lwtcp
