#include "lwtcp/raw_port.h"

#include "lwtcp/faulty_port.h"
#include "netdev/open.h"
#include "netdev/raw_eth.h"

namespace softrdma::lwtcp {

bool carries_user_tcp(const std::string& spec, const netdev::IpAddr& address) {
  return netdev::frame_backend(spec) != netdev::FrameBackend::kNone && address.is_v4() &&
         netdev::interface_with(address).empty();
}

std::string roce_spec_beside_user_tcp(const std::string& spec) {
  std::string iface, given;
  netdev::IpAddr address;
  const auto backend = netdev::frame_backend(spec);
  const bool parsed = backend == netdev::FrameBackend::kDpdk
                          ? netdev::split_dpdk_spec(spec, iface, given)
                          : netdev::split_iface_spec(spec, iface, given);
  if ((backend != netdev::FrameBackend::kAfXdp && backend != netdev::FrameBackend::kDpdk) ||
      !parsed || !netdev::IpAddr::parse(given, address) || !carries_user_tcp(spec, address)) {
    return spec;  // a bad spec is reported by netdev::open
  }
  return netdev::with_frame_backend(spec, netdev::FrameBackend::kAfPacket);
}

std::unique_ptr<netdev::FramePort> open_raw_port(const std::string& spec,
                                                 const netdev::IpAddr& address,
                                                 std::optional<std::uint16_t> vlan,
                                                 const netdev::FaultConfig& faults,
                                                 std::string& error) {
  netdev::OpenOptions options;  // the faults are the stack's (with_faults), not the backend's
  options.vlan = vlan;
  auto port = netdev::open_frame_port(spec, address, netdev::Steering::kTcp, options, error);
  if (!port) return nullptr;
  return with_faults(std::move(port), faults);
}

}  // namespace softrdma::lwtcp
