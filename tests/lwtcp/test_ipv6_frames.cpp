// The userspace TCP's frame checks over IPv6 (lwtcp/segment_check.h, receive_window.h): segments
// told apart by their flags, a bad checksum or a length past the frame counted as malformed,
// neighbour discovery left to lwIP, a SYN's window scale rewritten with the checksum still
// right; and the CM's addresses as a stack of one family takes them (tcp_address.h).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "lwtcp/receive_window.h"
#include "lwtcp/segment_check.h"
#include "lwtcp/tcp_address.h"
#include "wire/bytes.h"
#include "wire/net.h"

namespace softrdma::lwtcp {
namespace {

using Frame = std::vector<std::uint8_t>;
constexpr std::size_t kIp = wire::kEthernetLen, kTcpAt = kIp + wire::kIpv6Len;
constexpr wire::Ipv6Addr kSrc = {0xFD, 0x42, 2, 0x31, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
constexpr wire::Ipv6Addr kDst = {0xFD, 0x42, 2, 0x31, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};

// Ethernet, IPv6 (next header `next`), TCP with `options` (a multiple of 4 bytes) and `payload`
// bytes, its checksum complete.
Frame segment(std::uint8_t flags, const std::vector<std::uint8_t>& options = {},
              std::size_t payload = 0, std::uint8_t next = 6) {
  Frame f(kTcpAt + 20 + options.size() + payload);
  wire::store16(f.data() + 12, wire::kEthertypeIpv6);
  wire::Ipv6 ip;
  ip.payload_len = static_cast<std::uint16_t>(f.size() - kTcpAt);
  ip.next_header = next;
  ip.src = kSrc;
  ip.dst = kDst;
  EXPECT_TRUE(wire::build_ipv6(wire::MutBytes(f).subspan(kIp), ip));
  wire::Tcp t;
  t.src_port = 49152;
  t.dst_port = 18621;
  t.seq = 0x12345678;
  t.flags = flags;
  t.window = 65535;
  EXPECT_TRUE(wire::build_tcp(wire::MutBytes(f).subspan(kTcpAt), t));
  f[kTcpAt + 12] = static_cast<std::uint8_t>((20 + options.size()) / 4 << 4);
  std::copy(options.begin(), options.end(), f.begin() + kTcpAt + 20);
  wire::store16(f.data() + kTcpAt + 16,
                wire::l4_checksum_ipv6(kSrc, kDst, 6, wire::Bytes(f).subspan(kTcpAt)));
  return f;
}

SegmentKind kind(const Frame& f) {
  return classify(f.data(), static_cast<std::uint32_t>(f.size()));
}

TEST(Ipv6Frames, SegmentsAreToldApartByTheirFlags) {
  EXPECT_EQ(kind(segment(wire::kTcpSyn)), SegmentKind::kTcpSyn);
  EXPECT_EQ(kind(segment(wire::kTcpSyn | wire::kTcpAck)), SegmentKind::kTcp);
  EXPECT_EQ(kind(segment(wire::kTcpRst | wire::kTcpAck)), SegmentKind::kTcpRst);
  EXPECT_EQ(kind(segment(wire::kTcpAck, {}, 1440)), SegmentKind::kTcp);
  const Frame rst = segment(wire::kTcpRst);
  EXPECT_TRUE(is_tcp_rst(rst.data(), static_cast<std::uint32_t>(rst.size())));
  const Frame ack = segment(wire::kTcpAck);
  EXPECT_FALSE(is_tcp_rst(ack.data(), static_cast<std::uint32_t>(ack.size())));
  EXPECT_EQ(tcp_dst_port(ack.data(), static_cast<std::uint32_t>(ack.size())), 18621);
}

TEST(Ipv6Frames, BadSegmentsAreMalformedAndOtherPacketsAreLwipsOwn) {
  Frame bad = segment(wire::kTcpAck, {}, 100);
  bad[kTcpAt + 30] ^= 0x40;  // a payload bit flipped: the checksum fails
  EXPECT_EQ(kind(bad), SegmentKind::kMalformed);
  Frame past = segment(wire::kTcpAck, {}, 100);
  wire::store16(past.data() + kIp + 4, 400);  // a payload length past the frame
  EXPECT_EQ(kind(past), SegmentKind::kMalformed);
  Frame cut = segment(wire::kTcpAck);
  cut.resize(kIp + 30);  // not even the IPv6 header
  EXPECT_EQ(kind(cut), SegmentKind::kMalformed);
  Frame version = segment(wire::kTcpAck);
  version[kIp] = 0x40;  // IPv4's version in an IPv6 frame
  EXPECT_EQ(kind(version), SegmentKind::kMalformed);
  // ICMPv6 (neighbour discovery) and an extension header: lwIP's to handle, uncounted here.
  const Frame icmp = segment(0, {}, 8, 58);
  EXPECT_EQ(kind(icmp), SegmentKind::kOther);
  EXPECT_EQ(tcp_dst_port(icmp.data(), static_cast<std::uint32_t>(icmp.size())), 0);
  EXPECT_EQ(kind(segment(wire::kTcpAck, {}, 8, 44)), SegmentKind::kOther);
}

TEST(Ipv6Frames, TheWindowShiftOfASynIsRewrittenWithTheChecksumRight) {
  const Frame before = segment(wire::kTcpSyn, {2, 4, 5, 0xA0, 1, 3, 3, 1, 4, 2, 1, 1});
  Frame f = before;
  ASSERT_TRUE(offer_window_shift(f.data(), static_cast<std::uint32_t>(f.size()), 7));
  EXPECT_EQ(f[kTcpAt + 27], 7);
  EXPECT_EQ(wire::l4_checksum_ipv6(kSrc, kDst, 6, wire::Bytes(f).subspan(kTcpAt)), 0);
  for (std::size_t i = 0; i < f.size(); ++i) {
    if (i != kTcpAt + 27 && i != kTcpAt + 16 && i != kTcpAt + 17) {
      EXPECT_EQ(f[i], before[i]) << i;
    }
  }
  Frame ack = segment(wire::kTcpAck, {1, 3, 3, 1});  // not a SYN: left alone
  const Frame was = ack;
  EXPECT_FALSE(offer_window_shift(ack.data(), static_cast<std::uint32_t>(ack.size()), 7));
  EXPECT_EQ(ack, was);
}

sockaddr_storage v4(const char* a, std::uint16_t port) {
  sockaddr_storage ss{};
  auto& in = reinterpret_cast<sockaddr_in&>(ss);
  in.sin_family = AF_INET;
  in.sin_port = htons(port);
  EXPECT_EQ(inet_pton(AF_INET, a, &in.sin_addr), 1);
  return ss;
}

sockaddr_storage v6(const char* a, std::uint16_t port) {
  sockaddr_storage ss{};
  auto& in6 = reinterpret_cast<sockaddr_in6&>(ss);
  in6.sin6_family = AF_INET6;
  in6.sin6_port = htons(port);
  EXPECT_EQ(inet_pton(AF_INET6, a, &in6.sin6_addr), 1);
  return ss;
}

const sockaddr* sa(const sockaddr_storage& ss) {
  return reinterpret_cast<const sockaddr*>(&ss);
}

TEST(TcpAddress, EachStackTakesItsFamilyAndEitherWildcard) {
  netdev::IpAddr a4, a6;
  ASSERT_TRUE(netdev::IpAddr::parse("10.231.2.2", a4));
  ASSERT_TRUE(netdev::IpAddr::parse("fd42:231::2", a6));
  // An IPv4 stack: AF_INET, or IPv4-mapped AF_INET6; not a native IPv6 address.
  auto got = from_sockaddr(sa(v4("10.231.2.2", 18621)), true);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->addr, a4);
  EXPECT_EQ(got->port, 18621);
  EXPECT_FALSE(got->wildcard);
  got = from_sockaddr(sa(v6("::ffff:10.231.2.2", 7)), true);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->addr, a4);
  EXPECT_FALSE(from_sockaddr(sa(v6("fd42:231::2", 7)), true));
  // An IPv6 stack: native AF_INET6 only.
  got = from_sockaddr(sa(v6("fd42:231::2", 7)), false);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->addr, a6);
  EXPECT_FALSE(from_sockaddr(sa(v4("10.231.2.2", 7)), false));
  EXPECT_FALSE(from_sockaddr(sa(v6("::ffff:10.231.2.2", 7)), false));
  // Either family's wildcard, for both.
  for (bool stack_v4 : {true, false}) {
    for (const auto& any : {v4("0.0.0.0", 5), v6("::", 5)}) {
      got = from_sockaddr(sa(any), stack_v4);
      ASSERT_TRUE(got);
      EXPECT_TRUE(got->wildcard);
      EXPECT_EQ(got->port, 5);
    }
  }
  sockaddr_storage unix_family{};
  unix_family.ss_family = AF_UNIX;
  EXPECT_FALSE(from_sockaddr(sa(unix_family), true));
  // And back: the family of the address.
  EXPECT_EQ(to_sockaddr(a4, 9).ss_family, AF_INET);
  const sockaddr_storage back = to_sockaddr(a6, 9);
  ASSERT_EQ(back.ss_family, AF_INET6);
  EXPECT_EQ(ntohs(reinterpret_cast<const sockaddr_in6&>(back).sin6_port), 9);
  EXPECT_EQ(from_sockaddr(sa(back), false)->addr, a6);
}

}  // namespace
}  // namespace softrdma::lwtcp
