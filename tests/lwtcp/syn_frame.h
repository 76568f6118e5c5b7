// Test frames for lwtcp's SYN option rewrites: Ethernet, IPv4 and TCP with chosen options and
// flags, both checksums complete.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "wire/bytes.h"
#include "wire/net.h"

namespace softrdma::lwtcp::test {

using Frame = std::vector<std::uint8_t>;
inline constexpr std::size_t kTcpAt = 14 + 20;
inline constexpr std::uint32_t kSrc = 0x0A000001, kDst = 0x0A000002;
inline constexpr std::uint16_t kSrcPort = 49152, kDstPort = 18515;

// A segment from kSrc:src_port to kDst:kDstPort with `options` (a multiple of 4 bytes).
inline Frame syn(const std::vector<std::uint8_t>& options, std::uint8_t flags = wire::kTcpSyn,
                 std::uint16_t src_port = kSrcPort) {
  Frame f(kTcpAt + 20 + options.size());
  wire::Ethernet e;
  e.ethertype = wire::kEthertypeIpv4;
  (void)wire::build_ethernet(wire::MutBytes(f), e);
  wire::Ipv4 ip;
  ip.total_len = static_cast<std::uint16_t>(f.size() - 14);
  ip.protocol = 6;
  ip.src = kSrc;
  ip.dst = kDst;
  (void)wire::build_ipv4(wire::MutBytes(f).subspan(14), ip);
  wire::Tcp t;
  t.src_port = src_port;
  t.dst_port = kDstPort;
  t.seq = 0x12345678;
  t.flags = flags;
  t.window = 65535;
  (void)wire::build_tcp(wire::MutBytes(f).subspan(kTcpAt), t);
  f[kTcpAt + 12] = static_cast<std::uint8_t>((20 + options.size()) / 4 << 4);
  std::copy(options.begin(), options.end(), f.begin() + kTcpAt + 20);
  wire::store16(f.data() + kTcpAt + 16, 0);
  wire::store16(f.data() + kTcpAt + 16,
                wire::l4_checksum_ipv4(kSrc, kDst, 6, wire::Bytes(f).subspan(kTcpAt)));
  return f;
}

inline bool checksum_good(const Frame& f) {
  return wire::l4_checksum_ipv4(kSrc, kDst, 6, wire::Bytes(f).subspan(kTcpAt)) == 0;
}

inline std::uint32_t size32(const Frame& f) {
  return static_cast<std::uint32_t>(f.size());
}

}  // namespace softrdma::lwtcp::test
