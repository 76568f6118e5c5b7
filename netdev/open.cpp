#include "netdev/open.h"

#include <unistd.h>

#include <stdexcept>
#include <system_error>

#include "netdev/backends.h"

namespace softrdma::netdev {

namespace {

bool starts_with(const std::string& s, const char* prefix) {
  return s.rfind(prefix, 0) == 0;
}

constexpr const char* kAfPacket = "af_packet:";
constexpr const char* kAfXdp = "af_xdp:";
constexpr const char* kDpdk = "dpdk:";

// The highest unicast LID (IBTA): the low 16 bits of a loopback address of our own stay in 1..it.
constexpr std::uint16_t kMaxUnicastLid = 0xBFFF;

// "": a loopback address of our own, 127.1.H.L, with LID H<<8|L, starting from the pid's.
std::unique_ptr<Netdev> open_own_loopback(const OpenOptions& o, std::string& error, IpAddr& addr) {
  std::unique_ptr<Netdev> nd;
  std::uint16_t lid = static_cast<std::uint16_t>(getpid() % kMaxUnicastLid + 1);
  for (int attempt = 0; attempt < 256 && !nd; ++attempt) {
    addr = IpAddr::v4(0x7F010000u | lid);
    std::string why;
    nd = UdpNetdev::open(addr, why, o.faults, kRoceV2Port, o.host_local_rings);
    if (!nd) {
      error = why;
      lid = static_cast<std::uint16_t>(lid % kMaxUnicastLid + 1);
    }
  }
  return nd;
}

std::unique_ptr<Netdev> open_udp(const std::string& spec, const OpenOptions& o, std::string& error,
                                 IpAddr& addr) {
  if (!IpAddr::parse(spec.substr(4), addr)) {
    error = o.spec_origin + "bad address in '" + spec + "'";
    return nullptr;
  }
  return UdpNetdev::open(addr, error, o.faults, kRoceV2Port, o.host_local_rings);
}

// The af_packet or af_xdp backend on `iface` and `addr`.
std::unique_ptr<RawFramePortNetdev> open_raw_backend(const std::string& spec,
                                                     const std::string& iface, const IpAddr& addr,
                                                     Steering steer, const OpenOptions& o,
                                                     std::string& error) {
  if (starts_with(spec, kAfPacket)) {
    return AfPacketNetdev::open(iface, addr, error, o.faults, o.vlan, steer);
  }
#ifdef SOFTRDMA_HAVE_AF_XDP
  return AfXdpNetdev::open(iface, addr, error, o.faults, o.vlan, 0, steer);
#else
  (void)steer;
  error = "af_xdp:" + iface +
          ": this build has no AF_XDP backend (it needs libxdp-dev, libbpf-dev and clang)";
  return nullptr;
#endif
}

// af_packet:… and af_xdp:…; without an address, the interface's first IPv4 address.
std::unique_ptr<Netdev> open_raw_socket(const std::string& spec, const OpenOptions& o,
                                        std::string& error, IpAddr& addr) {
  std::string iface, given;
  if (!split_iface_spec(spec, iface, given) || (!given.empty() && !IpAddr::parse(given, addr))) {
    error = o.spec_origin + "bad value '" + spec + "'";
    return nullptr;
  }
  if (given.empty() && !AfPacketNetdev::interface_ipv4(iface, addr, error)) return nullptr;
  return open_raw_backend(spec, iface, addr, Steering::kRoce, o, error);
}

std::unique_ptr<Netdev> open_dpdk(const std::string& spec, const OpenOptions& o, std::string& error,
                                  IpAddr& addr) {
  std::string dev, given;
  if (!split_dpdk_spec(spec, dev, given) || (!given.empty() && !IpAddr::parse(given, addr))) {
    error = o.spec_origin + "bad value '" + spec + "'";
    return nullptr;
  }
#ifdef SOFTRDMA_HAVE_DPDK
  auto nd = DpdkNetdev::open(dev, given.empty() ? std::nullopt : std::optional(addr), error,
                             o.faults, o.vlan, o.dpdk_qps);
  if (nd) addr = nd->addresses()[0];
  return nd;
#else
  error = "dpdk:" + dev + ": this build has no DPDK backend (it needs libdpdk-dev 22.11)";
  return nullptr;
#endif
}

std::unique_ptr<Netdev> open_memory(const std::string& spec, const OpenOptions& o,
                                    std::string& error, IpAddr& addr) {
  if (!o.fabric || !IpAddr::parse(spec.substr(std::string("memory:").size()), addr)) {
    error = o.spec_origin +
            (o.fabric ? "bad address in '" + spec + "'" : "'" + spec + "' needs a memory fabric");
    return nullptr;
  }
  try {
    return std::make_unique<MemoryNetdev>(o.fabric, addr, 1500, o.faults);
  } catch (const std::exception& e) {  // the address is taken, or no eventfd
    error = "memory:" + addr.str() + ": " + e.what();
    return nullptr;
  }
}

}  // namespace

bool split_iface_spec(const std::string& spec, std::string& iface, std::string& addr) {
  const std::string rest = spec.substr(spec.find(':') + 1);
  const auto colon = rest.find(':');
  iface = rest.substr(0, colon);
  addr = colon == std::string::npos ? "" : rest.substr(colon + 1);
  return !iface.empty() && (colon == std::string::npos || !addr.empty());
}

bool split_dpdk_spec(const std::string& spec, std::string& dev, std::string& addr) {
  const std::string rest = spec.substr(std::string("dpdk:").size());
  const auto at = rest.rfind('@');
  dev = rest.substr(0, at);
  addr = at == std::string::npos ? "" : rest.substr(at + 1);
  return !dev.empty() && (at == std::string::npos || !addr.empty());
}

FrameBackend frame_backend(const std::string& spec) {
  if (starts_with(spec, kAfPacket)) return FrameBackend::kAfPacket;
  if (starts_with(spec, kAfXdp)) return FrameBackend::kAfXdp;
  if (starts_with(spec, kDpdk)) return FrameBackend::kDpdk;
  return FrameBackend::kNone;
}

std::string with_frame_backend(const std::string& spec, FrameBackend backend) {
  const FrameBackend was = frame_backend(spec);
  if (was == FrameBackend::kNone || backend == FrameBackend::kNone) return spec;
  if (was == FrameBackend::kDpdk || backend == FrameBackend::kDpdk) {
    // A vdev on an interface names it as iface=NAME; a PCI NIC has none.
    std::string dev, addr;
    if (!split_dpdk_spec(spec, dev, addr) || backend == FrameBackend::kDpdk) return spec;
    const std::string iface = dpdk_vdev_iface(dev);
    if (iface.empty()) return spec;
    return (backend == FrameBackend::kAfPacket ? kAfPacket : kAfXdp) + iface +
           (addr.empty() ? "" : ":" + addr);
  }
  return (backend == FrameBackend::kAfPacket ? kAfPacket : kAfXdp) +
         spec.substr(spec.find(':') + 1);
}

std::string dpdk_vdev_iface(const std::string& dev) {
  for (std::size_t at = dev.find(','); at != std::string::npos; at = dev.find(',', at + 1)) {
    if (dev.compare(at + 1, 6, "iface=") == 0) {
      const auto end = dev.find(',', at + 1);
      return dev.substr(at + 7, end == std::string::npos ? std::string::npos : end - at - 7);
    }
  }
  return "";
}

std::unique_ptr<FramePort> open_frame_port(const std::string& spec, const IpAddr& address,
                                           Steering steer, const OpenOptions& options,
                                           std::string& error) {
  std::string iface, given;
  if (frame_backend(spec) == FrameBackend::kNone) {
    error = options.spec_origin + "unsupported backend '" + spec +
            "' (expected af_packet:INTERFACE[:ADDRESS], af_xdp:INTERFACE[:ADDRESS] or "
            "dpdk:DEVICE@ADDRESS)";
    return nullptr;
  }
  if (frame_backend(spec) == FrameBackend::kDpdk) {
    if (!split_dpdk_spec(spec, iface, given)) {
      error = options.spec_origin + "bad value '" + spec + "'";
      return nullptr;
    }
#ifdef SOFTRDMA_HAVE_DPDK
    return DpdkNetdev::open(iface, address, error, options.faults, options.vlan, options.dpdk_qps,
                            steer);
#else
    error = "dpdk:" + iface + ": this build has no DPDK backend (it needs libdpdk-dev 22.11)";
    return nullptr;
#endif
  }
  if (!split_iface_spec(spec, iface, given)) {
    error = options.spec_origin + "bad value '" + spec + "'";
    return nullptr;
  }
  return open_raw_backend(spec, iface, address, steer, options, error);
}

std::unique_ptr<Netdev> open(const std::string& spec, const OpenOptions& options,
                             std::string& error, IpAddr* address) {
  IpAddr own;
  IpAddr& addr = address ? *address : own;
  if (spec.empty()) return open_own_loopback(options, error, addr);
  if (starts_with(spec, "udp:")) return open_udp(spec, options, error, addr);
  switch (frame_backend(spec)) {
    case FrameBackend::kAfPacket:
    case FrameBackend::kAfXdp:
      return open_raw_socket(spec, options, error, addr);
    case FrameBackend::kDpdk:
      return open_dpdk(spec, options, error, addr);
    case FrameBackend::kNone:
      break;
  }
  if (starts_with(spec, "memory:")) return open_memory(spec, options, error, addr);
  error = options.spec_origin + "unsupported backend '" + spec + "' (expected " + kSpecForms + ")";
  return nullptr;
}

}  // namespace softrdma::netdev
