// wire's 802.1Q helpers: the tag's bytes, and a frame with the tag put in after its addresses,
// which parse_ethernet reads back as the same frame on that VLAN.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "wire/bytes.h"
#include "wire/net.h"

namespace softrdma::wire {
namespace {

TEST(Ethernet, AVlanTagIsTheTpidThenTheTci) {
  const auto tag = vlan_tag(0xA005);  // priority 5, VLAN 5
  EXPECT_EQ(tag, (std::array<std::uint8_t, 4>{0x81, 0x00, 0xA0, 0x05}));
}

TEST(Ethernet, ATagPutInKeepsTheAddressesAndEverythingAfter) {
  std::vector<std::uint8_t> frame(60);
  Ethernet e;
  e.dst = {2, 0, 0, 0, 0, 1};
  e.src = {2, 0, 0, 0, 0, 2};
  e.ethertype = kEthertypeIpv4;
  ASSERT_TRUE(build_ethernet(MutBytes(frame), e));
  for (std::size_t i = 14; i < frame.size(); ++i) frame[i] = static_cast<std::uint8_t>(i);
  std::vector<std::uint8_t> out(3, 0xEE);  // resized, not appended to
  insert_vlan_tag(Bytes(frame), 5, out);
  ASSERT_EQ(out.size(), frame.size() + kVlanTagLen);
  const auto eth = parse_ethernet(Bytes(out));
  ASSERT_TRUE(eth);
  EXPECT_EQ(eth->dst, e.dst);
  EXPECT_EQ(eth->src, e.src);
  ASSERT_TRUE(eth->vlan_tci);
  EXPECT_EQ(*eth->vlan_tci, 5);
  EXPECT_EQ(eth->ethertype, kEthertypeIpv4);
  EXPECT_TRUE(std::equal(frame.begin() + 14, frame.end(), out.begin() + 18));
}

}  // namespace
}  // namespace softrdma::wire
