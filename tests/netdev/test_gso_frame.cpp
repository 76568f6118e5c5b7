// uncut_segment_size: the segment size of a UDP GSO frame that arrived whole without one.
#include <gtest/gtest.h>

#include <vector>

#include "netdev/gso_frame.h"
#include "netdev/icrc_pseudo.h"
#include "netdev/ip_header.h"
#include "wire/net.h"
#include "wire/roce_opcode.h"

namespace softrdma::netdev {
namespace {

// One datagram of a GSO frame: its opcode, destination QP and length (headers, payload, ICRC).
struct Seg {
  std::uint8_t opcode;
  std::uint32_t qpn;
  std::uint32_t len;
};

// An Ethernet frame holding `segs` back to back behind one IP/UDP header (the frame's IPv4 ID
// `id`), each datagram's ICRC right for the ID it gets when cut (id, id + 1, ...).
std::vector<std::uint8_t> gso_frame(const IpAddr& src, const IpAddr& dst,
                                    const std::vector<Seg>& segs, std::uint16_t id = 7) {
  std::uint32_t total = 0;
  for (const Seg& s : segs) total += s.len;
  std::vector<std::uint8_t> f(wire::kEthernetLen + wire::kIpv6Len + wire::kUdpLen + total);
  f[12] = src.is_v4() ? 0x08 : 0x86;
  f[13] = src.is_v4() ? 0x00 : 0xDD;
  Packet whole;
  whole.dst = dst;
  whole.len = total;
  whole.ipv4_id = id;
  auto ip = build_ip_header(wire::MutBytes(f).subspan(wire::kEthernetLen), whole, src, 64);
  EXPECT_TRUE(ip);
  const std::size_t udp_at = wire::kEthernetLen + *ip;
  wire::Udp udp{0xC123, wire::kRoceV2Port, static_cast<std::uint16_t>(wire::kUdpLen + total), 0};
  EXPECT_TRUE(wire::build_udp(wire::MutBytes(f).subspan(udp_at), udp));
  f.resize(udp_at + wire::kUdpLen + total);
  std::uint8_t* at = f.data() + udp_at + wire::kUdpLen;
  for (std::size_t i = 0; i < segs.size(); ++i) {
    const Seg& s = segs[i];
    for (std::uint32_t k = 0; k < s.len; ++k) at[k] = static_cast<std::uint8_t>(k * 7 + i);
    at[0] = s.opcode;
    at[1] = 0;             // no solicited event, no pad, transport version 0
    at[2] = at[3] = 0xFF;  // the default P_Key
    at[4] = 0;
    at[5] = static_cast<std::uint8_t>(s.qpn >> 16);
    at[6] = static_cast<std::uint8_t>(s.qpn >> 8);
    at[7] = static_cast<std::uint8_t>(s.qpn);
    Packet p;
    p.src = src;
    p.dst = dst;
    p.src_port = udp.src_port;
    p.dst_port = udp.dst_port;
    p.ipv4_id = static_cast<std::uint16_t>(id + i);
    p.data = at;
    p.len = p.cap = s.len;
    EXPECT_TRUE(fill_icrc(p));
    at += s.len;
  }
  return f;
}

const IpAddr kA = IpAddr::v4(0x0A610801), kB = IpAddr::v4(0x0A610802);
constexpr std::uint32_t kQp = 0x000112;

std::uint32_t size_of(const std::vector<std::uint8_t>& f, std::uint32_t mtu = 1500) {
  return uncut_segment_size(f.data(), static_cast<std::uint32_t>(f.size()), mtu);
}

TEST(GsoFrame, FullPacketsOfOnePathMtu) {
  // An RDMA WRITE's first, middles and last at a path MTU of 1024: the first carries a RETH.
  const std::vector<Seg> segs = {{wire::op::kRcWriteMiddle, kQp, 12 + 1024 + 4},
                                 {wire::op::kRcWriteMiddle, kQp, 12 + 1024 + 4},
                                 {wire::op::kRcWriteLast, kQp, 12 + 100 + 4}};
  EXPECT_EQ(size_of(gso_frame(kA, kB, segs)), 1040u);
  const std::vector<Seg> first = {{wire::op::kRcWriteFirst, kQp, 12 + 16 + 1024 + 4},
                                  {wire::op::kRcWriteMiddle, kQp, 12 + 1024 + 4}};
  EXPECT_EQ(size_of(gso_frame(kA, kB, first)), 1056u);
}

TEST(GsoFrame, EqualSmallMessages) {
  std::vector<Seg> segs(30, Seg{wire::op::kRcSendOnly, kQp, 12 + 64 + 4});
  EXPECT_EQ(size_of(gso_frame(kA, kB, segs)), 80u);
}

TEST(GsoFrame, DatagramsOfSeveralQps) {
  std::vector<Seg> segs;
  for (std::uint32_t i = 0; i < 4; ++i) segs.push_back({wire::op::kRcWriteMiddle, kQp + i, 1040});
  EXPECT_EQ(size_of(gso_frame(kA, kB, segs)), 1040u);
}

TEST(GsoFrame, Ipv6) {
  IpAddr a6, b6;
  ASSERT_TRUE(IpAddr::parse("fd97:8::1", a6));
  ASSERT_TRUE(IpAddr::parse("fd97:8::2", b6));
  const std::vector<Seg> segs = {{wire::op::kRcWriteMiddle, kQp, 1040},
                                 {wire::op::kRcWriteMiddle, kQp, 1040}};
  EXPECT_EQ(size_of(gso_frame(a6, b6, segs)), 1040u);
}

TEST(GsoFrame, NoSizeForOneDatagramOrOneThatNeverChecks) {
  const std::vector<Seg> one = {{wire::op::kRcWriteOnly, kQp, 12 + 16 + 1024 + 4}};
  EXPECT_EQ(size_of(gso_frame(kA, kB, one)), 0u);
  // One datagram holding what looks like a BTH of its P_Key: its own ICRC is not the prefix's.
  auto lookalike = gso_frame(kA, kB, one);
  std::uint8_t* d = lookalike.data() + wire::kEthernetLen + wire::kIpv4MinLen + wire::kUdpLen;
  d[400] = wire::op::kRcWriteMiddle;
  d[402] = d[2];
  d[403] = d[3];
  Packet p;
  p.src = kA;
  p.dst = kB;
  p.src_port = 0xC123;
  p.ipv4_id = 7;
  p.data = d;
  p.len = p.cap = 12 + 16 + 1024 + 4;
  ASSERT_TRUE(fill_icrc(p));
  EXPECT_EQ(size_of(lookalike), 0u);
  // A GSO frame within the MTU: two datagrams of an RDMA WRITE at a path MTU of 4096, or two
  // small messages.
  const std::vector<Seg> jumbo = {{wire::op::kRcWriteFirst, kQp, 12 + 16 + 4096 + 4},
                                  {wire::op::kRcWriteMiddle, kQp, 12 + 4096 + 4}};
  EXPECT_EQ(size_of(gso_frame(kA, kB, jumbo), 9000), 4128u);
  const std::vector<Seg> two = {{wire::op::kRcSendOnly, kQp, 80}, {wire::op::kRcSendOnly, kQp, 80}};
  EXPECT_EQ(size_of(gso_frame(kA, kB, two)), 80u);
  // The first datagram's ICRC is wrong: no length is trusted.
  std::vector<Seg> segs(3, Seg{wire::op::kRcWriteMiddle, kQp, 1040});
  auto f = gso_frame(kA, kB, segs);
  f[wire::kEthernetLen + wire::kIpv4MinLen + wire::kUdpLen + 1036] ^= 1;
  EXPECT_EQ(size_of(f), 0u);
  // Not RoCEv2, or cut short.
  auto other = gso_frame(kA, kB, segs);
  other[wire::kEthernetLen + wire::kIpv4MinLen + 3] = 0x12;  // UDP destination port 4626
  EXPECT_EQ(size_of(other), 0u);
  EXPECT_EQ(uncut_segment_size(f.data(), 40, 1500), 0u);
}

}  // namespace
}  // namespace softrdma::netdev
