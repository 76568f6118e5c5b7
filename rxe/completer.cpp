// The completer: consumes ACKs, NAKs, read responses and atomic ACKs, completes
// send-queue WQEs in order, and drives retries (timeouts, sequence-error NAKs,
// RNR NAKs with the IB timer table).
#include <algorithm>
#include <cstring>

#include "core/payload.h"
#include "rxe/device.h"
#include "rxe/psn.h"
#include "rxe/qp.h"
#include "rxe/uses_core.h"

namespace softrdma::rxe {

namespace {

// IBTA table 45: RNR NAK timer codes, in microseconds.
constexpr std::uint32_t kRnrTimerUs[32] = {
    655360, 10,    20,    30,    40,    60,     80,     120,    160,    240,   320,
    480,    640,   960,   1280,  1920,  2560,   3840,   5120,   7680,   10240, 15360,
    20480,  30720, 40960, 61440, 81920, 122880, 163840, 245760, 327680, 491520};

WcOpcode wc_opcode(WrOpcode op) {
  switch (op) {
    case WrOpcode::kRdmaWrite:
    case WrOpcode::kRdmaWriteWithImm:
      return WcOpcode::kRdmaWrite;
    case WrOpcode::kRdmaRead:
      return WcOpcode::kRdmaRead;
    case WrOpcode::kAtomicCmpAndSwp:
      return WcOpcode::kCompSwap;
    case WrOpcode::kAtomicFetchAndAdd:
      return WcOpcode::kFetchAdd;
    case WrOpcode::kLocalInv:
      return WcOpcode::kLocalInv;
    case WrOpcode::kBindMw:
      return WcOpcode::kBindMw;
    case WrOpcode::kAtomicWrite:
      return WcOpcode::kAtomicWrite;
    case WrOpcode::kFlush:
      return WcOpcode::kFlush;
    default:
      return WcOpcode::kSend;
  }
}

// The send completion status a NAK (other than a PSN sequence error) reports.
WcStatus nak_status(std::uint8_t syndrome) {
  switch (syndrome) {
    case wire::syndrome::kNakInvalidRequest:
      return WcStatus::kRemInvReqErr;
    case wire::syndrome::kNakRemoteAccess:
      return WcStatus::kRemAccessErr;
    case wire::syndrome::kNakInvalidRdRequest:
      return WcStatus::kRemInvRdReqErr;
    default:
      return WcStatus::kRemOpErr;
  }
}

}  // namespace

void Qp::complete_send(SendWqe& w) {
  if (w.is_read_or_atomic() && w.started && outstanding_rd_atomic_ > 0) --outstanding_rd_atomic_;
  if (!(w.flags & kSendSignaled) && !sq_sig_all_ && w.status == WcStatus::kSuccess) return;
  Wc wc;
  wc.wr_id = w.wr_id;
  wc.status = w.status;
  wc.opcode = wc_opcode(w.opcode);
  wc.qp_num = qpn_;
  wc.post_ns = w.post_ns;
  if (w.status == WcStatus::kSuccess) {
    // Atomics 8 (checked at post), ATOMIC WRITE 8, FLUSH its range's length (as rxe).
    wc.byte_len = static_cast<std::uint32_t>(w.length);
  }
  // An unreliable send is complete once its last packet has left: inside a progress pass
  // that is at the pass's transmit, so the completion waits for it like a receive does
  // (a program may exit as soon as it sees it).
  if (!reliable()) {
    dev_.complete_recv(*this, send_cq_, wc, false);
    return;
  }
  if (!send_cq_->push(wc, false)) dev_.async_event({AsyncEventType::kCqErr, nullptr, send_cq_});
}

void Qp::complete_ready() {
  while (!sq_.empty() && sq_.front().done) {
    complete_send(sq_.front());
    sq_.pop_front();
    if (req_idx_ > 0) --req_idx_;
  }
}

void Qp::fail_head(WcStatus status) {
  for (SendWqe& w : sq_) {
    if (!w.done) {
      w.done = true;
      w.status = status;
      break;
    }
  }
  enter_error();
  dev_.async_event({AsyncEventType::kQpFatal, this});
}

bool Qp::retry_responses(SendWqe& w) {
  if (w.gap_retried) return true;  // the timer covers a retry that is lost too
  if (!spend_retry()) return false;
  w.gap_retried = true;
  retry_from(w.resp_psn);
  return true;
}

bool Qp::acknowledged_through(std::uint32_t psn) {
  const std::uint32_t next = psn_add(psn, 1);
  const int n = psn_cmp(next, unacked_psn_);
  if (n <= 0) return false;
  unacked_psn_ = next;
  loss_window_.on_acked(static_cast<std::uint32_t>(n), unacked_psn_);
  return true;
}

void Qp::ack_through(std::uint32_t psn, bool implicit) {
  bool progress = false;
  for (SendWqe& w : sq_) {
    if (!w.started) break;
    if (w.done) continue;
    if (psn_cmp(w.last_psn, psn) > 0) break;
    if (w.is_read_or_atomic()) {
      // Acknowledged past a read or atomic whose responses did not all arrive:
      // they were lost; ask again for what is missing.
      if (!implicit) retry_responses(w);
      break;
    }
    w.done = true;
    progress = true;
  }
  if (acknowledged_through(psn)) progress = true;
  if (progress) {
    retry_left_ = attr_.retry_cnt;
    rnr_retry_left_ = attr_.rnr_retry;
  }
}

void Qp::rc_response(const wire::RocePacket& pkt) {
  using wire::OpKind;
  const auto now = Clock::now();
  // A response for nothing outstanding is a stale duplicate.
  if (psn_cmp(pkt.hdr.bth.psn, req_psn_) >= 0) return;
  const OpKind kind = pkt.info->kind;
  if (kind == OpKind::kAck) {
    if (!on_acknowledge(pkt, now)) return;
  } else if (kind == OpKind::kReadResponse || kind == OpKind::kAtomicAck) {
    if (!on_read_or_atomic_response(pkt)) return;
  } else {
    return;
  }
  probing_ = false;  // the responder answers: the whole window again
  complete_ready();
  if (!has_outstanding()) {
    retransmit_deadline_ = Clock::time_point::max();
  } else if (rnr_deadline_ == Clock::time_point::max()) {
    arm_retransmit(now);
  }
}

bool Qp::on_acknowledge(const wire::RocePacket& pkt, Clock::time_point now) {
  const std::uint32_t psn = pkt.hdr.bth.psn;
  const std::uint8_t syn = pkt.hdr.aeth->syndrome;
  switch (wire::aeth_kind(syn)) {
    case wire::AethKind::kAck:
      ack_through(psn, false);
      return true;
    case wire::AethKind::kRnrNak:
      ++counters_.rnr_naks_received;
      ack_through(psn_add(psn, kPsnMask), true);
      if (rnr_retry_left_ == 0) {
        ++counters_.rnr_retry_exceeded;
        fail_head(WcStatus::kRnrRetryExcErr);
        return false;
      }
      if (attr_.rnr_retry != 7) --rnr_retry_left_;
      rnr_psn_ = psn;
      rnr_deadline_ = now + std::chrono::microseconds(kRnrTimerUs[syn & 0x1F]);
      retransmit_deadline_ = Clock::time_point::max();
      return true;
    case wire::AethKind::kNak:
      ack_through(psn_add(psn, kPsnMask), true);
      if (syn == wire::syndrome::kNakPsnSeqErr) {
        if (!spend_retry()) return false;
        loss_window_.on_loss(psn, dev_.window_for(mtu_));
        retry_from(psn);
        return true;
      }
      complete_ready();
      fail_head(nak_status(syn));
      return false;
    default:
      return false;
  }
}

bool Qp::on_read_or_atomic_response(const wire::RocePacket& pkt) {
  const std::uint32_t psn = pkt.hdr.bth.psn;
  SendWqe* target = response_target(psn);
  if (!target) return false;
  SendWqe& w = *target;
  const bool atomic_ack = pkt.info->kind == wire::OpKind::kAtomicAck;
  const bool wants_atomic_ack = w.opcode != WrOpcode::kRdmaRead && !w.answered_by_empty_read();
  if (atomic_ack != wants_atomic_ack || !w.is_read_or_atomic()) {
    fail_head(WcStatus::kBadRespErr);
    return false;
  }
  if (psn != w.resp_psn) {
    if (psn_cmp(psn, w.resp_psn) > 0) retry_responses(w);
    return false;  // a duplicate, or a gap being retried
  }
  w.gap_retried = false;
  if (atomic_ack) {
    const std::uint64_t orig = pkt.hdr.atomic_ack_eth->orig;
    std::uint8_t buf[8];
    std::memcpy(buf, &orig, 8);  // host order into the local buffer, as verbs expects
    if (!place_response(w, 0, buf, 8)) return false;
    w.done = true;
  } else if (w.answered_by_empty_read()) {
    // ATOMIC WRITE, FLUSH: one RDMA READ response ONLY, without payload.
    if (pkt.info->seg != wire::Seg::kOnly || !pkt.payload.empty()) {
      fail_head(WcStatus::kBadRespErr);
      return false;
    }
    w.done = true;
  } else {
    const auto n = static_cast<std::uint32_t>(pkt.payload.size());
    const std::uint64_t want = std::min<std::uint64_t>(mtu_, w.length - w.resp_bytes);
    const bool last = pkt.info->seg == wire::Seg::kLast || pkt.info->seg == wire::Seg::kOnly;
    if (n != want || last != (w.resp_bytes + n == w.length)) {
      fail_head(WcStatus::kBadRespErr);
      return false;
    }
    if (n && !place_response(w, w.resp_bytes, pkt.payload.data(), n)) return false;
    w.resp_bytes += n;
    if (last) w.done = true;
  }
  w.resp_psn = psn_add(psn, 1);
  acknowledged_through(psn);
  retry_left_ = attr_.retry_cnt;
  return true;
}

SendWqe* Qp::response_target(std::uint32_t psn) {
  for (SendWqe& w : sq_) {
    if (!w.started) break;
    if (w.done) continue;
    if (psn_cmp(w.last_psn, psn) < 0) {
      if (w.is_read_or_atomic()) {
        retry_responses(w);  // responses of an earlier read/atomic are missing
        return nullptr;
      }
      w.done = true;  // implicitly acknowledged
      continue;
    }
    return psn_cmp(w.first_psn, psn) <= 0 ? &w : nullptr;
  }
  return nullptr;
}

bool Qp::place_response(SendWqe& w, std::uint64_t offset, const std::uint8_t* data,
                        std::uint32_t n) {
  WcStatus err = WcStatus::kSuccess;
  if (scatter(dev_.mrs(), pd_, w.sge, offset, data, n, err)) return true;
  w.done = true;
  w.status = err;
  complete_ready();
  enter_error();
  return false;
}

bool Qp::spend_retry() {
  if (retry_left_ == 0) {
    ++counters_.retry_exceeded;
    fail_head(WcStatus::kRetryExcErr);
    return false;
  }
  --retry_left_;
  return true;
}

bool Qp::has_outstanding() const {
  for (const SendWqe& w : sq_) {
    if (w.started && !w.done) return true;
  }
  return false;
}

bool Qp::run_timers(Clock::time_point now) {
  if (attr_.qp_state == QpState::kErr) {
    retransmit_deadline_ = rnr_deadline_ = pace_deadline_ = Clock::time_point::max();
    ack_hold_.reset();
    return false;
  }
  if (!ud_hold_.empty()) drain_ud_hold(now);  // drops the datagrams past their deadline
  if (fwd_ && fwd_->deadline <= now) {
    // A passed request got no answer (its holder stalled or died): forget it and what waited
    // behind it; the initiator sends them again.
    fwd_->outstanding = false;
    fwd_->deadline = Clock::time_point::max();
    fwd_->parked.clear();
    fwd_->timed_out = true;
    fwd_->timed_out_psn = fwd_->psn;
  }
  bool resend = false;
  if (ack_hold_.expire(now)) {  // an ACK waited in vain for a request: it leaves alone
    ++counters_.ack_waits_expired;
    resend = true;
  }
  if (pace_deadline_ <= now) {  // a paced QP may send again
    pace_deadline_ = Clock::time_point::max();
    resend = true;
  }
  if (rnr_deadline_ <= now) {
    rnr_deadline_ = Clock::time_point::max();
    retry_from(rnr_psn_);
    arm_retransmit(now);
    resend = true;
  }
  if (retransmit_deadline_ <= now) {
    if (!has_outstanding()) {
      retransmit_deadline_ = Clock::time_point::max();
      return resend;
    }
    if (!spend_retry()) return false;
    for (SendWqe& w : sq_) w.gap_retried = false;
    loss_window_.on_loss(unacked_psn_, dev_.window_for(mtu_));
    retry_from(unacked_psn_);
    probing_ = true;
    arm_retransmit(now);
    resend = true;
  }
  return resend;
}

}  // namespace softrdma::rxe
