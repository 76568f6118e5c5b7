// softroce0's port GID table, laid out as the kernel's RoCE GID cache lays out rxe's
// (drivers/infiniband/core/cache.c and roce_gid_mgmt.c). rxe's port supports one GID type,
// RoCE v2 (rxe_port_immutable: RDMA_CORE_PORT_IBA_ROCE_UDP_ENCAP), so the cache reserves one
// default entry, index 0, for the IPv6 link-local GID fe80::/64 + the EUI-64 of the interface's
// MAC, and then adds each IP address of the interface once (IPv4 as ::ffff:a.b.c.d), an address
// equal to a present entry not again. With an IPv4 address: 0 = fe80::… and 1 = ::ffff:a.b.c.d,
// both RoCE v2 — so rxe's `-g 1` names the IPv4 GID. (mlx5 supports RoCE v1 and v2 and gets each
// entry twice, v1 then v2: there the IPv4 RoCE v2 GID is index 3.) See docs/verbs-abi.md.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "core/types.h"
#include "netdev/netdev.h"
#include "wire/net.h"

namespace softrdma::verbs {

struct PortGid {
  core::Gid gid{};
  // The index in the netdev's addresses() this GID sends from; nullopt when the device
  // cannot send from it (the link-local default GID when the backend's address is another).
  std::optional<std::uint8_t> address;
};

// The default GID of an interface with MAC `mac`: fe80:: and the modified EUI-64 (RFC 4291
// appendix A: ff:fe in the middle, the universal/local bit flipped), as the kernel makes it.
core::Gid default_gid(const wire::MacAddr& mac);

// The table for a device with MAC `mac` and the addresses it sends from.
std::vector<PortGid> roce_gid_table(const wire::MacAddr& mac,
                                    std::span<const netdev::IpAddr> addresses);

// The entries a softrdma RoCE device has: the default GID and its one address. The shared
// kernel view (verbs/kernel_view.h) lists this many, since it is made before any engine.
inline constexpr std::size_t kRoceGidEntries = 2;

}  // namespace softrdma::verbs
