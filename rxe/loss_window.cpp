#include "rxe/loss_window.h"

#include <algorithm>

#include "rxe/psn.h"

namespace softrdma::rxe {

bool LossWindow::on_loss(std::uint32_t psn, std::uint32_t share) {
  if (loss_pending_ && psn_cmp(psn, last_loss_) <= 0) return false;
  limit_ = std::max(kMin, std::min(limit_, share) / 2);
  acked_ = 0;
  last_loss_ = psn;
  loss_pending_ = true;
  return true;
}

void LossWindow::on_acked(std::uint32_t n, std::uint32_t unacked_psn) {
  if (loss_pending_ && psn_cmp(unacked_psn, last_loss_) > 0) loss_pending_ = false;
  if (limit_ >= kMax) return;
  acked_ += n;
  while (acked_ >= limit_ && limit_ < kMax) {
    acked_ -= limit_;
    ++limit_;
  }
}

}  // namespace softrdma::rxe
