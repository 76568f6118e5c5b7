// What the requester owns: where it is in the send queue, the next PSN to send and the
// highest sent, the read/atomic depth in flight and the AckReq spacing. rxe::Qp holds one.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>

#include "rxe/loss_window.h"

namespace softrdma::rxe {

struct RequesterState {
  std::size_t req_idx_ = 0;     // index in the send queue of the WQE the requester works on
  std::uint32_t req_psn_ = 0;   // next PSN to send
  std::uint32_t sent_psn_ = 0;  // one past the highest PSN sent: below it is a resend
  std::uint32_t outstanding_rd_atomic_ = 0;  // READs and atomics sent, not yet completed
  std::uint32_t pkts_since_ackreq_ = 0;
  std::chrono::steady_clock::time_point ackreq_at_{};  // when the last AckReq packet was built
  bool sqd_notified_ = false;                          // SQ_DRAINED sent for this SQD period
  // RC: the retransmission timer fired and no response has come since: resend one packet at a
  // time (it asks for an ACK) until one does, not the whole window again.
  bool probing_ = false;
  LossWindow loss_window_;  // RC: caps the send window after losses (rxe/loss_window.h)
};

}  // namespace softrdma::rxe
