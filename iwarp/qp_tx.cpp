// The transmit half of a QP: read responses and send-queue work cut into FPDUs sized to the
// MSS (or the configured FPDU size), written many per stream send, payload straight from the
// registered memory (gathered into a staging buffer only when markers or fault injection
// need the bytes). Progress is committed per FPDU: a short write keeps the cut FPDU's tail
// in `pending_` and regenerates the FPDUs that did not go.
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>

#include "iwarp/device.h"
#include "iwarp/qp.h"
#include "iwarp/tx_batch.h"
#include "wire/fpdu.h"

namespace softrdma::iwarp {

using core::WrOpcode;
using wire::RdmapOpcode;

bool Qp::flush_pending() {
  while (pending_off_ < pending_.size()) {
    const StreamIo r =
        stream_->send_buffer(pending_.data() + pending_off_, pending_.size() - pending_off_);
    ++counters_.sendmsg_calls;
    if (r.bytes > 0) {
      pending_off_ += r.bytes;
      continue;
    }
    if (r.error == EAGAIN) {
      tx_blocked_ = true;
      return false;
    }
    conn_error(r.error ? r.error : EPIPE);
    return false;
  }
  pending_.clear();
  pending_off_ = 0;
  return true;
}

void Qp::queue_control(const wire::DdpHeader& h, wire::Bytes body) {
  std::uint8_t ulpdu[wire::kDdpUntaggedLen + 64];
  const std::size_t hl = *wire::build_ddp_header(ulpdu, h);
  const std::size_t ulen = hl + std::min<std::size_t>(body.size(), 64);
  if (ulen > hl) std::memcpy(ulpdu + hl, body.data(), ulen - hl);
  std::uint8_t plain[wire::fpdu_total_len(wire::kDdpUntaggedLen + 64)];
  const std::size_t total = *wire::build_fpdu(plain, wire::Bytes(ulpdu, ulen), crc_);
  const std::size_t at = control_.size();
  if (markers_tx_) {
    wire::MarkerInserter ins(marker_tx_off_);
    control_.resize(at + ins.wire_len(total));
    (void)ins.put_fpdu(wire::MutBytes(control_).subspan(at), wire::Bytes(plain, total), crc_);
    marker_tx_off_ = ins.offset();
  } else {
    control_.insert(control_.end(), plain, plain + total);
  }
  if (trace_) trace_->tx(wire::Bytes(control_).subspan(at));
  ++counters_.tx_fpdus;
}

void Qp::queue_terminate(RxError e, wire::Bytes ddp_header, wire::Bytes read_req) {
  const TermInfo ti = term_info(e);
  wire::Terminate t;
  t.layer = ti.layer;
  t.etype = ti.etype;
  t.code = ti.code;
  t.d = ddp_header.size() == wire::kDdpTaggedLen || ddp_header.size() == wire::kDdpUntaggedLen;
  if (t.d) t.ddp_header = ddp_header;
  t.r = read_req.size() == wire::kReadRequestLen;
  if (t.r) t.rdmap_header = read_req;
  std::uint8_t body[64];
  const auto n = wire::build_terminate(body, t);
  wire::DdpHeader h;
  h.opcode = static_cast<std::uint8_t>(RdmapOpcode::kTerminate);
  h.qn = wire::kQnTerminate;
  h.msn = msn_tx_[wire::kQnTerminate]++;
  queue_control(h, wire::Bytes(body, n ? *n : 0));
  terminate_queued_ = true;
  ++counters_.terminates_sent;
}

void Qp::pump_tx(int budget) {
  if (!stream_) return;
  const std::size_t max_pay = tx_max_payload();
  static thread_local TxBatch b;
  for (;;) {
    if (!flush_pending()) return;
    if (!control_.empty()) {
      pending_ = std::move(control_);
      control_.clear();
      pending_off_ = 0;
      continue;
    }
    if (state_ != QpState::kRts || (phase_ != Phase::kRunning && phase_ != Phase::kClosing)) {
      return;
    }
    if (budget-- == 0) {
      tx_blocked_ = true;  // more to send: EPOLLOUT brings the progress thread back
      return;
    }
    TxCursor c;
    std::optional<core::MrTable::Guard> guard;
    guard.emplace(dev_.mrs());
    if (!build_batch(b, c, max_pay)) {
      guard.reset();
      if (c.local_err) {
        // A local protection error: the WQE fails with it, the rest are flushed, and the
        // peer learns of it through a TERMINATE (local catastrophic).
        c.local_err->done = true;
        c.local_err->status = c.local_status;
        fail_rx(RxError::kLocal, {});
        continue;
      }
      if (c.resp_failed) {
        fail_rx(c.resp_err, {});
        continue;
      }
      break;
    }
    std::size_t sent = 0;
    if (!write_batch(b, sent)) return;
    bool short_write = false;
    const std::size_t ncommit = account_sent(b, sent, short_write);
    guard.reset();
    if (!commit_sent(b, ncommit)) {
      // A LOCAL_INV of a key we cannot invalidate: the WQE fails, the QP goes to error.
      to_error(WcStatus::kWrFlushErr);
      return;
    }
    complete_sq();
    if (short_write) {
      // The stream took less than offered: it is full. A write that stopped at an FPDU's end
      // leaves nothing pending, so only the writable event can bring the progress thread back
      // (without it the rest waited for the next post: a sender that stops posting stalled).
      tx_blocked_ = true;
      return;
    }
  }
  fin_when_drained();
}

bool Qp::write_batch(TxBatch& b, std::size_t& sent) {
  sent = 0;
  if (b.niov == 0) return true;
  const StreamIo r = stream_->send(std::span<const iovec>(b.iov, b.niov));
  ++counters_.sendmsg_calls;
  if (r.error != 0) {
    if (r.error != EAGAIN) {
      conn_error(r.error);
      return false;
    }
    tx_blocked_ = true;
  }
  sent = r.bytes;
  return true;
}

// FPDUs that went out whole or in part are committed; a cut one leaves its tail pending.
std::size_t Qp::account_sent(TxBatch& b, std::size_t sent, bool& short_write) {
  std::size_t at = 0, ncommit = 0;
  short_write = false;
  for (; ncommit < b.ndesc; ++ncommit) {
    const TxDesc& d = b.descs[ncommit];
    if (d.bytes > 0 && at >= sent) {
      short_write = true;
      break;
    }
    if (d.bytes > 0 && at + d.bytes > sent) {
      gather_iov(&b.iov[d.iov_begin], d.iov_end - d.iov_begin, sent - at, pending_);
      pending_off_ = 0;
      short_write = true;
    }
    if (trace_ && d.bytes > 0) {
      b.one.clear();
      gather_iov(&b.iov[d.iov_begin], d.iov_end - d.iov_begin, 0, b.one);
      trace_->tx(b.one, d.corrupt ? "corrupt" : "");
    }
    at += d.bytes;
    if (short_write) {
      ++ncommit;
      break;
    }
  }
  return ncommit;
}

bool Qp::commit_sent(const TxBatch& b, std::size_t ncommit) {
  std::size_t resp_popped = 0;
  bool local_failed = false;
  for (std::size_t i = 0; i < ncommit; ++i) {
    const TxDesc& d = b.descs[i];
    std::copy(d.msn, d.msn + 3, msn_tx_);
    marker_tx_off_ = d.moff;
    if (d.bytes > 0) {
      ++fpdus_sent_;
      ++counters_.tx_fpdus;
      counters_.tx_bytes += d.bytes;
    }
    switch (d.kind) {
      case TxDesc::Kind::kResp: {
        InboundRead& r = inbound_[d.idx - resp_popped];
        r.sent = d.end;
        if (d.last) {
          inbound_.pop_front();
          ++resp_popped;
        }
        break;
      }
      case TxDesc::Kind::kLocal: {
        SendWqe& w = sq_[d.idx];
        w.all_sent = w.done = true;
        sq_next_ = d.idx + 1;
        auto mr = dev_.mrs().find(w.inv_stag);
        if (!mr || mr->pd != pd_) {
          w.status = WcStatus::kLocProtErr;
          local_failed = true;
        } else {
          mr->valid.store(false, std::memory_order_release);
        }
        break;
      }
      case TxDesc::Kind::kSq: {
        SendWqe& w = sq_[d.idx];
        w.sent = d.end;
        if (d.last) {
          w.all_sent = true;
          sq_next_ = d.idx + 1;
          if (w.opcode == WrOpcode::kRdmaRead) {
            ++reads_out_;
          } else {
            w.done = true;
          }
        }
        break;
      }
    }
  }
  return !local_failed;
}

void Qp::fin_when_drained() {
  if (fin_after_drain_ && phase_ == Phase::kClosing && !fin_sent_ && sq_next_ == sq_.size() &&
      inbound_.empty() && pending_.empty() && control_.empty()) {
    stream_->shutdown_send();
    fin_sent_ = true;
    if (trace_) trace_->tx_fin();
  }
}

void Qp::on_writable() {
  tx_blocked_ = false;
  pump_tx();
}

}  // namespace softrdma::iwarp
