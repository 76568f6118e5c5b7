#include "wire/net.h"

#include <algorithm>
#include <bit>

#include "wire/inet_sum.h"

namespace softrdma::wire {

Expected<Ethernet> parse_ethernet(Bytes in) {
  if (in.size() < kEthernetLen) return Error::kTruncated;
  Ethernet h;
  std::copy_n(in.data(), 6, h.dst.begin());
  std::copy_n(in.data() + 6, 6, h.src.begin());
  h.ethertype = load16(in.data() + 12);
  if (h.ethertype == kEthertypeVlan) {
    if (in.size() < kEthernetLen + kVlanTagLen) return Error::kTruncated;
    h.vlan_tci = load16(in.data() + 14);
    h.ethertype = load16(in.data() + 16);
  }
  return h;
}

Expected<std::size_t> build_ethernet(MutBytes out, const Ethernet& h) {
  const std::size_t len = h.header_len();
  if (out.size() < len) return Error::kNoRoom;
  std::copy(h.dst.begin(), h.dst.end(), out.data());
  std::copy(h.src.begin(), h.src.end(), out.data() + 6);
  std::size_t off = 12;
  if (h.vlan_tci) {
    store16(out.data() + 12, kEthertypeVlan);
    store16(out.data() + 14, *h.vlan_tci);
    off = 16;
  }
  store16(out.data() + off, h.ethertype);
  return len;
}

std::array<std::uint8_t, kVlanTagLen> vlan_tag(std::uint16_t tci) {
  std::array<std::uint8_t, kVlanTagLen> t{};
  store16(t.data(), kEthertypeVlan);
  store16(t.data() + 2, tci);
  return t;
}

void insert_vlan_tag(Bytes frame, std::uint16_t tci, std::vector<std::uint8_t>& out) {
  constexpr std::size_t kAddrs = 12;
  out.resize(frame.size() + kVlanTagLen);
  std::copy_n(frame.data(), kAddrs, out.data());
  const auto tag = vlan_tag(tci);
  std::copy(tag.begin(), tag.end(), out.data() + kAddrs);
  std::copy(frame.begin() + kAddrs, frame.end(), out.data() + kAddrs + kVlanTagLen);
}

std::uint32_t checksum_add(std::uint32_t sum, Bytes data) {
  const std::uint16_t h = ones_sum_host(data.data(), data.size());
  if constexpr (std::endian::native == std::endian::little) {
    return sum + static_cast<std::uint16_t>(h << 8 | h >> 8);
  } else {
    return sum + h;
  }
}

std::uint16_t checksum_fold(std::uint32_t sum) {
  while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
  return static_cast<std::uint16_t>(~sum & 0xFFFF);
}

std::uint16_t ipv4_header_checksum(Bytes hdr) {
  return checksum_fold(checksum_add(0, hdr));
}

Expected<Ipv4> parse_ipv4(Bytes in) {
  if (in.size() < kIpv4MinLen) return Error::kTruncated;
  if ((in[0] >> 4) != 4) return Error::kBadVersion;
  Ipv4 h;
  h.ihl_bytes = static_cast<std::uint8_t>((in[0] & 0x0F) * 4);
  if (h.ihl_bytes < kIpv4MinLen) return Error::kBadLength;
  if (in.size() < h.ihl_bytes) return Error::kTruncated;
  h.tos = in[1];
  h.total_len = load16(in.data() + 2);
  if (h.total_len < h.ihl_bytes) return Error::kBadLength;
  if (h.total_len > in.size()) return Error::kTruncated;
  h.id = load16(in.data() + 4);
  const std::uint16_t frag = load16(in.data() + 6);
  if (frag & 0x8000) return Error::kReservedBits;
  h.df = frag & 0x4000;
  h.mf = frag & 0x2000;
  h.frag_offset = frag & 0x1FFF;
  h.ttl = in[8];
  h.protocol = in[9];
  h.checksum = load16(in.data() + 10);
  h.src = load32(in.data() + 12);
  h.dst = load32(in.data() + 16);
  return h;
}

Expected<std::size_t> build_ipv4(MutBytes out, const Ipv4& h) {
  if (out.size() < kIpv4MinLen) return Error::kNoRoom;
  if (h.frag_offset > 0x1FFF) return Error::kBadValue;
  std::uint8_t* p = out.data();
  p[0] = 0x45;
  p[1] = h.tos;
  store16(p + 2, h.total_len);
  store16(p + 4, h.id);
  store16(p + 6,
          static_cast<std::uint16_t>((h.df ? 0x4000 : 0) | (h.mf ? 0x2000 : 0) | h.frag_offset));
  p[8] = h.ttl;
  p[9] = h.protocol;
  store16(p + 10, 0);
  store32(p + 12, h.src);
  store32(p + 16, h.dst);
  store16(p + 10, ipv4_header_checksum(out.first(kIpv4MinLen)));
  return kIpv4MinLen;
}

Expected<Ipv6> parse_ipv6(Bytes in) {
  if (in.size() < kIpv6Len) return Error::kTruncated;
  const std::uint32_t w0 = load32(in.data());
  if ((w0 >> 28) != 6) return Error::kBadVersion;
  Ipv6 h;
  h.traffic_class = static_cast<std::uint8_t>((w0 >> 20) & 0xFF);
  h.flow_label = w0 & 0xFFFFF;
  h.payload_len = load16(in.data() + 4);
  if (kIpv6Len + h.payload_len > in.size()) return Error::kTruncated;
  h.next_header = in[6];
  h.hop_limit = in[7];
  std::copy_n(in.data() + 8, 16, h.src.begin());
  std::copy_n(in.data() + 24, 16, h.dst.begin());
  return h;
}

Expected<std::size_t> build_ipv6(MutBytes out, const Ipv6& h) {
  if (out.size() < kIpv6Len) return Error::kNoRoom;
  if (h.flow_label > 0xFFFFF) return Error::kBadValue;
  store32(out.data(),
          (6u << 28) | (static_cast<std::uint32_t>(h.traffic_class) << 20) | h.flow_label);
  store16(out.data() + 4, h.payload_len);
  out[6] = h.next_header;
  out[7] = h.hop_limit;
  std::copy(h.src.begin(), h.src.end(), out.data() + 8);
  std::copy(h.dst.begin(), h.dst.end(), out.data() + 24);
  return kIpv6Len;
}

Expected<Udp> parse_udp(Bytes in) {
  if (in.size() < kUdpLen) return Error::kTruncated;
  Udp h;
  h.src_port = load16(in.data());
  h.dst_port = load16(in.data() + 2);
  h.length = load16(in.data() + 4);
  h.checksum = load16(in.data() + 6);
  if (h.length < kUdpLen) return Error::kBadLength;
  if (h.length > in.size()) return Error::kTruncated;
  return h;
}

Expected<std::size_t> build_udp(MutBytes out, const Udp& h) {
  if (out.size() < kUdpLen) return Error::kNoRoom;
  store16(out.data(), h.src_port);
  store16(out.data() + 2, h.dst_port);
  store16(out.data() + 4, h.length);
  store16(out.data() + 6, h.checksum);
  return kUdpLen;
}

Expected<Tcp> parse_tcp(Bytes in) {
  if (in.size() < kTcpMinLen) return Error::kTruncated;
  Tcp h;
  h.src_port = load16(in.data());
  h.dst_port = load16(in.data() + 2);
  h.seq = load32(in.data() + 4);
  h.ack = load32(in.data() + 8);
  h.header_len = static_cast<std::uint8_t>((in[12] >> 4) * 4);
  if (h.header_len < kTcpMinLen) return Error::kBadLength;
  if (h.header_len > in.size()) return Error::kTruncated;
  h.flags = in[13];
  h.window = load16(in.data() + 14);
  h.checksum = load16(in.data() + 16);
  h.urgent = load16(in.data() + 18);
  return h;
}

Expected<std::size_t> build_tcp(MutBytes out, const Tcp& h) {
  if (out.size() < kTcpMinLen) return Error::kNoRoom;
  std::uint8_t* p = out.data();
  store16(p, h.src_port);
  store16(p + 2, h.dst_port);
  store32(p + 4, h.seq);
  store32(p + 8, h.ack);
  p[12] = static_cast<std::uint8_t>((kTcpMinLen / 4) << 4);
  p[13] = h.flags;
  store16(p + 14, h.window);
  store16(p + 16, h.checksum);
  store16(p + 18, h.urgent);
  return kTcpMinLen;
}

namespace {
std::uint32_t ipv4_pseudo_header_sum(std::uint32_t src, std::uint32_t dst, std::uint8_t proto,
                                     std::uint32_t len) {
  return (src >> 16) + (src & 0xFFFF) + (dst >> 16) + (dst & 0xFFFF) + proto + len;
}
}  // namespace

std::uint16_t l4_checksum_ipv4(std::uint32_t src, std::uint32_t dst, std::uint8_t proto,
                               Bytes segment) {
  const std::uint32_t sum =
      ipv4_pseudo_header_sum(src, dst, proto, static_cast<std::uint32_t>(segment.size()));
  return checksum_fold(checksum_add(sum, segment));
}

std::uint16_t l4_partial_checksum_ipv4(std::uint32_t src, std::uint32_t dst, std::uint8_t proto,
                                       std::uint32_t len) {
  return static_cast<std::uint16_t>(~checksum_fold(ipv4_pseudo_header_sum(src, dst, proto, len)));
}

namespace {

std::uint32_t ipv6_pseudo_header_sum(const Ipv6Addr& src, const Ipv6Addr& dst, std::uint8_t proto,
                                     std::uint32_t len) {
  std::uint32_t sum = checksum_add(0, Bytes(src));
  sum = checksum_add(sum, Bytes(dst));
  sum += (len >> 16) + (len & 0xFFFF);
  return sum + proto;
}

}  // namespace

std::uint16_t l4_checksum_ipv6(const Ipv6Addr& src, const Ipv6Addr& dst, std::uint8_t proto,
                               Bytes segment) {
  const auto len = static_cast<std::uint32_t>(segment.size());
  return checksum_fold(checksum_add(ipv6_pseudo_header_sum(src, dst, proto, len), segment));
}

std::uint16_t l4_partial_checksum_ipv6(const Ipv6Addr& src, const Ipv6Addr& dst, std::uint8_t proto,
                                       std::uint32_t len) {
  return static_cast<std::uint16_t>(~checksum_fold(ipv6_pseudo_header_sum(src, dst, proto, len)));
}

}  // namespace softrdma::wire
