// Ethernet (with optional 802.1Q tag), IPv4, IPv6, UDP and TCP header codecs and
// the Internet checksums. parse_* never read past their span; build_* return the
// number of bytes written or kNoRoom.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "wire/bytes.h"

namespace softrdma::wire {

inline constexpr std::uint16_t kEthertypeIpv4 = 0x0800;
inline constexpr std::uint16_t kEthertypeIpv6 = 0x86DD;
inline constexpr std::uint16_t kEthertypeArp = 0x0806;
inline constexpr std::uint16_t kEthertypeVlan = 0x8100;
inline constexpr std::uint8_t kIpProtoTcp = 6;
inline constexpr std::uint8_t kIpProtoUdp = 17;
inline constexpr std::size_t kEthernetLen = 14;
inline constexpr std::size_t kVlanTagLen = 4;
inline constexpr std::size_t kIpv4MinLen = 20;
inline constexpr std::size_t kIpv6Len = 40;
inline constexpr std::size_t kUdpLen = 8;
inline constexpr std::size_t kTcpMinLen = 20;

using MacAddr = std::array<std::uint8_t, 6>;
using Ipv6Addr = std::array<std::uint8_t, 16>;

struct Ethernet {
  MacAddr dst{};
  MacAddr src{};
  std::optional<std::uint16_t> vlan_tci;  // present when the frame carries an 802.1Q tag
  std::uint16_t ethertype = 0;            // the inner ethertype when tagged
  std::size_t header_len() const { return kEthernetLen + (vlan_tci ? kVlanTagLen : 0); }
};
Expected<Ethernet> parse_ethernet(Bytes in);
Expected<std::size_t> build_ethernet(MutBytes out, const Ethernet& h);
// The 802.1Q tag (TPID 0x8100, then `tci`) as it follows an Ethernet frame's addresses.
std::array<std::uint8_t, kVlanTagLen> vlan_tag(std::uint16_t tci);
// An untagged Ethernet frame (its 12 address bytes at least) with that tag put in after its
// addresses, into `out` (resized: no allocation once it has held a frame as long).
void insert_vlan_tag(Bytes frame, std::uint16_t tci, std::vector<std::uint8_t>& out);

struct Ipv4 {
  std::uint8_t ihl_bytes = kIpv4MinLen;  // header length in bytes (options are kept opaque)
  std::uint8_t tos = 0;                  // DSCP << 2 | ECN
  std::uint16_t total_len = 0;
  std::uint16_t id = 0;
  bool df = true;
  bool mf = false;
  std::uint16_t frag_offset = 0;  // in 8-byte units
  std::uint8_t ttl = 64;
  std::uint8_t protocol = 0;
  std::uint16_t checksum = 0;
  std::uint32_t src = 0;  // host order
  std::uint32_t dst = 0;
};
// Checks version, IHL and that total_len fits the span; does not verify the checksum.
Expected<Ipv4> parse_ipv4(Bytes in);
// Writes a 20-byte header (ihl_bytes is ignored) with a freshly computed checksum.
Expected<std::size_t> build_ipv4(MutBytes out, const Ipv4& h);
// The one's-complement header checksum of `hdr` (checksum field taken as it is):
// 0 when a received header is intact.
std::uint16_t ipv4_header_checksum(Bytes hdr);

struct Ipv6 {
  std::uint8_t traffic_class = 0;
  std::uint32_t flow_label = 0;  // 20 bits
  std::uint16_t payload_len = 0;
  std::uint8_t next_header = 0;
  std::uint8_t hop_limit = 64;
  Ipv6Addr src{};
  Ipv6Addr dst{};
};
Expected<Ipv6> parse_ipv6(Bytes in);
Expected<std::size_t> build_ipv6(MutBytes out, const Ipv6& h);

struct Udp {
  std::uint16_t src_port = 0;
  std::uint16_t dst_port = 0;
  std::uint16_t length = 0;  // header + payload
  std::uint16_t checksum = 0;
};
// Checks that length covers the header and fits the span.
Expected<Udp> parse_udp(Bytes in);
Expected<std::size_t> build_udp(MutBytes out, const Udp& h);

struct Tcp {
  std::uint16_t src_port = 0;
  std::uint16_t dst_port = 0;
  std::uint32_t seq = 0;
  std::uint32_t ack = 0;
  std::uint8_t header_len = kTcpMinLen;  // data offset in bytes
  std::uint8_t flags = 0;                // CWR ECE URG ACK PSH RST SYN FIN
  std::uint16_t window = 0;
  std::uint16_t checksum = 0;
  std::uint16_t urgent = 0;
};
inline constexpr std::uint8_t kTcpFin = 0x01, kTcpSyn = 0x02, kTcpRst = 0x04, kTcpPsh = 0x08,
                              kTcpAck = 0x10;
Expected<Tcp> parse_tcp(Bytes in);
// Writes a 20-byte header (no options; header_len is ignored); checksum as given.
Expected<std::size_t> build_tcp(MutBytes out, const Tcp& h);

// One's-complement sum helpers for transport checksums (RFC 768/793/8200).
std::uint32_t checksum_add(std::uint32_t sum, Bytes data);
std::uint16_t checksum_fold(std::uint32_t sum);
// Transport checksum of `segment` (header + payload, checksum field as present)
// with the IPv4 or IPv6 pseudo-header. Returns the value to store when the field
// is zero, or 0 when verifying an intact segment.
std::uint16_t l4_checksum_ipv4(std::uint32_t src, std::uint32_t dst, std::uint8_t proto,
                               Bytes segment);
std::uint16_t l4_checksum_ipv6(const Ipv6Addr& src, const Ipv6Addr& dst, std::uint8_t proto,
                               Bytes segment);
// What a checksum offload expects in the transport checksum field of a segment it completes
// (CHECKSUM_PARTIAL): the IPv4 (or IPv6) pseudo-header sum over `len` transport bytes, folded
// and not complemented.
std::uint16_t l4_partial_checksum_ipv4(std::uint32_t src, std::uint32_t dst, std::uint8_t proto,
                                       std::uint32_t len);
std::uint16_t l4_partial_checksum_ipv6(const Ipv6Addr& src, const Ipv6Addr& dst, std::uint8_t proto,
                                       std::uint32_t len);

}  // namespace softrdma::wire
