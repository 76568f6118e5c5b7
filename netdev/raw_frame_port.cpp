#include "netdev/raw_frame_port.h"

namespace softrdma::netdev {

bool RawFramePortNetdev::send_frame(const std::uint8_t* frame, std::size_t len) {
  if (put_frame(frame, len)) {
    bump(counters_.tx_packets);
    bump(counters_.tx_bytes, len);
    return true;
  }
  bump(counters_.tx_errors);
  return false;
}

}  // namespace softrdma::netdev
