// The responder's answers: ACKs and NAKs (coalesced while queued), atomic ACKs and READ
// responses, sent in PSN order; and the responder's failure path (NAK, then the error state).
#include <algorithm>
#include <cstring>
#include <optional>

#include "core/payload.h"
#include "core/safe_copy.h"
#include "rxe/device.h"
#include "rxe/psn.h"
#include "rxe/qp.h"
#include "rxe/segment.h"
#include "rxe/uses_core.h"

namespace softrdma::rxe {

void Qp::send_to(netdev::Packet* p, const netdev::IpAddr& dst, const netdev::IpAddr& src,
                 std::uint8_t traffic_class, std::uint8_t hop_limit) {
  p->dst = dst;
  p->src = src;
  p->src_port = src_port_;
  p->dst_port = dev_.netdev().roce_port();
  p->traffic_class = traffic_class;
  p->hop_limit = hop_limit ? hop_limit : 64;
  dev_.tx_commit();
  ++counters_.tx_packets;
}

void Qp::send_to_peer(netdev::Packet* p) {
  send_to(p, peer_, local_, attr_.ah_attr.traffic_class, attr_.ah_attr.hop_limit);
}

void Qp::send_ack(std::uint8_t syndrome, std::uint32_t psn) {
  send_acknowledge(syndrome, psn, std::nullopt);
}

void Qp::send_atomic_ack(std::uint32_t psn, std::uint64_t orig) {
  send_acknowledge(wire::syndrome::kAckNoCredit, psn, orig);
}

void Qp::send_acknowledge(std::uint8_t syndrome, std::uint32_t psn,
                          std::optional<std::uint64_t> atomic_orig) {
  using namespace wire;
  if (capture_) {  // a proxy's: its target sends it (rxe/xrc_relay.h)
    capture_->add(
        RelayResponse{syndrome, atomic_orig.has_value(), false, psn, atomic_orig.value_or(0)});
    return;
  }
  netdev::Packet* p = dev_.tx_packet();
  RoceHeaders h;
  h.bth.opcode = *segment_opcode(wire_transport(), atomic_orig ? OpKind::kAtomicAck : OpKind::kAck,
                                 Seg::kOnly);
  h.bth.pkey = pkey();
  h.bth.dest_qp = attr_.dest_qp_num;
  h.bth.psn = psn;
  h.aeth = Aeth{syndrome, msn_};
  if (atomic_orig) h.atomic_ack_eth = AtomicAckEth{*atomic_orig};
  auto n = build_roce(MutBytes(p->data, p->cap), h, {});
  if (!n) return;
  p->len = static_cast<std::uint32_t>(*n);
  send_to_peer(p);
}

void Qp::send_empty_read_response(std::uint32_t psn) {
  using namespace wire;
  if (capture_) {
    capture_->add(RelayResponse{syndrome::kAckNoCredit, false, true, psn, 0});
    return;
  }
  netdev::Packet* p = dev_.tx_packet();
  RoceHeaders h;
  h.bth.opcode = op::kRcReadResponseOnly;
  h.bth.pkey = pkey();
  h.bth.dest_qp = attr_.dest_qp_num;
  h.bth.psn = psn;
  h.aeth = Aeth{syndrome::kAckNoCredit, msn_};
  auto n = build_roce(MutBytes(p->data, p->cap), h, {});
  if (!n) return;
  p->len = static_cast<std::uint32_t>(*n);
  send_to_peer(p);
}

void Qp::responder_error(std::uint8_t nak_syndrome, std::uint32_t psn, WcStatus recv_status) {
  if (reliable()) send_ack(nak_syndrome, psn);
  if (nak_syndrome == wire::syndrome::kNakRemoteAccess) ++counters_.resp_remote_access_errors;
  if (have_wqe_ && recv_status != WcStatus::kSuccess) fail_recv_wqe(recv_status);
  const AsyncEventType ev = nak_syndrome == wire::syndrome::kNakRemoteAccess
                                ? AsyncEventType::kQpAccessErr
                                : AsyncEventType::kQpReqErr;
  // The error first, then (an SRQ's QP) the last WQE it reached on entering the error state.
  dev_.async_event({ev, this});
  enter_error();
}

void Qp::fail_recv_wqe(WcStatus status) {
  Wc wc;
  wc.wr_id = cur_wqe_.wr_id;
  wc.status = status;
  wc.opcode = WcOpcode::kRecv;
  wc.qp_num = reported_qpn_;
  post_recv_completion(wc, false);
  have_wqe_ = false;
}

void Qp::respond(std::uint8_t syndrome, std::uint32_t psn, bool atomic, std::uint64_t orig) {
  ack_holdable_ = false;  // finish_request says when it may wait
  // ACKs and NAKs are cumulative: a queued one is replaced by a newer one.
  if (!atomic && !responses_.empty() && !responses_.back().atomic &&
      !responses_.back().empty_read) {
    responses_.back() = Response{syndrome, psn, false, 0};
    return;
  }
  responses_.push_back(Response{syndrome, psn, atomic, orig});
}

void Qp::respond_empty_read(std::uint32_t psn) {
  responses_.push_back(Response{wire::syndrome::kAckNoCredit, psn, false, 0, true});
}

Qp::AckPlan Qp::plan_ack(Clock::time_point now) {
  // Only a lone ACK for a whole message, with no READ being answered, ever waits.
  const bool lone = ack_holdable_ && responses_.size() == 1 && attr_.qp_state == QpState::kRts &&
                    std::none_of(resources_.begin(), resources_.end(),
                                 [](const RespResource& r) { return r.active; });
  if (lone && ack_hold_.engaged()) {
    if (req_idx_ < sq_.size() && rnr_deadline_ == Clock::time_point::max()) {
      ack_hold_.released();
      ++counters_.acks_with_request;
      return AckPlan::kAfter;  // the requester has work: the ACK follows its packets
    }
    if (ack_hold_.hold(now)) return AckPlan::kWait;
  }
  if (ack_hold_.expire(now)) ++counters_.ack_waits_expired;  // before its timer fired
  ack_hold_.released();
  return AckPlan::kNow;
}

bool Qp::send_waiting_ack() {
  if (!answers_owed()) return false;
  ack_hold_.reset();
  respond_in_order();
  return true;
}

bool Qp::respond_in_order() {
  if (!reliable() || attr_.qp_state == QpState::kErr) {
    responses_.clear();
    return false;
  }
  int budget = 64;
  for (;;) {
    // The read whose responses come next: the active one with the lowest PSN.
    RespResource* oldest = nullptr;
    for (RespResource& r : resources_) {
      if (r.active && (!oldest || psn_cmp(r.first_psn, oldest->first_psn) < 0)) oldest = &r;
    }
    // Everything queued before that read goes first.
    while (!responses_.empty() &&
           (!oldest || psn_cmp(responses_.front().psn, oldest->first_psn) < 0)) {
      const Response r = responses_.front();
      responses_.pop_front();
      if (r.atomic) {
        send_atomic_ack(r.psn, r.orig);
      } else if (r.empty_read) {
        send_empty_read_response(r.psn);
      } else {
        send_ack(r.syndrome, r.psn);
      }
    }
    if (!oldest) return false;
    if (budget == 0) return true;
    if (!build_read_responses(*oldest, budget)) return false;  // the QP failed
  }
}

bool Qp::build_read_responses(RespResource& r, int& budget) {
  using namespace wire;
  while (r.active && budget > 0) {
    const std::uint64_t remaining = r.length - r.sent;
    const auto n = static_cast<std::uint32_t>(std::min<std::uint64_t>(mtu_, remaining));
    const bool first = r.sent == 0 && r.next_psn == r.first_psn;
    const bool last = r.sent + n == r.length;
    RoceHeaders h;
    h.bth.pkey = pkey();
    h.bth.dest_qp = attr_.dest_qp_num;
    h.bth.psn = r.next_psn;
    h.bth.opcode =
        *segment_opcode(wire_transport(), OpKind::kReadResponse, segment_of(first, last));
    if (first || last) h.aeth = Aeth{wire::syndrome::kAckNoCredit, msn_};
    netdev::Packet* p = dev_.tx_packet();
    auto hl = build_roce_header(MutBytes(p->data, p->cap), h, n);
    if (!hl) {
      r.active = false;
      return true;
    }
    if (n) {
      MrTable::Guard g(dev_.mrs());
      std::uint8_t* host = nullptr;
      bool on_demand = false;
      bool ok = dev_.mrs().resolve(r.rkey, r.pd, r.va + r.sent, n, kAccessRemoteRead, &host, qpn_,
                                   &on_demand) == MrCheck::kOk;
      if (ok && on_demand && !core::fault_safe_read(p->data + *hl, host, n)) {
        dev_.mrs().count_odp_fault();  // an ODP region's page unmapped under the read
        ok = false;
      } else if (ok && !on_demand) {
        std::memcpy(p->data + *hl, host, n);
      }
      if (!ok) {
        // The region (or its memory) went away under the read: remote access error, as hardware.
        r.active = false;
        responder_error(syndrome::kNakRemoteAccess, r.next_psn, WcStatus::kSuccess);
        return false;
      }
    }
    const std::uint8_t pad = roce_pad(n);
    std::memset(p->data + *hl + n, 0, pad + kIcrcLen);
    p->len = static_cast<std::uint32_t>(*hl + n + pad + kIcrcLen);
    p->retrans = r.duplicate;
    send_to_peer(p);
    r.sent += n;
    r.next_psn = psn_add(r.next_psn, 1);
    --budget;
    if (last) r.active = false;
  }
  return true;
}

}  // namespace softrdma::rxe
