// PFC at the sending device: a switch port's pause frame (netdev/pause_frame.h) holds back the
// requests of the priorities it names, for its quanta at this device's line rate or until a
// frame with zero quanta lifts it; ACKs and responses still go. See docs/congestion.md.
#include "netdev/pause_frame.h"
#include "rxe/device.h"
#include "rxe/qp.h"

namespace softrdma::rxe {

void Device::rx_pause(const netdev::Packet& raw) {
  const auto f = netdev::parse_pause(raw);
  if (!f) {
    rx_pause_bad_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  rx_pause_.fetch_add(1, std::memory_order_relaxed);
  const auto now = Clock::now();
  bool resumed = false;
  for (std::uint8_t prio = 0; prio < 8; ++prio) {
    if (!(f->enabled & (1u << prio))) continue;
    const std::int64_t until =
        f->quanta[prio] == 0 ? 0
                             : (now + netdev::pause_time(f->quanta[prio], cc_.rp.line_rate_bps))
                                   .time_since_epoch()
                                   .count();
    resumed |= until == 0;
    paused_until_ns_[prio].store(until, std::memory_order_relaxed);
  }
  if (!resumed) return;
  for (std::uint32_t qpn : pause_waiters_) {
    auto it = qps_.find(qpn);
    if (it == qps_.end()) continue;  // destroyed
    it->second->pause_waiting_ = false;
    activate(*it->second);
  }
  pause_waiters_.clear();
}

bool Qp::pfc_allows(std::uint8_t tc, Clock::time_point now) {
  const Clock::time_point until = dev_.paused_until(netdev::pfc_priority(tc));
  if (until <= now) return true;
  ++counters_.rp_pause_waits;
  pace_deadline_ = std::min(pace_deadline_, until);
  if (!pause_waiting_) {
    pause_waiting_ = true;
    dev_.wait_for_resume(qpn_);
  }
  return false;
}

}  // namespace softrdma::rxe
