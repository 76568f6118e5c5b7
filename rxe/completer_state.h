// What the completer owns: the oldest unacknowledged PSN, the retry budgets and the
// retransmission and RNR timers. rxe::Qp holds one.
#pragma once

#include <chrono>
#include <cstdint>

namespace softrdma::rxe {

using Clock = std::chrono::steady_clock;

struct CompleterState {
  std::uint32_t unacked_psn_ = 0;  // oldest PSN not yet acknowledged
  int retry_left_ = 0;
  int rnr_retry_left_ = 0;
  std::uint32_t rnr_psn_ = 0;  // where to resume when the RNR timer fires
  Clock::time_point retransmit_deadline_ = Clock::time_point::max();
  Clock::time_point rnr_deadline_ = Clock::time_point::max();
};

}  // namespace softrdma::rxe
