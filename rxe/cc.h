// A device's congestion-control settings (`--cc`, SOFTRDMA_CC): DCQCN, with ECT on data packets,
// CNPs for CE-marked ones and a paced requester, or none. See docs/congestion.md.
#pragma once

#include <chrono>
#include <string>

#include "rxe/dcqcn.h"

namespace softrdma::rxe {

struct CcConfig {
  bool dcqcn = true;
  DcqcnParams rp;  // reaction point (RC; UC and UD take rp_unreliable() of it)
  // Pace at the line rate too (when it was given): the emulated link is the line rate's, not the
  // host's. Off by default: a QP at line rate is not paced at all.
  bool pace_line_rate = false;
  // Without a switch, mark CE (UC and UD only) on the receive path's own backlog
  // (netdev/backlog_marker.h); `backlog=off` turns it off. See docs/congestion.md.
  bool mark_backlog = true;
  // Notification point: at most one CNP per QP per interval (mlx5's min_time_between_cnps).
  std::chrono::nanoseconds cnp_interval{50'000};
  // A UD datagram that finds no receive WQE waits this long for one (rxe/ud_hold.h; a deep hold
  // is congestion), then is dropped; `ud_hold_us=0` (and `none`) drop it at once.
  std::chrono::microseconds ud_hold{50'000};
};

// UC and UD react to every CNP: unlike mlx5 (and RC here) none is ignored for coming within the
// rate-reduce period of the last cut. The notification point already spaces its CNPs by
// cnp_interval, and CNPs that wait in a socket or ring for the next progress pass arrive bunched,
// each standing for an interval of congestion at the receiver. For a transport that does not
// resend, a datagram lost costs more than a rate cut too many: ignoring all but the first of a
// bunch left unpaced UD 35-40% lossy. (RC keeps the period: every cut of a bunch taken made an
// incast through --switch half as fast.)
inline DcqcnParams rp_unreliable(DcqcnParams p) {
  p.rate_reduce_period = {};
  return p;
}

// "dcqcn" (or "") and "none"; dcqcn may go on with ",cnp_interval_us=N", ",line_rate=RATE"
// (where a QP starts and what it never exceeds: the sending link's rate, 100G by default) and
// ",backlog=on|off" and ",ud_hold_us=N". False and `error` on anything else; `out` is then
// unspecified.
bool parse_cc(const std::string& spec, CcConfig& out, std::string& error);

// The IP header's ECN field (the low two bits of the TOS / traffic class byte).
inline constexpr std::uint8_t kEcnMask = 0x3, kEcnEct0 = 0x2, kEcnCe = 0x3;
inline bool ecn_capable(std::uint8_t tc) {
  return (tc & kEcnMask) != 0;
}
inline bool ecn_ce(std::uint8_t tc) {
  return (tc & kEcnMask) == kEcnCe;
}
// CNPs leave with DSCP 48, not ECN-capable (mlx5's cnp_dscp default).
inline constexpr std::uint8_t kCnpTrafficClass = 48 << 2;

}  // namespace softrdma::rxe
