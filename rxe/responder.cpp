// The responder's RC/UC receive pipeline (IBTA vol. 1 9.7.x, in the order of the kernel's
// rxe_resp.c): an XRC target's SRQ, PSN (duplicates, sequence errors), opcode sequence, receive
// resources (RNR), packet length, RETH/rkey with access and bounds, then execute
// (responder_execute.cpp) and acknowledge. Each check returns a verdict; the expected PSN moves
// in finish_request only.
#include "rxe/responder.h"

#include "core/payload.h"
#include "rxe/device.h"
#include "rxe/psn.h"
#include "rxe/qp.h"
#include "rxe/segment.h"
#include "rxe/uses_core.h"

namespace softrdma::rxe {

void Qp::receive(const wire::RocePacket& pkt, const netdev::Packet& raw) {
  ++counters_.rx_packets;
  const QpState st = attr_.qp_state;
  if (st != QpState::kRtr && st != QpState::kRts && st != QpState::kSqd && st != QpState::kSqe) {
    return;  // not receiving (RESET, INIT, ERR)
  }
  const wire::Transport t = pkt.info->transport;
  if (t == wire::Transport::kCnp) {
    on_cnp(Clock::now());
    return;
  }
  // An XRC initiator takes only responses, a target only requests.
  const bool match = t == wire_transport() && !(type_ == QpType::kXrcSend && pkt.info->request) &&
                     !(type_ == QpType::kXrcRecv && !pkt.info->request);
  if (!match) {
    ++counters_.dropped_bad_opcode;
    return;
  }
  // Congestion: a CE mark, or (UC, UD) a datagram dropped for want of a receive WQE, which is
  // where an unpaced sender overruns its receiver (UD: or one that joined a deep hold).
  const bool ce = ecn_ce(raw.traffic_class);
  const std::uint64_t no_recv = counters_.dropped_no_recv;
  if (type_ == QpType::kUd) {
    ud_request(pkt, raw);
  } else if (raw.src != peer_) {
    ++counters_.dropped_wrong_peer;
    return;
  } else if (pkt.info->request) {
    rc_uc_request(pkt, raw);
  } else {
    if (reliable() && st != QpState::kRtr) rc_response(pkt);
    return;
  }
  const bool overrun =
      counters_.dropped_no_recv != no_recv || ud_hold_.size() > UdHold::kCongestedAbove;
  if (ce || (overrun && ecn_capable(raw.traffic_class))) {
    notify_congestion(pkt, raw, Clock::now());
  }
}

void Qp::rc_uc_request(const wire::RocePacket& pkt, const netdev::Packet& raw) {
  // XRC: a request passed to another device waits for its answer; what comes meanwhile is
  // taken after it, in order (rxe/xrc_relay.h).
  if (fwd_ && fwd_->outstanding) {
    park(raw);
    return;
  }
  const wire::Seg seg = pkt.info->seg;
  const InboundRequest rq{pkt,
                          raw,
                          *pkt.info,
                          pkt.hdr.bth.psn,
                          static_cast<std::uint32_t>(pkt.payload.size()),
                          reliable(),
                          seg == wire::Seg::kFirst || seg == wire::Seg::kOnly,
                          seg == wire::Seg::kLast || seg == wire::Seg::kOnly};
  using Step = RxVerdict (Qp::*)(const InboundRequest&);
  // In the order of the kernel's rxe_resp.c: a request that finds no receive WQE gets an RNR
  // NAK before its length and target are looked at (it is retried, and checked then).
  // An XRC target first finds the SRQ the request names: duplicates are answered from it too.
  // One that names another device's SRQ of the domain is passed to it once the checks that
  // need no SRQ passed.
  static constexpr Step kSteps[] = {
      &Qp::check_xrc_srq,   &Qp::check_psn,    &Qp::check_opcode_sequence, &Qp::forward_xrc,
      &Qp::check_resources, &Qp::check_length, &Qp::check_target,          &Qp::execute_request};
  RxVerdict v = RxVerdict::kPass;
  for (const Step step : kSteps) {
    v = (this->*step)(rq);
    if (v != RxVerdict::kPass) break;
  }
  finish_request(rq, v);
  // No pointer to an XRC SRQ outlives the packet (a held WQE keeps its SRQ's number).
  if (type_ == QpType::kXrcRecv) drop_xrc_srq();
}

void Qp::finish_request(const InboundRequest& rq, RxVerdict v) {
  switch (v) {
    case RxVerdict::kIgnore:
      if (!rq.rc) epsn_ = rq.psn;  // UC has no duplicates: it follows whatever PSN arrives
      return;
    case RxVerdict::kSkip:
      epsn_ = psn_add(rq.psn, 1);
      return;
    case RxVerdict::kDone:
      break;
    case RxVerdict::kPass:
      return;  // (every request reaches a verdict at execute)
    case RxVerdict::kPassed:
      return;  // its answer moves the PSN (Qp::forward_answered)
  }
  switch (rq.info.kind) {
    case wire::OpKind::kReadRequest:  // its responses take a PSN each
      epsn_ = psn_add(rq.psn, packets_for(rq.pkt.hdr.reth->dma_len, mtu_));
      return;
    case wire::OpKind::kAtomic:       // answered by its atomic ACK (execute_atomic)
    case wire::OpKind::kAtomicWrite:  // and these by an empty read response (execute_flush, ...)
    case wire::OpKind::kFlush:
      epsn_ = psn_add(rq.psn, 1);
      return;
    default:
      epsn_ = psn_add(rq.psn, 1);
      if (rq.rc && rq.pkt.hdr.bth.ack_req) {
        respond(wire::syndrome::kAckNoCredit, rq.psn);
        // (Not through a host-local ring: the peer's poll then reads the ring without a system
        // call, and an ACK after the reply only lengthens its pass: ib_send_lat 2.6 against
        // 2.1 µs.)
        if (rq.ends && !rq.raw.host_local) {
          ack_holdable_ = true;
          ack_hold_.request_received(Clock::now());
        }
      }
      return;
  }
}

RxVerdict Qp::check_xrc_srq(const InboundRequest& rq) {
  if (type_ != QpType::kXrcRecv) return RxVerdict::kPass;
  const std::uint32_t named = rq.pkt.hdr.xrceth->srqn;
  if (psn_cmp(rq.psn, epsn_) != 0) {
    // A duplicate (answered from the SRQ it names, when there is one) or a request out of
    // sequence: check_psn's. Failing the QP here would NAK this PSN, and a NAK acknowledges
    // every request before it, received or not.
    hold_xrc_srq(named);
    return RxVerdict::kPass;
  }
  // A message's receive WQE stays with the SRQ it came from; otherwise each request names its
  // SRQ. Not one of the domain's: an invalid request (the XRCETH names nothing it may reach).
  if (fwd_) fwd_->remote = false;
  if (fwd_ && fwd_->msg_srqn) {
    // A message passed to another device: its rest goes the same way.
    if (named != fwd_->msg_srqn) return fail_request(rq, wire::syndrome::kNakInvalidRequest);
    if (!find_remote_srq(named)) {
      fwd_->msg_srqn = 0;
      ++counters_.xrc_bad_srqn;
      return fail_request(rq, wire::syndrome::kNakInvalidRequest);
    }
    return RxVerdict::kPass;
  }
  if (have_wqe_) {
    if (!hold_xrc_srq(xrc_wqe_srqn_)) {
      // Its SRQ was destroyed in the middle of the message: the WQE went with the SRQ's other
      // WQEs, without a completion (the SRQ's CQ may be gone too).
      have_wqe_ = false;
      ++counters_.xrc_bad_srqn;
      return fail_request(rq, wire::syndrome::kNakInvalidRequest);
    }
    if (named != xrc_wqe_srqn_) return fail_request(rq, wire::syndrome::kNakInvalidRequest);
  } else if (!hold_xrc_srq(named)) {
    // Another device's SRQ of this domain (another process): passed to it (forward_xrc).
    if (find_remote_srq(named)) return RxVerdict::kPass;
    ++counters_.xrc_bad_srqn;
    if (!proxy_ && xrcd_->shared && xrcd_->shared->held_elsewhere(named)) {
      ++counters_.xrc_srq_elsewhere;  // but it cannot be reached
    }
    return fail_request(rq, wire::syndrome::kNakInvalidRequest);
  }
  ++counters_.xrc_rcvd_requests;
  return RxVerdict::kPass;
}

bool Qp::hold_xrc_srq(std::uint32_t srqn) {
  xrc_hold_ = dev_.find_xrc_srq(srqn);
  Srq* s = xrc_hold_.get();
  xrc_srq_ = s && s->xrcd() == xrcd_ ? s : nullptr;
  if (!xrc_srq_) xrc_hold_.reset();
  return xrc_srq_ != nullptr;
}

void Qp::drop_xrc_srq() {
  xrc_srq_ = nullptr;
  xrc_hold_.reset();
}

RxVerdict Qp::check_psn(const InboundRequest& rq) {
  if (!rq.rc) return check_uc_psn(rq);
  const int d = psn_cmp(rq.psn, epsn_);
  if (d > 0) {
    ++counters_.out_of_sequence;
    if (!nak_sent_) {
      nak_sent_ = true;
      ++counters_.seq_naks_sent;
      respond(wire::syndrome::kNakPsnSeqErr, epsn_);
    }
    return RxVerdict::kIgnore;
  }
  if (d < 0) {
    duplicate_request(rq);
    return RxVerdict::kIgnore;
  }
  nak_sent_ = false;
  return RxVerdict::kPass;
}

RxVerdict Qp::check_uc_psn(const InboundRequest& rq) {
  if (rq.psn != epsn_) {
    // A packet was lost. Drop the damaged message; keep the receive WQE.
    ++counters_.out_of_sequence;
    if (in_message_) {
      in_message_ = false;
      cur_offset_ = 0;
    }
    uc_drop_ = !rq.starts;
  }
  if (uc_drop_) {
    if (!rq.starts) return RxVerdict::kSkip;
    uc_drop_ = false;
  }
  return RxVerdict::kPass;
}

void Qp::duplicate_request(const InboundRequest& rq) {
  ++counters_.duplicate_requests;
  switch (rq.info.kind) {
    case wire::OpKind::kReadRequest: {
      // Re-execute: answer again from the duplicate's own RETH.
      const wire::Reth& reth = *rq.pkt.hdr.reth;
      if (reth.dma_len &&
          check_remote(reth.rkey, reth.va, reth.dma_len, kAccessRemoteRead) != MrCheck::kOk) {
        return;
      }
      start_read(rq.psn, reth).duplicate = true;
      return;
    }
    case wire::OpKind::kAtomicWrite:
    case wire::OpKind::kFlush:
      duplicate_placement(rq);
      return;
    case wire::OpKind::kAtomic:
      for (const RespResource& r : resources_) {
        if (r.kind == RespResource::Kind::kAtomic && r.first_psn == rq.psn) {
          respond(wire::syndrome::kAckNoCredit, rq.psn, true, r.orig);
          break;
        }
      }
      return;
    default:
      respond(wire::syndrome::kAckNoCredit, psn_add(epsn_, kPsnMask));  // re-ACK through epsn - 1
      return;
  }
}

RxVerdict Qp::check_opcode_sequence(const InboundRequest& rq) {
  const wire::OpKind kind = rq.info.kind;
  if (kind != wire::OpKind::kSend && kind != wire::OpKind::kWrite) return RxVerdict::kPass;
  const bool is_send = kind == wire::OpKind::kSend;
  if (rq.starts != in_message_ && (rq.starts || cur_is_send_ == is_send)) return RxVerdict::kPass;
  // FIRST inside a message, or MIDDLE/LAST outside one (or of the other operation).
  if (rq.rc) return fail_request(rq, wire::syndrome::kNakInvalidRequest);
  if (!rq.starts) return uc_discard(true);
  in_message_ = false;  // UC: the new message replaces the unfinished one
  uc_drop_ = false;
  return RxVerdict::kPass;
}

RxVerdict Qp::check_length(const InboundRequest& rq) {
  const wire::OpKind kind = rq.info.kind;
  if (kind != wire::OpKind::kSend && kind != wire::OpKind::kWrite) return RxVerdict::kPass;
  // FIRST and MIDDLE carry exactly the path MTU, LAST and ONLY at most it.
  if (!rq.ends && rq.n != mtu_) return refuse(rq, wire::syndrome::kNakInvalidRequest, true);
  if (rq.ends && rq.n > mtu_) {
    if (rq.rc) return fail_request(rq, wire::syndrome::kNakInvalidRequest);
    return RxVerdict::kIgnore;
  }
  return RxVerdict::kPass;
}

RxVerdict Qp::check_target(const InboundRequest& rq) {
  switch (rq.info.kind) {
    case wire::OpKind::kWrite:
      return check_write_target(rq);
    case wire::OpKind::kReadRequest:
      return check_read_target(rq);
    case wire::OpKind::kAtomicWrite:
      return check_atomic_write_target(rq);
    case wire::OpKind::kFlush:
      return check_flush_target(rq);
    case wire::OpKind::kAtomic: {
      const wire::AtomicEth& a = *rq.pkt.hdr.atomic_eth;
      if (!(attr_.qp_access_flags & kAccessRemoteAtomic) || resources_.empty() || (a.va & 7)) {
        return fail_request(rq, wire::syndrome::kNakInvalidRequest);
      }
      return RxVerdict::kPass;  // its rkey is resolved as it executes, under the same guard
    }
    default:
      return RxVerdict::kPass;
  }
}

RxVerdict Qp::check_write_target(const InboundRequest& rq) {
  if (rq.starts) {
    const wire::Reth& reth = *rq.pkt.hdr.reth;
    if (!(attr_.qp_access_flags & kAccessRemoteWrite)) {
      return refuse(rq, wire::syndrome::kNakInvalidRequest, !rq.ends);
    }
    if (reth.dma_len) {
      const MrCheck c = check_remote(reth.rkey, reth.va, reth.dma_len, kAccessRemoteWrite);
      if (c != MrCheck::kOk) return refuse(rq, nak_for(c), !rq.ends);
    }
    write_va_ = reth.va;
    write_rkey_ = reth.rkey;
    write_len_ = reth.dma_len;
    cur_offset_ = 0;
    cur_is_send_ = false;
    in_message_ = !rq.ends;
  }
  // Every packet within the RETH's DMA length, and the last one ending it.
  const std::uint64_t end = cur_offset_ + rq.n;
  if (end > write_len_ || (rq.ends && end != write_len_)) {
    return refuse(rq, wire::syndrome::kNakInvalidRequest, !rq.ends);
  }
  return RxVerdict::kPass;
}

RxVerdict Qp::check_read_target(const InboundRequest& rq) {
  const wire::Reth& reth = *rq.pkt.hdr.reth;
  if (!(attr_.qp_access_flags & kAccessRemoteRead) || resources_.empty()) {
    return fail_request(rq, wire::syndrome::kNakInvalidRequest);
  }
  if (reth.dma_len) {
    const MrCheck c = check_remote(reth.rkey, reth.va, reth.dma_len, kAccessRemoteRead);
    if (c != MrCheck::kOk) return fail_request(rq, nak_for(c));
  }
  return RxVerdict::kPass;
}

RxVerdict Qp::check_resources(const InboundRequest& rq) {
  // A SEND takes a receive WQE at its start, an RDMA WRITE with immediate at its end.
  const bool consumes = rq.info.kind == wire::OpKind::kSend
                            ? rq.starts
                            : rq.info.kind == wire::OpKind::kWrite && rq.ends && rq.pkt.hdr.imm;
  if (!consumes || take_recv_wqe()) return RxVerdict::kPass;
  if (rq.rc) {
    ++counters_.rnr_naks_sent;
    nak_sent_ = true;  // later packets of this burst are silently dropped
    respond(static_cast<std::uint8_t>(0x20 | (attr_.min_rnr_timer & 0x1F)), rq.psn);
    return RxVerdict::kIgnore;
  }
  ++counters_.dropped_no_recv;
  return uc_discard(!rq.ends);
}

bool Qp::take_recv_wqe() {
  if (have_wqe_) return true;
  if (Srq* srq = rx_srq()) {
    auto w = srq->take();
    if (!w) return false;
    cur_wqe_ = std::move(*w);
    if (xrc_srq_) xrc_wqe_srqn_ = xrc_srq_->srqn;
  } else {
    if (rq_.empty()) return false;
    cur_wqe_ = std::move(rq_.front());
    rq_.pop();
  }
  have_wqe_ = true;
  return true;
}

MrCheck Qp::check_remote(std::uint32_t rkey, std::uint64_t va, std::uint64_t len,
                         std::uint32_t access) {
  MrTable::Guard g(dev_.mrs());
  std::uint8_t* host = nullptr;
  return dev_.mrs().resolve(rkey, rx_pd(), va, len, access, &host, qpn_);
}

RxVerdict Qp::fail_request(const InboundRequest& rq, std::uint8_t syndrome, WcStatus recv_status) {
  responder_error(syndrome, rq.psn, recv_status);
  return RxVerdict::kIgnore;
}

RxVerdict Qp::uc_discard(bool drop_rest) {
  in_message_ = false;
  uc_drop_ = drop_rest;
  return RxVerdict::kSkip;
}

RxVerdict Qp::refuse(const InboundRequest& rq, std::uint8_t syndrome, bool drop_rest) {
  return rq.rc ? fail_request(rq, syndrome) : uc_discard(drop_rest);
}

}  // namespace softrdma::rxe
