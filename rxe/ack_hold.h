// Delayed ACKs for request/reply traffic, as TCP delays its ACKs in interactive mode: once a
// QP's own requests have followed the requests it received within kHold a few times in a row,
// the ACK owed for a received message waits, up to kHold, for the QP's next request and leaves
// in the same batch, just after its packets. The peer, polling its CQ for that ACK, then takes the
// request in the same pass instead of waiting for its progress thread (a program that polls
// memory, as ib_write_lat does across hosts). An ACK that waited in vain leaves alone at its
// deadline and ends the mode. The QP's lock.
#pragma once

#include <chrono>
#include <cstdint>

namespace softrdma::rxe {

class AckHold {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr auto kHold = std::chrono::microseconds(50);
  static constexpr std::uint8_t kQuickToEngage = 3;  // replies within kHold in a row

  // An ACK was queued for a request message received at `now`.
  void request_received(Clock::time_point now) { received_at_ = now; }
  // The requester started a WQE at `now`: a reply if a request came within kHold before.
  void request_started(Clock::time_point now);
  // May the queued ACK wait now? The first call for an ACK arms the deadline; false once it has
  // passed (expire then ends the mode).
  bool hold(Clock::time_point now);
  // The deadline has passed, nobody having replied in time: the mode ends. True if it did (the
  // one place an ACK that waited in vain is told, whoever notices first: the timer or a pass).
  bool expire(Clock::time_point now);
  // The ACK left (with a request, or anything else the responder sends).
  void released() { deadline_ = Clock::time_point::max(); }
  // Armed while an ACK waits.
  Clock::time_point deadline() const { return deadline_; }
  bool engaged() const { return quick_ >= kQuickToEngage; }
  void reset() { *this = AckHold{}; }

 private:
  Clock::time_point received_at_ = Clock::time_point::min();
  Clock::time_point deadline_ = Clock::time_point::max();
  std::uint8_t quick_ = 0;
};

}  // namespace softrdma::rxe
