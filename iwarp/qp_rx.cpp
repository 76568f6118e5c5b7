// The receive half of a QP: reads the stream, frames FPDUs (markers stripped and checked,
// CRC checked over the wire bytes), and carries out each DDP segment: tagged placement after
// STag, PD, access and bounds checks; untagged queue 0 (Send) into posted receives by MSN
// and MO, queue 1 (Read Request) within IRD, queue 2 (Terminate). Any error sends a
// TERMINATE and moves the QP to error; nothing is written outside a registered region.
#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

#include "core/payload.h"
#include "iwarp/device.h"
#include "iwarp/qp.h"
#include "wire/crc.h"
#include "wire/fpdu.h"

namespace softrdma::iwarp {

namespace {

using wire::RdmapOpcode;

RxError tagged_error(core::MrCheck c) {
  switch (c) {
    case core::MrCheck::kBadPd:
      return RxError::kStagNotAssoc;
    case core::MrCheck::kNoAccess:
      return RxError::kAccessRights;
    case core::MrCheck::kOutOfBounds:
      return RxError::kBaseBounds;
    default:
      return RxError::kInvalidStag;
  }
}

RxError read_source_error(core::MrCheck c) {
  switch (c) {
    case core::MrCheck::kNoAccess:
      return RxError::kReadSrcAccess;
    case core::MrCheck::kOutOfBounds:
      return RxError::kReadSrcBounds;
    default:
      return RxError::kReadSrcInvalid;
  }
}

RxError header_error(wire::DdpIssue i) {
  switch (i) {
    case wire::DdpIssue::kBadDdpVersion:
      return RxError::kDdpVersion;
    case wire::DdpIssue::kBadRdmapVersion:
      return RxError::kRdmapVersion;
    case wire::DdpIssue::kQueueNumber:
      return RxError::kBadQn;
    default:
      return RxError::kBadOpcode;
  }
}

}  // namespace

void Qp::on_readable() {
  if (!stream_) return;
  if (phase_ == Phase::kWaitReply) {
    read_reply();
    if (phase_ != Phase::kRunning) return;
  }
  // Bounded: a peer streaming without pause does not hold the QP forever.
  for (int round = 0; round < 16 && stream_; ++round) {
    if (round > 0 && app_waiting_.load(std::memory_order_relaxed) > 0) break;
    if (direct_.active && direct_.left > 0) {
      if (!recv_direct()) break;
      if (direct_.left > 0) continue;
    }
    if (rx_len_ == rx_.size()) break;  // cannot happen: a wire FPDU is < 67 KB
    const StreamIo r = stream_->recv(std::span(rx_).subspan(rx_len_));
    if (r.bytes > 0) {
      counters_.rx_bytes += r.bytes;
      if (phase_ == Phase::kDead || phase_ == Phase::kIdle) continue;  // discarded
      rx_len_ += r.bytes;
      parse_rx();
      continue;
    }
    if (r.error == 0) {
      if (!peer_fin_) peer_closed();
      break;
    }
    if (r.error != EAGAIN) conn_error(r.error);
    break;
  }
  pump_tx();  // read responses, ORD slots freed, terminates
}

void Qp::parse_rx() {
  std::size_t off = 0;
  static thread_local std::array<wire::Marker, 192> markers;
  while (phase_ == Phase::kRunning || phase_ == Phase::kClosing || phase_ == Phase::kWaitRtr) {
    const std::uint8_t* p = rx_.data() + off;
    const std::size_t avail = rx_len_ - off;
    if (direct_.active) {
      // The payload went straight to memory: check the pad and CRC that follow it.
      if (direct_.left > 0 || avail < direct_.trailer) break;
      const std::size_t pad = direct_.trailer - wire::kFpduCrcLen;
      if (crc_) {
        const std::uint32_t c = wire::crc32c(direct_.crc, wire::Bytes(p, pad));
        if (c != wire::load32le(p + pad)) {
          ++counters_.crc_errors;
          direct_.active = false;
          fail_rx(RxError::kCrc, {});
          break;
        }
      }
      off += direct_.trailer;
      rx_stream_off_ += direct_.trailer;
      direct_.active = false;
      ++counters_.rx_fpdus;
      if (direct_.read_resp) {
        SendWqe* w = outstanding_read();
        if (w) {
          w->placed += direct_.payload;
          if (direct_.last) {
            w->done = true;
            if (reads_out_ > 0) --reads_out_;
            complete_sq();
          }
        }
      }
      continue;
    }
    const std::uint64_t s = rx_stream_off_;
    const std::size_t lead = markers_rx_ && wire::is_marker_offset(s) ? wire::kMarkerLen : 0;
    if (avail < lead + wire::kFpduHeaderLen) break;
    const std::uint16_t ulen = wire::load16(p + lead);
    const std::size_t total = wire::fpdu_total_len(ulen);
    const std::size_t wire_len = markers_rx_ ? wire::fpdu_wire_len(s, total) : total;
    if (avail < wire_len) {
      if (start_direct(p, avail, ulen)) {
        off += avail;
        rx_stream_off_ += avail;
      }
      break;
    }
    const wire::Bytes wb(p, wire_len);
    if (trace_) trace_->rx(wb);
    ++counters_.rx_fpdus;
    off += wire_len;
    rx_stream_off_ += wire_len;
    if (crc_) {
      const std::uint32_t found = wire::load32le(p + wire_len - wire::kFpduCrcLen);
      if (wire::crc32c(0, wb.first(wire_len - wire::kFpduCrcLen)) != found) {
        ++counters_.crc_errors;
        fail_rx(RxError::kCrc, {});
        break;
      }
    }
    wire::Bytes ulpdu;
    if (markers_rx_) {
      wire::MarkerStripper st(s);
      const auto r = st.strip(wb, rx_plain_, markers);
      bool bad = r.written != total;
      for (std::size_t i = 0; i < r.markers && !bad; ++i) {
        bad = markers[i].reserved != 0 ||
              markers[i].fpdu_ptr != wire::expected_fpdu_ptr(markers[i].offset, s);
      }
      if (bad) {
        fail_rx(RxError::kMarker, {});
        break;
      }
      ulpdu = wire::Bytes(rx_plain_.data() + wire::kFpduHeaderLen, ulen);
    } else {
      ulpdu = wire::Bytes(p + wire::kFpduHeaderLen, ulen);
    }
    if (!handle_fpdu(ulpdu)) break;
  }
  if (phase_ == Phase::kDead || phase_ == Phase::kIdle) {
    rx_len_ = 0;
    return;
  }
  if (off > 0) {
    std::memmove(rx_.data(), rx_.data() + off, rx_len_ - off);
    rx_len_ -= off;
  }
}

SendWqe* Qp::outstanding_read() {
  for (std::size_t i = 0; i < sq_next_ && i < sq_.size(); ++i) {
    if (sq_[i].opcode == core::WrOpcode::kRdmaRead && !sq_[i].done) return &sq_[i];
  }
  return nullptr;
}

bool Qp::start_direct(const std::uint8_t* p, std::size_t avail, std::uint16_t ulen) {
  constexpr std::size_t kMinDirect = 16384;  // smaller segments: one copy costs less
  constexpr std::size_t kHead = wire::kFpduHeaderLen + wire::kDdpTaggedLen;
  if (markers_rx_ || trace_ || phase_ != Phase::kRunning || avail < kHead ||
      ulen < wire::kDdpTaggedLen + kMinDirect) {
    return false;
  }
  auto h = wire::decode_ddp_header(wire::Bytes(p + wire::kFpduHeaderLen, wire::kDdpTaggedLen));
  const bool resp = h && h->opcode == static_cast<std::uint8_t>(RdmapOpcode::kReadResponse);
  if (!h || !h->tagged || wire::check_ddp_header(*h) != wire::DdpIssue::kNone ||
      (h->opcode != static_cast<std::uint8_t>(RdmapOpcode::kWrite) && !resp)) {
    return false;
  }
  const std::size_t payload = ulen - wire::kDdpTaggedLen;
  const std::size_t have = avail - kHead;
  std::uint32_t access = core::kAccessRemoteWrite;
  if (resp) {
    // Into the sink of the oldest outstanding READ, within its SGE.
    const SendWqe* w = rtr_read_pending_ ? nullptr : outstanding_read();
    if (!w || w->sge.empty() || h->stag != w->sge[0].lkey) return false;
    const core::Sge& sg = w->sge[0];
    if (h->to < sg.addr || payload > sg.length || h->to - sg.addr > sg.length - payload) {
      return false;
    }
    access = core::kAccessLocalWrite;
  }
  core::MrTable& mrs = dev_.mrs();
  core::MrTable::Guard guard(mrs);
  std::uint8_t* host = nullptr;
  if (mrs.resolve(h->stag, pd_, h->to, payload, access, &host) != core::MrCheck::kOk) {
    return false;  // the whole FPDU is checked the usual way, CRC first
  }
  if (have > 0) std::memcpy(host, p + kHead, have);
  direct_.active = true;
  direct_.stag = h->stag;
  direct_.to = h->to + have;
  direct_.left = payload - have;
  direct_.crc = crc_ ? wire::crc32c(0, wire::Bytes(p, avail)) : 0;
  direct_.trailer = wire::fpdu_pad_len(ulen) + wire::kFpduCrcLen;
  direct_.access = access;
  direct_.read_resp = resp;
  direct_.last = h->last;
  direct_.payload = payload;
  std::copy(p + wire::kFpduHeaderLen, p + kHead, direct_.hdr.begin());
  counters_.rx_direct_bytes += have;
  return true;
}

bool Qp::recv_direct() {
  core::MrTable& mrs = dev_.mrs();
  core::MrTable::Guard guard(mrs);
  std::uint8_t* host = nullptr;
  const core::MrCheck c =
      mrs.resolve(direct_.stag, pd_, direct_.to, direct_.left, direct_.access, &host);
  if (c != core::MrCheck::kOk) {
    // Deregistered or invalidated while the segment was arriving.
    direct_.active = false;
    return fail_rx(tagged_error(c), direct_.hdr);
  }
  const StreamIo r = stream_->recv(std::span(host, direct_.left));
  if (r.bytes > 0) {
    const std::size_t got = r.bytes;
    if (crc_) direct_.crc = wire::crc32c(direct_.crc, wire::Bytes(host, got));
    direct_.to += got;
    direct_.left -= got;
    counters_.rx_bytes += got;
    counters_.rx_direct_bytes += got;
    return true;
  }
  if (r.error == 0) {
    if (!peer_fin_) peer_closed();
    return false;
  }
  if (r.error != EAGAIN) conn_error(r.error);
  return false;
}

bool Qp::handle_fpdu(wire::Bytes ulpdu) {
  auto h = wire::decode_ddp_header(ulpdu);
  if (!h) return fail_rx(RxError::kFraming, {});
  const wire::Bytes hdr = ulpdu.first(h->header_len());
  const wire::Bytes body = ulpdu.subspan(h->header_len());
  const wire::DdpIssue issue = wire::check_ddp_header(*h);
  if (issue != wire::DdpIssue::kNone) return fail_rx(header_error(issue), hdr);
  if (phase_ == Phase::kWaitRtr) return handle_rtr(*h, hdr, body);
  switch (static_cast<RdmapOpcode>(h->opcode)) {
    case RdmapOpcode::kWrite:
    case RdmapOpcode::kReadResponse:
      return rx_tagged(*h, hdr, body);
    case RdmapOpcode::kReadRequest:
      return rx_read_request(*h, hdr, body);
    case RdmapOpcode::kTerminate:
      rx_terminate(body);
      return false;
    default:
      return rx_send(*h, hdr, body);
  }
}

bool Qp::rx_tagged(const wire::DdpHeader& h, wire::Bytes hdr, wire::Bytes payload) {
  core::MrTable& mrs = dev_.mrs();
  if (h.opcode == static_cast<std::uint8_t>(RdmapOpcode::kWrite)) {
    if (payload.empty()) return true;  // zero-length Write (an RTR, or a no-op): no access
    core::MrTable::Guard guard(mrs);
    std::uint8_t* host = nullptr;
    const core::MrCheck c =
        mrs.resolve(h.stag, pd_, h.to, payload.size(), core::kAccessRemoteWrite, &host);
    if (c != core::MrCheck::kOk) return fail_rx(tagged_error(c), hdr);
    std::memcpy(host, payload.data(), payload.size());
    return true;
  }
  // Read Response: for the oldest outstanding Read (responses come in order).
  if (rtr_read_pending_) {
    rtr_read_pending_ = false;
    if (payload.empty() && h.last) return true;
    return fail_rx(RxError::kUnexpectedResp, hdr);
  }
  SendWqe* w = outstanding_read();
  if (!w) return fail_rx(RxError::kUnexpectedResp, hdr);
  if (!payload.empty()) {
    if (w->sge.empty() || h.stag != w->sge[0].lkey) return fail_rx(RxError::kInvalidStag, hdr);
    const core::Sge& s = w->sge[0];
    if (h.to < s.addr || payload.size() > s.length || h.to - s.addr > s.length - payload.size()) {
      return fail_rx(RxError::kBaseBounds, hdr);
    }
    core::MrTable::Guard guard(mrs);
    std::uint8_t* host = nullptr;
    const core::MrCheck c =
        mrs.resolve(h.stag, pd_, h.to, payload.size(), core::kAccessLocalWrite, &host);
    if (c != core::MrCheck::kOk) return fail_rx(tagged_error(c), hdr);
    std::memcpy(host, payload.data(), payload.size());
    w->placed += payload.size();
  }
  if (h.last) {
    w->done = true;
    if (reads_out_ > 0) --reads_out_;
    complete_sq();
  }
  return true;
}

bool Qp::rx_send(const wire::DdpHeader& h, wire::Bytes hdr, wire::Bytes payload) {
  if (h.msn != msn_rx_[wire::kQnSend]) return fail_rx(RxError::kMsnRange, hdr);
  if (!cur_recv_) {
    if (h.mo != 0) return fail_rx(RxError::kBadMo, hdr);
    if (srq_) {
      cur_recv_ = srq_->take();
    } else if (!rq_.empty()) {
      cur_recv_ = std::move(rq_.front());
      rq_.pop();
    }
    if (!cur_recv_) return fail_rx(RxError::kNoBuffer, hdr);
    cur_recv_len_ = 0;
  }
  if (h.mo != cur_recv_len_) return fail_rx(RxError::kBadMo, hdr);
  if (cur_recv_len_ + payload.size() > cur_recv_->total) {
    complete_recv(*cur_recv_, WcStatus::kLocLenErr, 0, 0, 0, false);
    cur_recv_.reset();
    return fail_rx(RxError::kTooLong, hdr);
  }
  if (!payload.empty()) {
    WcStatus st = WcStatus::kSuccess;
    if (!core::scatter(dev_.mrs(), pd_, cur_recv_->sge, cur_recv_len_, payload.data(),
                       static_cast<std::uint32_t>(payload.size()), st)) {
      complete_recv(*cur_recv_, st, 0, 0, 0, false);
      cur_recv_.reset();
      return fail_rx(RxError::kLocal, hdr);
    }
  }
  cur_recv_len_ += payload.size();
  if (!h.last) return true;
  const auto op = static_cast<RdmapOpcode>(h.opcode);
  std::uint32_t flags = 0, inv = 0;
  if (op == RdmapOpcode::kSendInvalidate || op == RdmapOpcode::kSendSeInvalidate) {
    auto mr = dev_.mrs().find(h.inv_stag);
    if (!mr || mr->pd != pd_) {
      complete_recv(*cur_recv_, WcStatus::kRemInvReqErr, 0, 0, 0, false);
      cur_recv_.reset();
      return fail_rx(RxError::kCannotInvalidate, hdr);
    }
    mr->valid.store(false, std::memory_order_release);
    flags |= core::kWcWithInv;
    inv = h.inv_stag;
  }
  const bool solicited = op == RdmapOpcode::kSendSe || op == RdmapOpcode::kSendSeInvalidate;
  complete_recv(*cur_recv_, WcStatus::kSuccess, static_cast<std::uint32_t>(cur_recv_len_), flags,
                inv, solicited);
  cur_recv_.reset();
  ++msn_rx_[wire::kQnSend];
  return true;
}

bool Qp::rx_read_request(const wire::DdpHeader& h, wire::Bytes hdr, wire::Bytes body) {
  auto rr = wire::parse_read_request(body);
  if (!rr) return fail_rx(RxError::kFraming, hdr);
  const wire::Bytes rr_bytes = body.first(wire::kReadRequestLen);
  if (h.msn != msn_rx_[wire::kQnReadRequest]) return fail_rx(RxError::kMsnRange, hdr, rr_bytes);
  if (inbound_.size() >= ird_) return fail_rx(RxError::kNoBuffer, hdr, rr_bytes);
  if (rr->size > 0) {
    core::MrTable& mrs = dev_.mrs();
    core::MrTable::Guard guard(mrs);
    std::uint8_t* host = nullptr;
    const core::MrCheck c =
        mrs.resolve(rr->src_stag, pd_, rr->src_to, rr->size, core::kAccessRemoteRead, &host);
    if (c != core::MrCheck::kOk) return fail_rx(read_source_error(c), hdr, rr_bytes);
  }
  ++msn_rx_[wire::kQnReadRequest];
  inbound_.push_back(InboundRead{*rr, 0});
  return true;
}

void Qp::rx_terminate(wire::Bytes body) {
  TermInfo t;
  auto term = wire::parse_terminate(body);
  if (term) {
    t.layer = term->layer;
    t.etype = term->etype;
    t.code = term->code;
  }
  ++counters_.terminates_received;
  to_error(status_for_term(t));
  QpEvent ev;
  ev.kind = QpEvent::Kind::kTermReceived;
  ev.term = t;
  event(ev);
}

bool Qp::fail_rx(RxError e, wire::Bytes hdr, wire::Bytes read_req) {
  if (terminate_queued_ || state_ == QpState::kErr) {
    to_error(WcStatus::kWrFlushErr);
    return false;
  }
  queue_terminate(e, hdr, read_req);
  if (accept_cb_) callbacks_.push_back([cb = std::move(accept_cb_)] { cb(EPROTO); });
  accept_cb_ = nullptr;
  to_error(WcStatus::kWrFlushErr);
  QpEvent ev;
  ev.kind = QpEvent::Kind::kTermSent;
  ev.term = term_info(e);
  event(ev);
  return false;
}

}  // namespace softrdma::iwarp
