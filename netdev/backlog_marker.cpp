#include "netdev/backlog_marker.h"

namespace softrdma::netdev {

std::size_t BacklogMarkerNetdev::recv_batch(std::span<Packet* const> pkts) {
  const std::size_t n = ForwardingNetdev::recv_batch(pkts);
  const bool full = n == pkts.size() && n > 1;
  if (full && last_full_) {
    std::uint64_t marked = 0;
    for (std::size_t i = 0; i < n; ++i) {
      std::uint8_t& tc = pkts[i]->traffic_class;
      const std::uint8_t ecn = tc & 3;
      // UC and UD only (BTH opcode's transport bits 001 and 011): RC's send window already
      // keeps it from overrunning the receiver.
      const std::uint8_t transport = pkts[i]->len ? pkts[i]->data[0] >> 5 : 0;
      if ((ecn == 1 || ecn == 2) && (transport == 1 || transport == 3)) {
        tc |= 3;
        ++marked;
      }
    }
    if (marked) bump(marked_, marked);
  }
  last_full_ = full;
  return n;
}

Counters BacklogMarkerNetdev::counters() const {
  Counters c = ForwardingNetdev::counters();
  c.backlog_ce_marked += marked_.load(std::memory_order_relaxed);
  return c;
}

}  // namespace softrdma::netdev
