// Which raw backend carries softiwarp0's userspace TCP: af_packet:IFACE[:ADDRESS],
// af_xdp:IFACE[:ADDRESS] or dpdk:DEVICE@ADDRESS on an IPv4 address no interface holds (the kernel
// owns the others and would reset our connections); any other spec keeps iWARP on kernel TCP.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "netdev/faults.h"
#include "netdev/frame_port.h"
#include "netdev/netdev.h"

namespace softrdma::lwtcp {

// Whether `spec` (the device's --netdev, its address `address`) puts iWARP on the userspace TCP.
bool carries_user_tcp(const std::string& spec, const netdev::IpAddr& address);

// The spec softroce0 opens beside softiwarp0 (--transport iwarp): af_xdp:IFACE:ADDRESS on an
// IPv4 address no interface holds becomes af_packet:IFACE:ADDRESS, since the XDP program (one an
// interface) steers to the TCP, and so does dpdk:VDEV,iface=IFACE@ADDRESS, since the port is the
// TCP's (a PCI NIC's spec stays: softroce0 takes the port, and softiwarp0 stays on kernel TCP);
// any other spec stays as it is.
std::string roce_spec_beside_user_tcp(const std::string& spec);

// The TCP's port (netdev::open_frame_port, steering kTcp), with `faults` on what it sends;
// nullptr with `error` set.
std::unique_ptr<netdev::FramePort> open_raw_port(const std::string& spec,
                                                 const netdev::IpAddr& address,
                                                 std::optional<std::uint16_t> vlan,
                                                 const netdev::FaultConfig& faults,
                                                 std::string& error);

}  // namespace softrdma::lwtcp
