#include "rxe/ack_hold.h"

namespace softrdma::rxe {

void AckHold::request_started(Clock::time_point now) {
  const bool reply = received_at_ != Clock::time_point::min() && now - received_at_ <= kHold;
  received_at_ = Clock::time_point::min();  // one reply per request received
  if (!reply) {
    quick_ = 0;
  } else if (quick_ < kQuickToEngage) {
    ++quick_;
  }
}

bool AckHold::hold(Clock::time_point now) {
  if (!engaged()) return false;
  if (deadline_ == Clock::time_point::max()) deadline_ = now + kHold;
  return now < deadline_;
}

bool AckHold::expire(Clock::time_point now) {
  if (deadline_ > now) return false;  // (none armed: max)
  reset();                            // this traffic is not request/reply, or no longer
  return true;
}

}  // namespace softrdma::rxe
