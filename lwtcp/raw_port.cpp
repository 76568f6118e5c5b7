#include "lwtcp/raw_port.h"

#include "lwtcp/faulty_port.h"
#include "netdev/af_packet.h"
#include "netdev/open.h"
#include "netdev/raw_eth.h"
#ifdef SOFTRDMA_HAVE_AF_XDP
#include "netdev/af_xdp.h"
#endif

namespace softrdma::lwtcp {
namespace {

constexpr std::string_view kAfPacket = "af_packet:";
constexpr std::string_view kAfXdp = "af_xdp:";

bool starts_with(const std::string& s, std::string_view prefix) {
  return s.rfind(prefix, 0) == 0;
}

}  // namespace

bool carries_user_tcp(const std::string& spec, const netdev::IpAddr& address) {
  return (starts_with(spec, kAfPacket) || starts_with(spec, kAfXdp)) && address.is_v4() &&
         netdev::interface_with(address).empty();
}

std::string roce_spec_beside_user_tcp(const std::string& spec) {
  std::string iface, given;
  netdev::IpAddr address;
  if (!starts_with(spec, kAfXdp) || !netdev::split_iface_spec(spec, iface, given) ||
      !netdev::IpAddr::parse(given, address) || !carries_user_tcp(spec, address)) {
    return spec;  // a bad spec is reported by netdev::open
  }
  return std::string(kAfPacket) + spec.substr(kAfXdp.size());
}

std::unique_ptr<netdev::FramePort> open_raw_port(const std::string& spec,
                                                 const netdev::IpAddr& address,
                                                 std::optional<std::uint16_t> vlan,
                                                 const netdev::FaultConfig& faults,
                                                 std::string& error) {
  std::string iface, addr;
  if (!netdev::split_iface_spec(spec, iface, addr)) {
    error = "bad value '" + spec + "'";
    return nullptr;
  }
  std::unique_ptr<netdev::FramePort> port;
  if (starts_with(spec, kAfPacket)) {
    port = netdev::AfPacketNetdev::open(iface, address, error, {}, vlan, netdev::Steering::kTcp);
  } else {
#ifdef SOFTRDMA_HAVE_AF_XDP
    port = netdev::AfXdpNetdev::open(iface, address, error, {}, vlan, 0, netdev::Steering::kTcp);
#else
    error = "af_xdp:" + iface + ": this build has no AF_XDP backend";
#endif
  }
  if (!port) return nullptr;
  return with_faults(std::move(port), faults);
}

}  // namespace softrdma::lwtcp
