// XRC across processes, the QP's part (rxe/xrc_relay.h). A target passes a request for another
// device's SRQ once its own checks (XRCETH, PSN, opcode sequence) pass, and keeps the packets
// that come before the answer; the answer's responses go out as its own and move its expected
// PSN, MSN and message state as executing the request would have. A proxy, on the SRQ's side,
// runs the request through the responder as a target of its own would, expecting its PSN, and
// hands back what it would have sent.
#include <unistd.h>

#include <cerrno>

#include "rxe/device.h"
#include "rxe/psn.h"
#include "rxe/qp.h"
#include "rxe/responder.h"

namespace softrdma::rxe {

namespace {
bool receiving(QpState s) {
  return s == QpState::kRtr || s == QpState::kRts || s == QpState::kSqd || s == QpState::kSqe;
}
bool rnr_nak(std::uint8_t syndrome) {
  return (syndrome & 0xE0) == 0x20;
}
bool nak(std::uint8_t syndrome) {
  return (syndrome & 0xE0) == 0x60;
}
}  // namespace

bool Qp::find_remote_srq(std::uint32_t srqn) {
  XrcRelay* relay = dev_.relay();
  std::int32_t pid = 0;
  std::uint64_t channel = 0;
  // A proxy never passes a request on: the request came to it because its device holds the SRQ.
  if (proxy_ || !relay || !xrcd_ || !xrcd_->shared ||
      !xrcd_->shared->owner_of(srqn, &pid, &channel) || channel == 0) {
    return false;
  }
  if (!fwd_) fwd_ = std::make_unique<XrcForward>();
  fwd_->pid = pid;
  fwd_->channel = channel;
  fwd_->srqn = srqn;
  fwd_->remote = true;
  return true;
}

RxVerdict Qp::forward_xrc(const InboundRequest& rq) {
  if (!fwd_ || !fwd_->remote) return RxVerdict::kPass;
  fwd_->remote = false;
  // A READ's responses carry the holder's memory, which only the holder reads: not passed
  // (docs/verbs-abi.md), refused as a request naming an SRQ this device cannot reach.
  XrcRelay* relay = dev_.relay();
  RelayRequest r;
  r.from_pid = relay->pid();
  r.from_channel = relay->channel();
  r.target_qpn = qpn_;
  r.initiator_qpn = attr_.dest_qp_num;
  r.psn = rq.psn;
  r.srqn = fwd_->srqn;
  r.xrcd_dev = xrcd_->dev;
  r.xrcd_ino = xrcd_->ino;
  r.access = attr_.qp_access_flags;
  r.mtu = static_cast<std::uint8_t>(attr_.path_mtu);
  r.min_rnr_timer = attr_.min_rnr_timer;
  r.max_dest_rd_atomic = attr_.max_dest_rd_atomic;
  r.resend = fwd_->timed_out && fwd_->timed_out_psn == rq.psn;
  const int err = rq.info.kind == wire::OpKind::kReadRequest
                      ? EOPNOTSUPP
                      : relay->send_request(fwd_->pid, fwd_->channel, r, rq.raw.data, rq.raw.len);
  if (err == EAGAIN || err == ENOBUFS) {
    ++counters_.xrc_relay_dropped;  // the holder is behind: the initiator sends it again
    return RxVerdict::kIgnore;
  }
  if (err != 0) {
    ++counters_.xrc_bad_srqn;
    ++counters_.xrc_srq_elsewhere;
    return fail_request(rq, wire::syndrome::kNakInvalidRequest);
  }
  ++counters_.xrc_relayed;
  fwd_->outstanding = true;
  fwd_->psn = rq.psn;
  fwd_->starts = rq.starts;
  fwd_->ends = rq.ends;
  fwd_->kind = rq.info.kind;
  fwd_->deadline = Clock::now() + XrcForward::kAnswerTimeout;
  return RxVerdict::kPassed;
}

void Qp::park(const netdev::Packet& raw) {
  if (fwd_->parked.size() >= XrcForward::kMaxParked) {
    ++counters_.xrc_relay_dropped;  // the initiator sends it again
    return;
  }
  XrcForward::Parked& p = fwd_->parked.emplace_back();
  p.bytes.assign(raw.data, raw.data + raw.len);
  p.raw = raw;
  p.raw.data = p.bytes.data();
  p.raw.cap = p.raw.len;
}

void Qp::forward_answered(const RelayAnswer& a) {
  if (!fwd_ || !fwd_->outstanding || a.psn != fwd_->psn) return;  // forgotten (timed out)
  fwd_->outstanding = false;
  fwd_->deadline = Clock::time_point::max();
  if (!receiving(attr_.qp_state)) {
    fwd_->parked.clear();
    return;
  }
  const std::size_t count = a.count;  // at most 4: add() and XrcRelay::receive see to it
  if (a.failed) {
    // The proxy NAKed it and failed: so does the target, with the same NAK.
    std::uint8_t syndrome = wire::syndrome::kNakInvalidRequest;
    for (std::size_t i = 0; i < count; ++i) {
      if (nak(a.responses[i].syndrome)) syndrome = a.responses[i].syndrome;
    }
    fwd_->parked.clear();
    fwd_->msg_srqn = 0;
    responder_error(syndrome, a.psn, WcStatus::kSuccess);
    return;
  }
  if (a.executed) {
    epsn_ = psn_add(a.psn, 1);
    nak_sent_ = false;
    const wire::OpKind kind = fwd_->kind;
    if (kind == wire::OpKind::kSend || kind == wire::OpKind::kWrite) {
      if (fwd_->starts) cur_is_send_ = kind == wire::OpKind::kSend;
      in_message_ = !fwd_->ends;
      fwd_->msg_srqn = fwd_->ends ? 0 : fwd_->srqn;
    }
    if (fwd_->ends) msn_ = (msn_ + 1) & 0xFFFFFF;  // a message, an atomic, ATOMIC WRITE, FLUSH
  }
  for (std::size_t i = 0; i < count; ++i) {
    const RelayResponse& x = a.responses[i];
    if (x.atomic) {
      // Kept, as an atomic executed here would be, so that a duplicate is answered again.
      RespResource& r = claim_resource();
      r.kind = RespResource::Kind::kAtomic;
      r.first_psn = r.last_psn = x.psn;
      r.orig = x.orig;
      respond(x.syndrome, x.psn, true, x.orig);
    } else if (x.empty_read) {
      RespResource& r = claim_resource();
      r.kind = RespResource::Kind::kPlacement;
      r.first_psn = r.last_psn = x.psn;
      respond_empty_read(x.psn);
    } else {
      if (rnr_nak(x.syndrome)) {
        ++counters_.rnr_naks_sent;
        nak_sent_ = true;  // the rest of the burst is dropped, as an RNR NAK here would
      }
      respond(x.syndrome, x.psn);
    }
  }
}

void Qp::run_parked() {
  while (fwd_ && !fwd_->outstanding && !fwd_->parked.empty()) {
    XrcForward::Parked p = std::move(fwd_->parked.front());
    fwd_->parked.pop_front();
    if (!receiving(attr_.qp_state)) {
      fwd_->parked.clear();
      return;
    }
    p.raw.data = p.bytes.data();
    const auto pkt = wire::parse_roce(wire::Bytes(p.bytes.data(), p.bytes.size()));
    if (pkt) rc_uc_request(*pkt, p.raw);
  }
}

RelayAnswer Qp::run_proxied(const RelayRequest& r, const wire::RocePacket& pkt,
                            const netdev::Packet& raw) {
  RelayAnswer a;
  a.target_qpn = r.target_qpn;
  a.psn = r.psn;
  // What the target's attributes say, and the PSN it checked.
  attr_.qp_access_flags = r.access;
  attr_.dest_qp_num = r.initiator_qpn;
  attr_.min_rnr_timer = r.min_rnr_timer;
  if (r.mtu >= static_cast<std::uint8_t>(Mtu::k256) &&
      r.mtu <= static_cast<std::uint8_t>(Mtu::k4096)) {
    attr_.path_mtu = static_cast<Mtu>(r.mtu);
    mtu_ = mtu_bytes(attr_.path_mtu);
  }
  reported_qpn_ = r.target_qpn;
  // The target checked its PSN: expected here too (the proxy sees only the PSNs of its SRQ's
  // requests). Unless it is one the proxy executed and whose answer the target never had: then
  // a duplicate, answered again, not executed again.
  const bool duplicate = r.resend && proxy_has_last_ && proxy_last_psn_ == r.psn;
  epsn_ = duplicate ? psn_add(r.psn, 1) : r.psn;
  nak_sent_ = false;
  capture_ = &a;
  rc_uc_request(pkt, raw);
  capture_ = nullptr;
  // What it queued to send (ACKs, RNR NAKs, atomic ACKs), and what it sent at once (a NAK).
  for (const Response& x : responses_) {
    a.add(RelayResponse{x.syndrome, x.atomic, x.empty_read, x.psn, x.orig});
  }
  responses_.clear();
  a.executed = epsn_ != r.psn;  // (or was, for a duplicate)
  a.failed = attr_.qp_state == QpState::kErr;
  if (a.executed && !duplicate) {
    proxy_has_last_ = true;
    proxy_last_psn_ = r.psn;
  }
  ++counters_.xrc_proxied;
  return a;
}

}  // namespace softrdma::rxe
