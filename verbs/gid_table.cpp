#include "verbs/gid_table.h"

#include <algorithm>

namespace softrdma::verbs {

core::Gid default_gid(const wire::MacAddr& mac) {
  core::Gid g{};
  g[0] = 0xfe;
  g[1] = 0x80;
  g[8] = static_cast<std::uint8_t>(mac[0] ^ 0x02);
  g[9] = mac[1];
  g[10] = mac[2];
  g[11] = 0xff;
  g[12] = 0xfe;
  g[13] = mac[3];
  g[14] = mac[4];
  g[15] = mac[5];
  return g;
}

std::vector<PortGid> roce_gid_table(const wire::MacAddr& mac,
                                    std::span<const netdev::IpAddr> addresses) {
  std::vector<PortGid> t;
  t.push_back({default_gid(mac), std::nullopt});
  for (std::size_t i = 0; i < addresses.size() && i <= 0xFF; ++i) {
    const auto a = static_cast<std::uint8_t>(i);
    auto same = std::find_if(t.begin(), t.end(),
                             [&](const PortGid& e) { return e.gid == addresses[i].bytes; });
    if (same != t.end()) {
      if (!same->address) same->address = a;  // the interface's address is the default GID
      continue;
    }
    t.push_back({addresses[i].bytes, a});
  }
  return t;
}

}  // namespace softrdma::verbs
