#include "iwarp/qp.h"

#include <sys/epoll.h>

#include <cerrno>
#include <cstring>

#include "core/payload.h"
#include "iwarp/device.h"
#include "wire/fpdu.h"

namespace softrdma::iwarp {

using core::WrOpcode;

Qp::Qp(Device& dev, std::uint32_t qpn, Pd* pd, Cq* send_cq, Cq* recv_cq, Srq* srq,
       const core::QpCap& cap, bool sq_sig_all)
    : dev_(dev),
      qpn_(qpn),
      pd_(pd),
      send_cq_(send_cq),
      recv_cq_(recv_cq),
      srq_(srq),
      sq_sig_all_(sq_sig_all),
      cap_(cap) {
  rq_.init(cap.max_recv_wr, cap.max_recv_sge);
  rx_.resize(256 * 1024);
  rx_plain_.resize(wire::kMaxUlpduLen + 64);
}

Qp::~Qp() {
  if (stream_) {
    unwatch();
    stream_->close();
  }
}

QpState Qp::state() const {
  return read_locked(state_);
}

QpCounters Qp::counters() const {
  return read_locked(counters_);
}

std::uint16_t Qp::ird() const {
  return read_locked(ird_);
}
std::uint16_t Qp::ord() const {
  return read_locked(ord_);
}
bool Qp::crc_in_use() const {
  return read_locked(crc_);
}
bool Qp::markers_tx() const {
  return read_locked(markers_tx_);
}
bool Qp::markers_rx() const {
  return read_locked(markers_rx_);
}

void Qp::set_event_handler(QpEventCallback fn) {
  AppLock lock(*this);
  on_event_ = std::move(fn);
}

std::vector<std::function<void()>> Qp::take_callbacks() {
  AppLock lock(*this);
  return std::exchange(callbacks_, {});
}

void Qp::event(QpEvent ev) {
  if (on_event_) callbacks_.push_back([fn = on_event_, ev] { fn(ev); });
  dev_.kick();
}

void Qp::sync_epoll() {
  if (!stream_) return;
  std::uint32_t want = 0;
  if (phase_ != Phase::kIdle && phase_ != Phase::kDead) want = EPOLLIN | EPOLLRDHUP;
  if (phase_ == Phase::kDead && !peer_fin_) want = EPOLLIN | EPOLLRDHUP;  // notice the close
  if (wants_writable()) want |= stream_->readiness_signalled() ? EPOLLIN : EPOLLOUT;
  if (want == epoll_events_) return;
  dev_.watch(stream_->wait_fd(), qpn_, epoll_events_, want);
  epoll_events_ = want;
}

void Qp::unwatch() {
  if (stream_ && epoll_events_ != 0) dev_.watch(stream_->wait_fd(), qpn_, epoll_events_, 0);
  epoll_events_ = 0;
}

void Qp::release_stream() {
  unwatch();
  stream_.reset();
}

bool Qp::wants_writable() const {
  return stream_ && (tx_blocked_ || pending_off_ < pending_.size() || !control_.empty());
}

int Qp::post_send(std::span<const core::SendWr> wrs, std::size_t* bad) {
  AppLock lock(*this);
  int rc = 0;
  std::size_t n = 0;
  for (const core::SendWr& wr : wrs) {
    switch (wr.opcode) {
      case WrOpcode::kSend:
      case WrOpcode::kSendWithInv:
      case WrOpcode::kRdmaWrite:
      case WrOpcode::kRdmaRead:
      case WrOpcode::kLocalInv:
        break;
      default:
        rc = EOPNOTSUPP;  // immediate data, atomics, MW bind, TSO: not iWARP (RFC 7306)
        break;
    }
    if (rc) break;
    if (state_ != QpState::kRts && state_ != QpState::kErr) {
      rc = EINVAL;
      break;
    }
    if (sq_.size() >= cap_.max_send_wr || wr.sg_list.size() > cap_.max_send_sge) {
      rc = wr.sg_list.size() > cap_.max_send_sge ? EINVAL : ENOMEM;
      break;
    }
    if (wr.opcode == WrOpcode::kRdmaRead && wr.sg_list.size() > 1) {
      rc = EINVAL;  // the Read's sink is one STag: one SGE (as siw's max_sge_rd)
      break;
    }
    if (wr.opcode == WrOpcode::kRdmaRead && state_ == QpState::kRts && ord_ == 0) {
      // The connection was set up with ORD 0: no Read Request may ever go out, and queued
      // behind the ORD limit it would wait forever (siw fails such a READ too).
      rc = EINVAL;
      break;
    }
    SendWqe& w = sq_.emplace_back();
    w.wr_id = wr.wr_id;
    w.opcode = wr.opcode;
    w.flags = wr.send_flags | (sq_sig_all_ ? core::kSendSignaled : 0u);
    w.inv_stag = wr.opcode == WrOpcode::kLocalInv ? wr.invalidate_rkey
                 : wr.opcode == WrOpcode::kSendWithInv
                     ? (wr.invalidate_rkey ? wr.invalidate_rkey : wr.imm_data)
                     : 0;
    w.remote_addr = wr.remote_addr;
    w.rkey = wr.rkey;
    for (const core::Sge& s : wr.sg_list) w.length += s.length;
    if ((wr.send_flags & core::kSendInline) != 0 && wr.opcode != WrOpcode::kRdmaRead) {
      if (w.length > core::kMaxInline) {
        sq_.pop_back();
        rc = EINVAL;
        break;
      }
      // Inline data is copied at post time straight from the application's buffers: their
      // lkeys mean nothing (the buffers need not be registered), as with the RoCE QPs.
      std::uint64_t off = 0;
      for (const core::Sge& s : wr.sg_list) {
        if (s.length) {
          std::memcpy(w.inline_data.data() + off, reinterpret_cast<const void*>(s.addr), s.length);
        }
        off += s.length;
      }
      w.is_inline = true;
    } else {
      w.sge.assign(wr.sg_list.begin(), wr.sg_list.end());
    }
    if (w.length > (1ull << 31)) {
      sq_.pop_back();
      rc = EINVAL;
      break;
    }
    ++n;
  }
  if (bad) *bad = n;
  if (n > 0) {
    if (state_ == QpState::kErr) {
      to_error(WcStatus::kWrFlushErr);
    } else {
      pump_tx(4);
    }
    sync_epoll();
  }
  return rc;
}

int Qp::post_recv(std::span<const core::RecvWr> wrs, std::size_t* bad) {
  AppLock lock(*this);
  std::size_t n = 0;
  int rc = 0;
  if (srq_) rc = EINVAL;
  if (!rc && state_ == QpState::kReset) rc = EINVAL;
  for (const core::RecvWr& wr : wrs) {
    if (rc) break;
    rc = rq_.post(wr);
    if (!rc) ++n;
  }
  if (bad) *bad = n;
  if (n > 0 && state_ == QpState::kErr) to_error(WcStatus::kWrFlushErr);
  return rc;
}

void Qp::set_error() {
  AppLock lock(*this);
  to_error(WcStatus::kWrFlushErr);
  sync_epoll();
}

int Qp::modify_state(QpState to) {
  AppLock lock(*this);
  switch (to) {
    case QpState::kErr:
      to_error(WcStatus::kWrFlushErr);
      sync_epoll();
      return 0;
    case QpState::kRts:
      return state_ == QpState::kRts ? 0 : EINVAL;
    case QpState::kReset:
    case QpState::kInit:
    case QpState::kRtr:
      if (phase_ != Phase::kIdle || stream_) return EINVAL;
      if (to == QpState::kReset) {
        if (send_cq_) send_cq_->remove_qp(qpn_);
        if (recv_cq_ && recv_cq_ != send_cq_) recv_cq_->remove_qp(qpn_);
        rq_.clear();
        sq_.clear();
        sq_next_ = 0;
      }
      state_ = to;
      return 0;
    default:
      return EINVAL;
  }
}

core::QpCap Qp::cap() const {
  AppLock lock(*this);
  return cap_;
}

void Qp::complete_recv(const core::RecvWqe& w, WcStatus st, std::uint32_t len, std::uint32_t flags,
                       std::uint32_t inv, bool solicited) {
  core::Wc wc;
  wc.wr_id = w.wr_id;
  wc.status = st;
  wc.opcode = core::WcOpcode::kRecv;
  wc.byte_len = len;
  wc.qp_num = qpn_;
  wc.wc_flags = flags;
  wc.invalidated_rkey = inv;
  recv_cq_->push(wc, solicited);
}

void Qp::complete_sq() {
  while (!sq_.empty() && sq_.front().done) {
    SendWqe& w = sq_.front();
    if ((w.flags & core::kSendSignaled) != 0 || w.status != WcStatus::kSuccess) {
      core::Wc wc;
      wc.wr_id = w.wr_id;
      wc.status = w.status;
      wc.qp_num = qpn_;
      switch (w.opcode) {
        case WrOpcode::kRdmaWrite:
          wc.opcode = core::WcOpcode::kRdmaWrite;
          break;
        case WrOpcode::kRdmaRead:
          wc.opcode = core::WcOpcode::kRdmaRead;
          wc.byte_len = static_cast<std::uint32_t>(w.placed);
          break;
        case WrOpcode::kLocalInv:
          wc.opcode = core::WcOpcode::kLocalInv;
          break;
        default:
          wc.opcode = core::WcOpcode::kSend;
          break;
      }
      send_cq_->push(wc, false);
    }
    sq_.pop_front();
    if (sq_next_ > 0) --sq_next_;
  }
}

// Every WQE not yet complete fails: the first outstanding one with `first_status` (the one
// a TERMINATE names, or a flush), the rest with WR_FLUSH_ERR; receives are flushed.
void Qp::to_error(WcStatus first_status) {
  const bool was_err = state_ == QpState::kErr;
  state_ = QpState::kErr;
  if (phase_ != Phase::kDead && phase_ != Phase::kIdle) phase_ = Phase::kDead;
  bool first = true;
  for (SendWqe& w : sq_) {
    if (w.done) continue;
    w.done = true;
    w.status = first ? first_status : WcStatus::kWrFlushErr;
    first = false;
  }
  sq_next_ = sq_.size();
  reads_out_ = 0;
  direct_.active = false;
  inbound_.clear();
  complete_sq();
  if (cur_recv_) {
    complete_recv(*cur_recv_, WcStatus::kWrFlushErr, 0, 0, 0, false);
    cur_recv_.reset();
  }
  while (!rq_.empty()) {
    complete_recv(rq_.front(), WcStatus::kWrFlushErr, 0, 0, 0, false);
    rq_.pop();
  }
  if (!was_err) {
    connect_cb_ = nullptr;
    accept_cb_ = nullptr;
    if (srq_) {
      QpEvent ev;
      ev.kind = QpEvent::Kind::kLastWqeReached;
      event(ev);
    }
  }
}

void Qp::conn_error(int err) {
  const bool connecting = phase_ == Phase::kWaitReply || phase_ == Phase::kWaitRtr;
  if (connecting) {
    fail_connect(err);
    return;
  }
  if (peer_fin_) return;
  peer_fin_ = true;
  QpEvent ev;
  if (state_ == QpState::kErr) {
    // Already failed (a TERMINATE): the connection's end is a disconnect for the CM.
    ev.kind = QpEvent::Kind::kDisconnected;
  } else {
    to_error(WcStatus::kWrFlushErr);
    ev.kind = QpEvent::Kind::kConnError;
    ev.error = err;
  }
  event(ev);
}

void Qp::peer_closed() {
  peer_fin_ = true;
  if (trace_) trace_->rx_fin();
  if (phase_ == Phase::kWaitReply || phase_ == Phase::kWaitRtr) {
    fail_connect(ECONNRESET);
    return;
  }
  const bool was_live = state_ != QpState::kErr;
  to_error(WcStatus::kWrFlushErr);
  // The connection is over: our FIN follows the peer's at once, as siw closes its socket, so a
  // peer waiting in rdma_disconnect for our end hears it even if the program never disconnects.
  close_graceful();
  if (was_live || phase_ == Phase::kDead) {
    QpEvent ev;
    ev.kind = QpEvent::Kind::kDisconnected;
    event(ev);
  }
}

void Qp::close_graceful() {
  if (!stream_) return;
  if (phase_ == Phase::kRunning) {
    phase_ = Phase::kClosing;
    fin_after_drain_ = true;
    pump_tx();
  } else if (!fin_sent_) {  // not running (or its drain cut short): the FIN goes now
    fin_after_drain_ = true;
    fin_sent_ = true;
    stream_->shutdown_send();
    if (trace_) trace_->tx_fin();
  }
}

void Qp::close_abortive() {
  if (!stream_) return;
  unwatch();
  stream_->abort();
  stream_.reset();
  to_error(WcStatus::kWrFlushErr);
  phase_ = Phase::kDead;
}

}  // namespace softrdma::iwarp
