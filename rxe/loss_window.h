// RC's loss-adaptive send window, in packets: each loss the responder reports (a PSN sequence
// error NAK for a later PSN than the last one) and each retransmission timeout halves it, not
// below kMin; every window's worth of packets acknowledged after that grows it by one, back up
// to kMax. It caps the device's share (Device::window_for), so that a receiver that holds fewer
// packets than that share (a NIC's ring, DPDK's queues) is overrun a few times, not by every
// go-back-N resend. The requester's thread only.
#pragma once

#include <cstdint>

namespace softrdma::rxe {

class LossWindow {
 public:
  static constexpr std::uint32_t kMin = 16, kMax = 2048;
  std::uint32_t limit() const { return limit_; }
  // A loss at `psn` (the first PSN to send again) while the device's share was `share`
  // packets: true when it cut the limit (to half of the smaller of the two); false for a loss at or
  // before the last one's PSN while that is still unacknowledged (a NAK repeated or reordered, a
  // timeout again on the same packet).
  bool on_loss(std::uint32_t psn, std::uint32_t share);
  // `n` more packets acknowledged, every one before `unacked_psn` now.
  void on_acked(std::uint32_t n, std::uint32_t unacked_psn);
  void reset() { *this = LossWindow{}; }

 private:
  std::uint32_t limit_ = kMax;
  std::uint32_t acked_ = 0;  // acknowledged since the limit last grew
  std::uint32_t last_loss_ = 0;
  bool loss_pending_ = false;  // last_loss_ not acknowledged yet
};

}  // namespace softrdma::rxe
