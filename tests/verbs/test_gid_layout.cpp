// The GID table's layout as a function (verbs/gid_table.h) and the shared kernel view's GID
// attribute files (verbs/kernel_view.h), without a device.
#include <gtest/gtest.h>

#include <string>

#include "verbs/gid_table.h"
#include "verbs/kernel_view.h"

namespace softrdma::verbs {
namespace {

netdev::IpAddr ip(const char* s) {
  netdev::IpAddr a;
  EXPECT_TRUE(netdev::IpAddr::parse(s, a)) << s;
  return a;
}

TEST(GidLayout, DefaultGidIsTheModifiedEui64OfTheMac) {
  // The kernel's default GID for a QEMU NIC 52:54:00:12:34:56.
  EXPECT_EQ(netdev::IpAddr{default_gid({0x52, 0x54, 0x00, 0x12, 0x34, 0x56})}.str(),
            "fe80::5054:ff:fe12:3456");
  EXPECT_EQ(netdev::IpAddr{default_gid({0x02, 0x00, 0x7f, 0x01, 0x00, 0x05})}.str(),
            "fe80::7fff:fe01:5");
}

TEST(GidLayout, DefaultGidThenEachAddressOnce) {
  const wire::MacAddr mac{0x52, 0x54, 0x00, 0x12, 0x34, 0x56};
  const netdev::IpAddr v4 = ip("10.0.0.1");
  auto t = roce_gid_table(mac, std::span(&v4, 1));
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(netdev::IpAddr{t[0].gid}.str(), "fe80::5054:ff:fe12:3456");
  EXPECT_FALSE(t[0].address);  // sent from by no address of the netdev
  EXPECT_EQ(t[1].gid, v4.bytes);
  EXPECT_EQ(t[1].address, 0);
  // An IPv6 link-local address that is the default GID itself is that entry, not a second one.
  const netdev::IpAddr ll = ip("fe80::5054:ff:fe12:3456");
  t = roce_gid_table(mac, std::span(&ll, 1));
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].address, 0);
}

TEST(GidLayout, SharedViewTypesEveryEntryRoceV2) {
  Config cfg;
  std::string types, ndevs;
  bool gids = false;
  for (const ViewEntry& e : kernel_view(cfg)) {
    const std::string root = "/sys/class/infiniband/softroce0/ports/1/";
    if (e.path.rfind(root + "gid_attrs/types/", 0) == 0)
      types += e.path.substr(root.size()) + "=" + e.content;
    if (e.path.rfind(root + "gid_attrs/ndevs/", 0) == 0)
      ndevs += e.path.substr(root.size()) + "=" + e.content;
    if (e.path.rfind(root + "gids", 0) == 0) gids = true;
  }
  EXPECT_EQ(types, "gid_attrs/types/0=RoCE v2\ngid_attrs/types/1=RoCE v2\n");
  EXPECT_EQ(ndevs, "gid_attrs/ndevs/0=lo\ngid_attrs/ndevs/1=lo\n");
  EXPECT_FALSE(gids);  // each process's own
  EXPECT_EQ(view_file(cfg, "/sys/class/infiniband/softiwarp0", "ports/1/gid_attrs/types/0"),
            "IB/RoCE v1\n");
  EXPECT_FALSE(view_file(cfg, "/sys/class/infiniband/softiwarp0", "ports/1/gid_attrs/types/1"));
}

}  // namespace
}  // namespace softrdma::verbs
