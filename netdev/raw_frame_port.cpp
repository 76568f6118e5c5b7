#include "netdev/raw_frame_port.h"

#include <cstring>

#include "wire/bytes.h"
#include "wire/net.h"

namespace softrdma::netdev {

namespace {

constexpr std::size_t kAddrs = 12;  // destination and source MAC

}  // namespace

bool RawFramePortNetdev::send_frame(const std::uint8_t* frame, std::size_t len) {
  if (link_.vlan_tci && len >= wire::kEthernetLen) {
    tagged_.resize(len + wire::kVlanTagLen);
    std::memcpy(tagged_.data(), frame, kAddrs);
    wire::store16(tagged_.data() + kAddrs, wire::kEthertypeVlan);
    wire::store16(tagged_.data() + kAddrs + 2, *link_.vlan_tci);
    std::memcpy(tagged_.data() + kAddrs + wire::kVlanTagLen, frame + kAddrs, len - kAddrs);
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
  if (len < wire::kEthernetLen + wire::kVlanTagLen ||
      wire::load16(frame + kAddrs) != wire::kEthertypeVlan ||
      (wire::load16(frame + kAddrs + 2) & 0xFFF) != (*link_.vlan_tci & 0xFFF)) {
    bump(counters_.rx_not_ours);
    return false;
  }
  std::memmove(frame + wire::kVlanTagLen, frame, kAddrs);
  frame += wire::kVlanTagLen;
  len -= static_cast<std::uint32_t>(wire::kVlanTagLen);
  return true;
}

}  // namespace softrdma::netdev
