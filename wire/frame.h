// Decodes a captured frame's link, network and transport layers down to the
// transport payload: what lint and the trace reader need to find RoCEv2 and iWARP.
#pragma once

#include <cstdint>
#include <optional>

#include "wire/net.h"

namespace softrdma::wire {

// pcap link-layer types we understand (LINKTYPE_* values).
enum class LinkType : std::uint16_t {
  kEthernet = 1,
  kRaw = 101,        // raw IPv4/IPv6
  kLinuxSll = 113,   // Linux cooked v1
  kLinuxSll2 = 276,  // Linux cooked v2
};
bool link_type_supported(int linktype);

struct FrameView {
  std::optional<Ethernet> eth;  // absent for cooked and raw captures
  bool is_ipv6 = false;
  Ipv4 ipv4;        // valid when !is_ipv6
  Ipv6 ipv6;        // valid when is_ipv6
  Bytes ip_header;  // the IP header bytes (without options for v6 extension headers)
  std::uint8_t l4_proto = 0;
  std::optional<Udp> udp;
  std::optional<Tcp> tcp;
  Bytes l4_segment;  // transport header + payload as the IP length says
  Bytes payload;     // transport payload
};

// Fails with kTruncated, kBadLength, kBadVersion … where a layer is cut short or
// malformed, and kNotRoce where the frame is not IP carrying UDP or TCP.
Expected<FrameView> parse_frame(Bytes frame, int linktype);

}  // namespace softrdma::wire
