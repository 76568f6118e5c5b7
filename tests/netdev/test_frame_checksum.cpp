// complete_checksum (netdev/frame_port.h): a received offload frame whose TCP checksum the
// kernel left partial (the pseudo-header sum only) comes out with the checksum a sender computes,
// and a super-segment's IPv4 header checksum is made right for its length.
#include <gtest/gtest.h>

#include <vector>

#include "netdev/frame_port.h"
#include "wire/bytes.h"
#include "wire/net.h"

namespace softrdma::netdev {
namespace {

constexpr std::uint32_t kSrc = 0x0AE70201, kDst = 0x0AE70202;  // 10.231.2.1 → .2
constexpr std::size_t kIp = wire::kEthernetLen, kTcp = kIp + wire::kIpv4MinLen;

// An Ethernet/IPv4/TCP frame of `payload` bytes, its checksums zero.
std::vector<std::uint8_t> frame(std::size_t payload) {
  std::vector<std::uint8_t> f(kTcp + wire::kTcpMinLen + payload);
  wire::store16(&f[12], 0x0800);
  wire::Ipv4 ip;
  ip.total_len = static_cast<std::uint16_t>(f.size() - kIp);
  ip.protocol = 6;
  ip.src = kSrc;
  ip.dst = kDst;
  EXPECT_TRUE(wire::build_ipv4(wire::MutBytes(&f[kIp], wire::kIpv4MinLen), ip));
  wire::Tcp t;
  t.src_port = 34000;
  t.dst_port = 18621;
  t.flags = wire::kTcpAck;
  EXPECT_TRUE(wire::build_tcp(wire::MutBytes(&f[kTcp], wire::kTcpMinLen), t));
  for (std::size_t i = 0; i < payload; ++i) f[kTcp + wire::kTcpMinLen + i] = std::uint8_t(i * 7);
  return f;
}

std::uint16_t full_checksum(std::vector<std::uint8_t> f) {  // as a sender computes it
  wire::store16(&f[kTcp + 16], 0);
  return wire::l4_checksum_ipv4(kSrc, kDst, 6, wire::Bytes(&f[kTcp], f.size() - kTcp));
}

// What the kernel leaves: the pseudo-header's sum, not complemented.
void make_partial(std::vector<std::uint8_t>& f) {
  const auto len = static_cast<std::uint32_t>(f.size() - kTcp);
  std::uint32_t sum = (kSrc >> 16) + (kSrc & 0xFFFF) + (kDst >> 16) + (kDst & 0xFFFF) + 6 + len;
  while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
  wire::store16(&f[kTcp + 16], static_cast<std::uint16_t>(sum));
}

TEST(FrameChecksum, PartialTcpChecksumIsCompleted) {
  for (std::size_t payload : {0u, 1u, 1460u, 4061u, 60000u}) {
    std::vector<std::uint8_t> f = frame(payload);
    const std::uint16_t want = full_checksum(f);
    make_partial(f);
    ASSERT_TRUE(complete_checksum(f.data(), static_cast<std::uint32_t>(f.size()), kTcp, 16));
    EXPECT_EQ(wire::load16(&f[kTcp + 16]), want) << payload;
    // The receiver's check of the whole segment now passes, as lwIP's does.
    EXPECT_EQ(wire::l4_checksum_ipv4(kSrc, kDst, 6, wire::Bytes(&f[kTcp], f.size() - kTcp)), 0);
    EXPECT_EQ(wire::ipv4_header_checksum(wire::Bytes(&f[kIp], wire::kIpv4MinLen)), 0);
  }
}

// An Ethernet/IPv6/TCP frame of `payload` bytes (fd42:231::1 → ::2), its checksum partial as the
// kernel leaves it for an offload.
constexpr wire::Ipv6Addr kSrc6 = {0xFD, 0x42, 2, 0x31, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
constexpr wire::Ipv6Addr kDst6 = {0xFD, 0x42, 2, 0x31, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
constexpr std::size_t kTcp6 = kIp + wire::kIpv6Len;

std::vector<std::uint8_t> frame6(std::size_t payload) {
  std::vector<std::uint8_t> f(kTcp6 + wire::kTcpMinLen + payload);
  wire::store16(&f[12], 0x86DD);
  wire::Ipv6 ip;
  ip.payload_len = static_cast<std::uint16_t>(f.size() - kTcp6);
  ip.next_header = 6;
  ip.src = kSrc6;
  ip.dst = kDst6;
  EXPECT_TRUE(wire::build_ipv6(wire::MutBytes(&f[kIp], wire::kIpv6Len), ip));
  wire::Tcp t;
  t.src_port = 34000;
  t.dst_port = 18621;
  t.flags = wire::kTcpAck;
  EXPECT_TRUE(wire::build_tcp(wire::MutBytes(&f[kTcp6], wire::kTcpMinLen), t));
  for (std::size_t i = 0; i < payload; ++i) f[kTcp6 + wire::kTcpMinLen + i] = std::uint8_t(i * 5);
  return f;
}

TEST(FrameChecksum, PartialTcpChecksumOfAnIpv6FrameIsCompleted) {
  for (std::size_t payload : {0u, 1u, 1440u, 9000u}) {
    std::vector<std::uint8_t> f = frame6(payload);
    const auto len = static_cast<std::uint32_t>(f.size() - kTcp6);
    const std::uint16_t want = wire::l4_checksum_ipv6(kSrc6, kDst6, 6, wire::Bytes(&f[kTcp6], len));
    wire::store16(&f[kTcp6 + 16], wire::l4_partial_checksum_ipv6(kSrc6, kDst6, 6, len));
    ASSERT_TRUE(complete_partial_tcp(f.data(), static_cast<std::uint32_t>(f.size()))) << payload;
    EXPECT_EQ(wire::load16(&f[kTcp6 + 16]), want) << payload;
    EXPECT_EQ(wire::l4_checksum_ipv6(kSrc6, kDst6, 6, wire::Bytes(&f[kTcp6], len)), 0);
    // Complete already: left alone.
    const std::vector<std::uint8_t> done = f;
    EXPECT_FALSE(complete_partial_tcp(f.data(), static_cast<std::uint32_t>(f.size())));
    EXPECT_EQ(f, done);
  }
  // A payload length past the frame's end: refused, untouched.
  std::vector<std::uint8_t> f = frame6(100);
  wire::store16(&f[kIp + 4], 400);
  const std::vector<std::uint8_t> bad = f;
  EXPECT_FALSE(complete_partial_tcp(f.data(), static_cast<std::uint32_t>(f.size())));
  EXPECT_EQ(f, bad);
}

TEST(FrameChecksum, PartialTcpChecksumOfAnIpv4FrameIsCompleted) {
  std::vector<std::uint8_t> f = frame(1000);
  const std::uint16_t want = full_checksum(f);
  make_partial(f);
  ASSERT_TRUE(complete_partial_tcp(f.data(), static_cast<std::uint32_t>(f.size())));
  EXPECT_EQ(wire::load16(&f[kTcp + 16]), want);
  EXPECT_FALSE(complete_partial_tcp(f.data(), static_cast<std::uint32_t>(f.size())));
}

TEST(FrameChecksum, BrokenIpv4HeaderChecksumOfASuperSegmentIsRecomputed) {
  std::vector<std::uint8_t> f = frame(3000);
  make_partial(f);
  wire::store16(&f[kIp + 10], 0x1234);
  ASSERT_TRUE(complete_checksum(f.data(), static_cast<std::uint32_t>(f.size()), kTcp, 16));
  EXPECT_EQ(wire::ipv4_header_checksum(wire::Bytes(&f[kIp], wire::kIpv4MinLen)), 0);
}

TEST(FrameChecksum, OffsetsOutsideTheFrameAreRefused) {
  std::vector<std::uint8_t> f = frame(10);
  const auto len = static_cast<std::uint32_t>(f.size());
  const std::vector<std::uint8_t> before = f;
  EXPECT_FALSE(complete_checksum(f.data(), len, static_cast<std::uint16_t>(len), 0));
  EXPECT_FALSE(complete_checksum(f.data(), len, static_cast<std::uint16_t>(len - 1), 0));
  EXPECT_FALSE(complete_checksum(f.data(), len, kTcp, static_cast<std::uint16_t>(len)));
  EXPECT_EQ(f, before);
}

}  // namespace
}  // namespace softrdma::netdev
