#include "lwtcp/raw_port.h"

#include "lwtcp/faulty_port.h"
#include "lwtcp/split_port.h"
#include "netdev/open.h"
#include "netdev/raw_eth.h"

namespace softrdma::lwtcp {

bool parse_tcp_choice(const std::string& s, TcpChoice& out) {
  if (s == "auto") {
    out = TcpChoice::kAuto;
  } else if (s == "kernel") {
    out = TcpChoice::kKernel;
  } else if (s == "user") {
    out = TcpChoice::kUser;
  } else {
    return false;
  }
  return true;
}

std::optional<netdev::Steering> user_tcp_steering(const std::string& spec,
                                                  const netdev::IpAddr& address, TcpChoice choice) {
  if (netdev::frame_backend(spec) == netdev::FrameBackend::kNone || choice == TcpChoice::kKernel) {
    return std::nullopt;
  }
  if (netdev::interface_with(address).empty()) return netdev::Steering::kTcp;
  if (choice == TcpChoice::kUser) return netdev::Steering::kTcpShared;
  return std::nullopt;
}

std::string roce_spec_beside_user_tcp(const std::string& spec, TcpChoice choice) {
  std::string iface, given;
  netdev::IpAddr address;
  const auto backend = netdev::frame_backend(spec);
  const bool parsed = backend == netdev::FrameBackend::kDpdk
                          ? netdev::split_dpdk_spec(spec, iface, given)
                          : netdev::split_iface_spec(spec, iface, given);
  if (!parsed || !netdev::IpAddr::parse(given, address)) return spec;  // netdev::open says why
  const auto steer = user_tcp_steering(spec, address, choice);
  if (!steer || backend == netdev::FrameBackend::kAfPacket) return spec;
  return netdev::with_frame_backend(spec, netdev::FrameBackend::kAfPacket);
}

std::unique_ptr<netdev::FramePort> open_raw_port(
    const std::string& spec, const netdev::IpAddr& address, netdev::Steering steer,
    std::optional<std::uint16_t> vlan, const netdev::FaultConfig& faults, std::string& error) {
  netdev::OpenOptions options;  // the faults are the stack's (with_faults), not the backend's
  options.vlan = vlan;
  auto port = netdev::open_frame_port(spec, address, steer, options, error);
  if (!port) return nullptr;
  if (netdev::frame_backend(spec) == netdev::FrameBackend::kAfXdp &&
      steer == netdev::Steering::kTcpShared) {
    // The XDP program takes the held ports' segments only; ARP and neighbour discovery stay the
    // kernel's, and a packet socket beside it shows them to the stack too.
    auto side =
        netdev::open_frame_port(netdev::with_frame_backend(spec, netdev::FrameBackend::kAfPacket),
                                address, steer, options, error);
    if (!side) return nullptr;
    port = split_port(std::move(port), std::move(side));
    if (!port) {
      error = "af_xdp: epoll_create1 failed";
      return nullptr;
    }
  }
  return with_faults(std::move(port), faults);
}

}  // namespace softrdma::lwtcp
