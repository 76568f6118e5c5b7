// The requester: turns send-queue WQEs into request packets (segmentation by
// the path MTU, PSNs, AckReq), limits the window and the read/atomic depth, and
// rewinds for go-back-N retransmission.
#include "rxe/requester.h"

#include <algorithm>
#include <cstring>

#include "core/payload.h"
#include "rxe/device.h"
#include "rxe/psn.h"
#include "rxe/qp.h"
#include "rxe/request_opcode.h"
#include "rxe/segment.h"
#include "rxe/uses_core.h"

namespace softrdma::rxe {

namespace {

constexpr std::uint32_t kAckReqEvery = 32;  // AckReq on every Nth packet of long messages
constexpr int kBudget = 64;                 // packets per QP per progress step

}  // namespace

void Qp::send_queue_error() {
  if (reliable()) {
    enter_error();  // RC: the whole QP fails
    return;
  }
  // UC/UD (IBTA 10.3.1): the send queue enters SQE; its remaining work is flushed and
  // receives go on. SQE -> RTS resumes sending.
  attr_.qp_state = QpState::kSqe;
  for (SendWqe& x : sq_) {
    if (!x.done) {
      x.done = true;
      x.status = WcStatus::kWrFlushErr;
    }
  }
  complete_ready();
  req_idx_ = sq_.size();
}

void Qp::arm_retransmit(Clock::time_point now) {
  if (!reliable() || attr_.timeout == 0) {
    retransmit_deadline_ = Clock::time_point::max();
    return;
  }
  retransmit_deadline_ = now + retransmit_timeout();
}

void Qp::retry_from(std::uint32_t psn) {
  std::size_t idx = sq_.size();
  for (std::size_t i = 0; i < sq_.size(); ++i) {
    SendWqe& w = sq_[i];
    if (!w.started) break;
    if (w.done) continue;
    if (idx == sq_.size() && psn_cmp(psn, w.last_psn) <= 0) idx = i;
    if (idx == sq_.size()) continue;
    // Rewind this and every later started WQE.
    std::uint32_t from = w.first_psn;
    if (i == idx && psn_cmp(psn, w.first_psn) > 0) from = psn;
    if (w.opcode == WrOpcode::kRdmaRead) from = w.resp_psn;  // only what is missing
    w.next_psn = from;
    const auto back = static_cast<std::uint64_t>(std::max(psn_cmp(from, w.first_psn), 0));
    w.sent = std::min<std::uint64_t>(back * mtu_, w.length);
    w.all_sent = false;
  }
  if (idx == sq_.size()) return;
  req_idx_ = idx;
  ++counters_.retransmits;
}

bool Qp::run_local(SendWqe& w) {
  if (w.opcode == WrOpcode::kBindMw) {
    if (!dev_.mrs().bind_mw(w.bind, pd_, qpn_)) w.status = WcStatus::kMwBindErr;
  } else if (!dev_.mrs().invalidate(w.invalidate_rkey)) {
    w.status = WcStatus::kLocQpOpErr;
  }
  return w.status == WcStatus::kSuccess;
}

bool Qp::run_send(Clock::time_point now) {
  if (!ud_hold_.empty()) drain_ud_hold(now);  // receives were posted
  // Responder duties first: read responses and queued ACKs, in PSN order. An ACK for a
  // request/reply exchange (rxe/ack_hold.h) waits for the reply instead and leaves after its
  // packets: the peer, polling its CQ for the ACK, then finds the reply placed with it.
  const AckPlan plan = plan_ack(now);
  if (plan == AckPlan::kWait) return false;
  const bool more = plan == AckPlan::kNow && respond_in_order();
  const bool requests_more = run_requester(now);
  if (plan == AckPlan::kAfter) return respond_in_order() || requests_more;
  return more || requests_more;
}

bool Qp::run_requester(Clock::time_point now) {
  const QpState st = attr_.qp_state;
  if (st != QpState::kRts && st != QpState::kSqd) return false;
  if (rnr_deadline_ != Clock::time_point::max()) return false;  // waiting out an RNR NAK
  int budget = kBudget;
  bool pace_wait = false;  // waiting for the pacer, soon enough to stay in the pass
  while (budget > 0 && req_idx_ < sq_.size()) {
    SendWqe& w = sq_[req_idx_];
    if (w.done && !w.started) {
      ++req_idx_;
      continue;
    }
    if (w.is_local()) {
      if (!w.started) {
        if ((w.flags & kSendFence) && outstanding_rd_atomic_ > 0) break;
        w.started = true;
        w.done = true;
        if (!run_local(w)) {
          // A failed local operation completes in error and the QP goes to the error state.
          complete_ready();
          enter_error();
          return false;
        }
      }
      ++req_idx_;
      continue;
    }
    if (!w.started) {
      if (st == QpState::kSqd) break;
      if ((w.flags & kSendFence) && outstanding_rd_atomic_ > 0) break;
      if (w.is_read_or_atomic() &&
          outstanding_rd_atomic_ >= std::max<std::uint32_t>(attr_.max_rd_atomic, 1)) {
        break;
      }
      w.started = true;
      if (reliable()) ack_hold_.request_started(now);
      w.first_psn = w.next_psn = w.resp_psn = req_psn_;
      w.npkts = (w.is_read_or_atomic() && w.opcode != WrOpcode::kRdmaRead)
                    ? 1
                    : packets_for(w.length, type_ == QpType::kUd ? 0xFFFFFFFF : mtu_);
      w.last_psn = psn_add(w.first_psn, w.npkts - 1);
      req_psn_ = psn_add(req_psn_, type_ == QpType::kUd ? 1 : w.npkts);
      if (w.is_read_or_atomic()) ++outstanding_rd_atomic_;
    } else if (w.all_sent) {
      ++req_idx_;
      continue;
    }
    if (reliable() && psn_cmp(w.next_psn, psn_add(unacked_psn_, send_window())) >= 0) {
      break;
    }
    if (!pfc_allows(type_ == QpType::kUd ? w.av.traffic_class : attr_.ah_attr.traffic_class, now)) {
      break;
    }
    if (cc_on_ && paced() && !pace_allows(now, pace_wait)) break;
    const bool was_idle = retransmit_deadline_ == Clock::time_point::max();
    if (!build_next_packet(w, now)) return false;  // the QP went to the error state
    --budget;
    if (reliable() && was_idle) arm_retransmit(now);
    if (w.all_sent) {
      ++req_idx_;
      if (!reliable()) {
        w.done = true;
        complete_ready();
      }
    }
  }
  complete_ready();
  if (st == QpState::kSqd && attr_.en_sqd_async_notify && !sqd_notified_) {
    if (!has_outstanding()) {
      sqd_notified_ = true;
      dev_.async_event({AsyncEventType::kSqDrained, this});
    }
  }
  return pace_wait || (budget == 0 && req_idx_ < sq_.size());
}

bool Qp::build_next_packet(SendWqe& w, Clock::time_point now) {
  using namespace wire;
  // A UC message completes once it is sent, so its packets may still wait in this pass's batch.
  // They leave before a WRITE is placed directly, which could otherwise overtake them.
  if (type_ == QpType::kUc && w.opcode == WrOpcode::kRdmaWrite && w.sent == 0 && dev_.placing()) {
    dev_.tx_send_now();
  }
  netdev::Packet* p = dev_.tx_packet();
  RequestPacket rp;
  if (!compose_request(w, rp)) return fail_wqe(w, WcStatus::kLocQpOpErr);
  if (reliable()) set_ack_req(rp, now);
  auto hl = build_roce_header(MutBytes(p->data, p->cap), rp.h, rp.n);
  if (!hl) return fail_wqe(w, WcStatus::kLocQpOpErr);
  if (rp.n) {
    WcStatus err = WcStatus::kSuccess;
    if (w.is_inline) {
      std::memcpy(p->data + *hl, w.inline_data.data() + rp.off, rp.n);
    } else if (!gather(dev_.mrs(), pd_, w.sge, rp.off, p->data + *hl, rp.n, err)) {
      return fail_wqe(w, err);
    }
  }
  const std::uint8_t pad = roce_pad(rp.n);
  std::memset(p->data + *hl + rp.n, 0, pad + kIcrcLen);
  p->len = static_cast<std::uint32_t>(*hl + rp.n + pad + kIcrcLen);
  if (reliable()) {
    // Traces mark go-back-N resends.
    if (psn_cmp(rp.h.bth.psn, sent_psn_) < 0) {
      p->retrans = true;
    } else {
      sent_psn_ = psn_add(rp.h.bth.psn, 1);
    }
  }
  // Direct placement: the oldest outstanding WQE only (an earlier SEND, READ or atomic is then not
  // still on its way, so the data cannot overtake it) and never a resend.
  if (rp.n && w.opcode == WrOpcode::kRdmaWrite && type_ != QpType::kUd && !xrc() && !p->retrans &&
      dev_.placing() && &sq_.front() == &w &&
      dev_.place_write(peer_, attr_.dest_qp_num, type_, qpn_, local_, w.rkey, w.remote_addr,
                       w.length, rp.off, p->data + *hl, rp.n, pkey())) {
    p->placed = true;
    ++counters_.placed_sent;
  }
  transmit_request(w, p);
  if (cc_on_) {
    // ECN-capable transport, ECT(0), on data (the packet still waits in the TX batch).
    p->traffic_class = static_cast<std::uint8_t>((p->traffic_class & ~kEcnMask) | kEcnEct0);
    paced_sent(p->len, now);
  }
  // Advance.
  if (w.opcode == WrOpcode::kRdmaRead) {
    w.sent = w.length;
    w.all_sent = true;
  } else if (w.is_read_or_atomic()) {
    w.all_sent = true;
  } else {
    w.sent = rp.off + rp.n;
    w.next_psn = psn_add(w.next_psn, 1);
    w.all_sent = rp.last;
  }
  return true;
}

bool Qp::compose_request(const SendWqe& w, RequestPacket& rp) const {
  using namespace wire;
  RoceHeaders& h = rp.h;
  h.bth.dest_qp = type_ == QpType::kUd ? w.remote_qpn : attr_.dest_qp_num;
  h.bth.psn = w.next_psn;
  h.bth.pkey = pkey();
  rp.off = w.sent;
  const OpKind kind = request_kind(w.opcode);
  const bool segmented = kind == OpKind::kSend || kind == OpKind::kWrite;
  bool first = true;
  if (segmented) {
    const std::uint64_t remaining = w.length - rp.off;
    rp.n = static_cast<std::uint32_t>(
        type_ == QpType::kUd ? remaining : std::min<std::uint64_t>(mtu_, remaining));
    first = rp.off == 0;
    rp.last = rp.off + rp.n == w.length;
  } else if (kind == OpKind::kAtomicWrite) {
    rp.n = static_cast<std::uint32_t>(kAtomicWriteLen);  // its one packet carries the 8 bytes
  }
  const auto opcode = request_opcode(type_, w.opcode, first, rp.last);
  if (!opcode) return false;
  h.bth.opcode = *opcode;
  // The extended headers are those the opcode table names for it.
  const std::uint16_t ext = roce_opcode_info(*opcode).headers;
  if (ext & kDeth) h.deth = Deth{w.remote_qkey, 0, qpn_};
  if (ext & kXrcEth) h.xrceth = XrcEth{0, w.remote_srqn};
  if (ext & kFeth) h.feth = Feth{w.flush_type, w.flush_level, 0};
  if (ext & kReth) {  // a WRITE's first packet (off 0), or a READ from what is still missing
    h.reth = Reth{w.remote_addr + rp.off, w.rkey, static_cast<std::uint32_t>(w.length - rp.off)};
  }
  if (ext & kAtomicEth) {
    h.atomic_eth =
        AtomicEth{w.remote_addr, w.rkey,
                  w.opcode == WrOpcode::kAtomicCmpAndSwp ? w.swap : w.compare_add, w.compare_add};
  }
  if (ext & kImmDt) h.imm = w.imm;
  if (ext & kIeth) h.inv_rkey = w.invalidate_rkey;
  if (segmented) h.bth.se = rp.last && (w.flags & kSendSolicited);
  return true;
}

std::uint32_t Qp::send_window() const {
  return probing_ ? 1 : std::min(dev_.window_for(mtu_), loss_window_.limit());
}

void Qp::set_ack_req(RequestPacket& rp, Clock::time_point now) {
  // Also on the packet that fills the send window: the requester stops after it, and the
  // responder ACKs only what asks for it (or a message's end). Without, a window shorter than
  // a message waited for the retransmission timer.
  const bool fills_window =
      psn_cmp(psn_add(rp.h.bth.psn, 1), psn_add(unacked_psn_, send_window())) >= 0;
  // And once a quarter of the retransmission timeout has passed since the last one: a QP paced
  // slowly (DCQCN's floor is 1 Mb/s) takes longer than the timeout to send 32 packets, and
  // its timer fired before the responder had been asked to answer.
  const bool overdue = attr_.timeout != 0 && now - ackreq_at_ >= retransmit_timeout() / 4;
  rp.h.bth.ack_req = rp.last || ++pkts_since_ackreq_ >= kAckReqEvery || fills_window || overdue;
  if (rp.h.bth.ack_req) {
    pkts_since_ackreq_ = 0;
    ackreq_at_ = now;
  }
}

void Qp::transmit_request(const SendWqe& w, netdev::Packet* p) {
  if (type_ != QpType::kUd) {
    send_to_peer(p);
    return;
  }
  netdev::IpAddr dst = p->dst;
  dev_.gid_to_ip(w.av.dgid, dst);
  send_to(p, dst, dev_.source_address(w.av.sgid_index), w.av.traffic_class, w.av.hop_limit);
}

bool Qp::fail_wqe(SendWqe& w, WcStatus status) {
  w.done = true;
  w.status = status;
  send_queue_error();
  return false;
}

}  // namespace softrdma::rxe
