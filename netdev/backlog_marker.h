// CE marking without a switch: while the receive path falls behind (a receive batch comes back
// full twice running: datagrams queue in front of the device), ECN-capable UC and UD datagrams
// are marked CE, as a congested port in front of it would mark them (RC's send window already
// keeps it from overrunning the receiver; marking it only cost throughput). Sits below tracing,
// so traces show the marks. See docs/congestion.md.
#pragma once

#include <atomic>

#include "netdev/forwarding.h"

namespace softrdma::netdev {

class BacklogMarkerNetdev : public ForwardingNetdev {
 public:
  using ForwardingNetdev::ForwardingNetdev;
  std::size_t recv_batch(std::span<Packet* const> pkts) override;
  Counters counters() const override;

 private:
  bool last_full_ = false;  // receiving thread only
  std::atomic<std::uint64_t> marked_{0};
};

}  // namespace softrdma::netdev
