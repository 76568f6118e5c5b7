// netdev::open: the one place a backend is chosen from a spec string ("udp:ADDRESS",
// "af_packet:IFACE[:ADDRESS]", "af_xdp:IFACE[:ADDRESS]", "dpdk:DEVICE[@ADDRESS]", "memory:ADDRESS",
// or "" for a udp device on a loopback address of its own), or a raw backend's frame port from one
// (open_frame_port); and the parsers of those strings.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "netdev/faults.h"
#include "netdev/frame_port.h"
#include "netdev/netdev.h"

namespace softrdma::netdev {

class MemoryFabric;

// The spec forms netdev::open knows beyond "memory:" (for messages naming them).
inline constexpr const char* kSpecForms =
    "udp:ADDRESS, af_packet:INTERFACE[:ADDRESS], af_xdp:INTERFACE[:ADDRESS] or "
    "dpdk:DEVICE[@ADDRESS]";

// "KIND:IFACE" or "KIND:IFACE:ADDRESS" (af_packet, af_xdp) into its interface and (maybe empty)
// address; false when either part that is there is empty.
bool split_iface_spec(const std::string& spec, std::string& iface, std::string& addr);
// "dpdk:DEVICE" or "dpdk:DEVICE@ADDRESS" into the device (a vdev's devargs or a PCI address)
// and the (maybe empty) address; false when either part that is there is empty.
bool split_dpdk_spec(const std::string& spec, std::string& dev, std::string& addr);

// The raw Ethernet backend a spec names (af_packet:…, af_xdp:…, dpdk:…), kNone for any other; and
// `spec` naming `backend` instead (its interface and address kept: a dpdk vdev's iface=; a kNone
// spec, a dpdk spec without an interface, or one made dpdk, as it is).
enum class FrameBackend : std::uint8_t { kNone, kAfPacket, kAfXdp, kDpdk };
FrameBackend frame_backend(const std::string& spec);
std::string with_frame_backend(const std::string& spec, FrameBackend backend);
// The interface of a dpdk vdev's devargs ("net_af_packet0,iface=veth0" → "veth0"), or "".
std::string dpdk_vdev_iface(const std::string& dev);

struct OpenOptions {
  FaultConfig faults;
  bool host_local_rings = true;          // udp: rings toward this host's devices (udp.h)
  std::optional<std::uint16_t> vlan;     // raw backends: tag frames with this 802.1Q VLAN ID
  std::uint32_t dpdk_qps = 64;           // dpdk: the QPs its mbuf pool is sized for
  std::shared_ptr<MemoryFabric> fabric;  // memory: the fabric to attach to (required)
  std::string spec_origin;               // prefixed to errors about the spec itself
};

// Opens the backend `spec` names. On success `address` (when given) is the device's own
// address: the one in the spec, the interface's first IPv4 address, or, for "", the loopback
// address 127.1.H.L chosen (H<<8|L a unicast LID derived from the pid, the next one tried while
// the address is taken). nullptr with `error` set: the backend's own message, or for a spec that
// does not parse, spec_origin + "bad address in '…'", "bad value '…'" or "unsupported backend".
std::unique_ptr<Netdev> open(const std::string& spec, const OpenOptions& options,
                             std::string& error, IpAddr* address = nullptr);

// The frame port of the raw backend `spec` names (af_packet:IFACE[:ADDRESS],
// af_xdp:IFACE[:ADDRESS] or dpdk:DEVICE[@ADDRESS]), on `address` (the spec's own is not read),
// steered as `steer` says, with options.faults and options.vlan. nullptr with `error` set, as
// open's.
std::unique_ptr<FramePort> open_frame_port(const std::string& spec, const IpAddr& address,
                                           Steering steer, const OpenOptions& options,
                                           std::string& error);

}  // namespace softrdma::netdev
