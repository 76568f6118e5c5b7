// A raw Ethernet backend that can also carry a userspace TCP (Steering::kTcp): the FramePort
// parts every such backend shares (sending a whole frame, counted; the link's MAC and MTU). The
// backend gives the rest (frame_fd, recv_frames, its ring counters).
#pragma once

#include "netdev/frame_port.h"
#include "netdev/raw_eth.h"

namespace softrdma::netdev {

class RawFramePortNetdev : public RawEthNetdev, public FramePort {
 public:
  // put_frame, counted in tx_packets and tx_bytes, or in tx_errors when refused.
  bool send_frame(const std::uint8_t* frame, std::size_t len) override;
  wire::MacAddr frame_mac() const override { return link_.mac; }
  std::uint32_t frame_mtu() const override { return link_.mtu; }
};

}  // namespace softrdma::netdev
