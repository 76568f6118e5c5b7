#include "netdev/raw_frame_port.h"

#include <cstring>

#include "wire/bytes.h"
#include "wire/net.h"

namespace softrdma::netdev {

bool RawFramePortNetdev::send_frame(const std::uint8_t* frame, std::size_t len) {
  if (link_.vlan_tci && len >= wire::kEthernetLen) {
    wire::insert_vlan_tag(wire::Bytes(frame, len), *link_.vlan_tci, tagged_);
    frame = tagged_.data();
    len = tagged_.size();
  }
  if (put_frame(frame, len)) {
    bump(counters_.tx_packets);
    bump(counters_.tx_bytes, len);
    return true;
  }
  bump(counters_.tx_errors);
  return false;
}

bool RawFramePortNetdev::untag(std::uint8_t*& frame, std::uint32_t& len) {
  if (!link_.vlan_tci || vlan_checked_below_) return true;
  const auto eth = wire::parse_ethernet(wire::Bytes(frame, len));
  if (!eth || !vlan_ours(eth->vlan_tci)) {  // untagged, or another VLAN's
    bump(counters_.rx_not_ours);
    return false;
  }
  std::memmove(frame + wire::kVlanTagLen, frame, 12);  // the addresses, over the tag
  frame += wire::kVlanTagLen;
  len -= static_cast<std::uint32_t>(wire::kVlanTagLen);
  return true;
}

}  // namespace softrdma::netdev
