// A raw Ethernet backend that can also carry a userspace TCP (Steering::kTcp): the FramePort
// parts every such backend shares (sending a whole frame, counted, with the link's VLAN tag put
// in; taking a received frame's tag off; the link's MAC, MTU and VLAN). The backend gives the
// rest (frame_fd, recv_frames, its ring counters).
#pragma once

#include <vector>

#include "netdev/frame_port.h"
#include "netdev/raw_eth.h"

namespace softrdma::netdev {

class RawFramePortNetdev : public RawEthNetdev, public FramePort {
 public:
  // put_frame, counted in tx_packets and tx_bytes, or in tx_errors when refused; on a VLAN the
  // frame leaves with the link's tag after its addresses.
  bool send_frame(const std::uint8_t* frame, std::size_t len) override;
  wire::MacAddr frame_mac() const override { return link_.mac; }
  std::uint32_t frame_mtu() const override { return link_.mtu; }
  std::optional<std::uint16_t> frame_vlan() const override { return link_.vlan_tci; }

 protected:
  // A received frame for recv_frames: on a VLAN, a frame tagged with the link's VLAN loses its
  // tag (its addresses moved up over it: `frame` then starts 4 bytes later), true; false for a
  // frame of another VLAN or none (counted as not ours). Without a VLAN, or where the kernel
  // took the tag off and checked it (vlan_checked_below_), true and the frame as it is.
  bool untag(std::uint8_t*& frame, std::uint32_t& len);

 private:
  std::vector<std::uint8_t> tagged_;  // a frame with the tag put in (the sending thread's)
};

}  // namespace softrdma::netdev
