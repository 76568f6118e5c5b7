#include "rxe/qp.h"

#include <cerrno>
#include <cstring>

#include "rxe/device.h"
#include "rxe/psn.h"
#include "rxe/qp_state.h"
#include "rxe/request_opcode.h"
#include "wire/roce_frame.h"

namespace softrdma::rxe {

Qp::Qp(Device& dev, std::uint32_t qpn, QpType type, Pd* pd, Cq* send_cq, Cq* recv_cq, Srq* srq,
       const QpCap& cap, bool sq_sig_all, Xrcd* xrcd)
    : dev_(dev),
      qpn_(qpn),
      type_(type),
      pd_(pd),
      send_cq_(send_cq),
      recv_cq_(recv_cq),
      srq_(srq),
      xrcd_(xrcd),
      reported_qpn_(qpn),
      sq_sig_all_(sq_sig_all),
      cap_(cap),
      cc_on_(dev.cc().dcqcn),
      pace_line_(dev.cc().dcqcn && dev.cc().pace_line_rate),
      dcqcn_(type == QpType::kUc || type == QpType::kUd ? rp_unreliable(dev.cc().rp)
                                                        : dev.cc().rp) {
  rq_.init(cap.max_recv_wr, cap.max_recv_sge);
  pkey_.store(dev.pkeys().front(), std::memory_order_relaxed);  // pkey_index 0 until modified
  src_port_ = wire::roce_src_port(qpn);
  attr_.cap = cap;
  if (type == QpType::kUd) ud_hold_.set_budget(dev.ud_hold_budget());
}

QpState Qp::state() const {
  std::lock_guard lock(mutex_);
  return attr_.qp_state;
}

QpCounters Qp::counters() const {
  std::lock_guard lock(mutex_);
  return counters_;
}

int Qp::query(QpAttr& attr, QpCap& cap) {
  std::lock_guard lock(mutex_);
  attr = attr_;
  attr.cur_qp_state = attr_.qp_state;
  attr.sq_psn = req_psn_;
  attr.rq_psn = epsn_;
  attr.cap = cap_;
  cap = cap_;
  return 0;
}

int Qp::modify(const QpAttr& a, std::uint32_t mask) {
  // Leaving RTS: an ACK waiting for a reply leaves first (rxe/ack_hold.h).
  if ((mask & kQpState) && a.qp_state != QpState::kRts && reliable()) dev_.send_waiting_ack(qpn_);
  std::unique_lock lock(mutex_);
  const QpState cur = attr_.qp_state;
  if ((mask & kQpCurState) && a.cur_qp_state != cur) return EINVAL;
  const QpState next = (mask & kQpState) ? a.qp_state : cur;
  if (!transition_ok(type_, cur, next, mask | kQpState)) return EINVAL;
  // Value checks.
  if ((mask & kQpPort) && a.port_num != 1) return EINVAL;
  if ((mask & kQpPkeyIndex) && a.pkey_index >= dev_.pkeys().size()) return EINVAL;
  if ((mask & kQpPathMtu) &&
      (static_cast<int>(a.path_mtu) < 1 || static_cast<int>(a.path_mtu) > 5)) {
    return EINVAL;
  }
  if ((mask & kQpMaxQpRdAtomic) && a.max_rd_atomic > dev_.attr().max_qp_init_rd_atom) {
    return EINVAL;
  }
  if ((mask & kQpMaxDestRdAtomic) && a.max_dest_rd_atomic > dev_.attr().max_qp_rd_atom) {
    return EINVAL;
  }
  if ((mask & kQpRetryCnt) && a.retry_cnt > 7) return EINVAL;
  if ((mask & kQpRnrRetry) && a.rnr_retry > 7) return EINVAL;
  if ((mask & kQpTimeout) && a.timeout > 31) return EINVAL;
  if ((mask & kQpMinRnrTimer) && a.min_rnr_timer > 31) return EINVAL;
  if ((mask & kQpDestQpn) && a.dest_qp_num > 0xFFFFFF) return EINVAL;
  if (mask & kQpAv) {
    netdev::IpAddr ip;
    if (!dev_.gid_to_ip(a.ah_attr.dgid, ip)) return EINVAL;
    peer_ = ip;
    local_ = dev_.source_address(a.ah_attr.sgid_index);
    attr_.ah_attr = a.ah_attr;
  }
  if (mask & kQpAccessFlags) attr_.qp_access_flags = a.qp_access_flags;
  if (mask & kQpQkey) attr_.qkey = a.qkey;
  if (mask & kQpPathMtu) {
    // The path MTU never exceeds what the link carries.
    const Mtu link = dev_.port_attr().active_mtu;
    attr_.path_mtu = static_cast<int>(a.path_mtu) < static_cast<int>(link) ? a.path_mtu : link;
    mtu_ = mtu_bytes(attr_.path_mtu);
  }
  if (mask & kQpDestQpn) attr_.dest_qp_num = a.dest_qp_num;
  if (mask & kQpRqPsn) {
    attr_.rq_psn = a.rq_psn & kPsnMask;
    epsn_ = attr_.rq_psn;
  }
  if (mask & kQpSqPsn) {
    attr_.sq_psn = a.sq_psn & kPsnMask;
    req_psn_ = unacked_psn_ = sent_psn_ = attr_.sq_psn;
    loss_window_.reset();
  }
  if (mask & kQpTimeout) attr_.timeout = a.timeout;
  if (mask & kQpPkeyIndex) {
    attr_.pkey_index = a.pkey_index;
    pkey_.store(dev_.pkeys()[a.pkey_index], std::memory_order_relaxed);
  }
  if (mask & kQpRetryCnt) {
    attr_.retry_cnt = a.retry_cnt;
    retry_left_ = a.retry_cnt;
  }
  if (mask & kQpRnrRetry) {
    attr_.rnr_retry = a.rnr_retry;
    rnr_retry_left_ = a.rnr_retry;
  }
  if (mask & kQpMinRnrTimer) attr_.min_rnr_timer = a.min_rnr_timer;
  if (mask & kQpMaxQpRdAtomic) attr_.max_rd_atomic = a.max_rd_atomic;
  if (mask & kQpMaxDestRdAtomic) {
    attr_.max_dest_rd_atomic = a.max_dest_rd_atomic;
    resources_.assign(std::max<std::size_t>(a.max_dest_rd_atomic, 1), RespResource{});
    next_resource_ = 0;
  }
  if (mask & kQpEnSqdAsyncNotify) attr_.en_sqd_async_notify = a.en_sqd_async_notify;
  if (type_ == QpType::kUd && next >= QpState::kInit) local_ = dev_.source_address(0);

  publish_receiving(next);
  if (next != cur) {
    attr_.qp_state = next;
    if (next == QpState::kReset) {
      if (send_cq_) send_cq_->remove_qp(qpn_);
      if (recv_cq_ && recv_cq_ != send_cq_) recv_cq_->remove_qp(qpn_);
      sq_.clear();
      rq_.clear();
      req_idx_ = 0;
      outstanding_rd_atomic_ = 0;
      probing_ = false;
      loss_window_.reset();
      in_message_ = have_wqe_ = uc_drop_ = nak_sent_ = false;
      counters_.dropped_no_recv += ud_hold_.clear();
      responses_.clear();
      if (fwd_) *fwd_ = XrcForward{};
      msn_ = 0;
      ack_hold_.reset();
      retransmit_deadline_ = rnr_deadline_ = Clock::time_point::max();
    } else if (next == QpState::kErr) {
      enter_error();
      last_wqe_reached();  // (enter_error saw the state set already)
      return 0;
    } else if (next == QpState::kRts || next == QpState::kSqd) {
      sqd_notified_ = false;
      if (next == QpState::kSqd || !sq_.empty()) {
        lock.unlock();
        dev_.kick(this);
      }
    }
  }
  return 0;
}

int Qp::post_send(const SendWr& wr) {
  std::unique_lock lock(mutex_);
  const QpState st = attr_.qp_state;
  if (type_ == QpType::kXrcRecv) return EINVAL;  // an XRC target has no send queue
  if (st == QpState::kReset || st == QpState::kInit || st == QpState::kRtr) return EINVAL;
  if (sq_.size() >= cap_.max_send_wr) return ENOMEM;
  if (wr.sg_list.size() > cap_.max_send_sge) return EINVAL;
  // Which operations each transport allows.
  switch (wr.opcode) {
    case WrOpcode::kSend:
    case WrOpcode::kSendWithImm:
      break;
    case WrOpcode::kRdmaWrite:
    case WrOpcode::kRdmaWriteWithImm:
      if (type_ == QpType::kUd) return EINVAL;
      break;
    case WrOpcode::kRdmaRead:
    case WrOpcode::kAtomicCmpAndSwp:
    case WrOpcode::kAtomicFetchAndAdd:
    case WrOpcode::kSendWithInv:
      if (!reliable()) return EINVAL;
      break;
    case WrOpcode::kAtomicWrite:  // IBTA 1.5 A19: RC only
    case WrOpcode::kFlush:
      if (type_ != QpType::kRc) return EINVAL;
      break;
    case WrOpcode::kLocalInv:
      break;
    case WrOpcode::kBindMw:
      if (type_ == QpType::kUd) return EINVAL;  // windows are for RC and UC (IBTA 10.6.7)
      break;
    default:
      return EOPNOTSUPP;  // TSO
  }
  SendWqe& w = sq_.emplace_back();
  if (dev_.sampling_latency()) w.post_ns = steady_ns();
  w.wr_id = wr.wr_id;
  w.opcode = wr.opcode;
  w.flags = wr.send_flags;
  w.imm = wr.imm_data;
  w.invalidate_rkey = wr.invalidate_rkey;
  w.remote_addr = wr.remote_addr;
  w.rkey = wr.rkey;
  w.compare_add = wr.compare_add;
  w.swap = wr.swap;
  w.remote_srqn = wr.remote_srqn;
  w.bind = MwBind{wr.mw_handle, wr.mw_rkey, wr.mw_mr_lkey, wr.mw_addr, wr.mw_length, wr.mw_access};
  w.length = 0;
  for (const Sge& s : wr.sg_list) w.length += s.length;
  const bool atomic =
      wr.opcode == WrOpcode::kAtomicCmpAndSwp || wr.opcode == WrOpcode::kAtomicFetchAndAdd;
  auto reject = [&](int err) {
    sq_.pop_back();
    return err;
  };
  if (atomic && (w.length != 8 || wr.sg_list.size() != 1)) return reject(EINVAL);
  if (atomic && (wr.remote_addr & 7)) return reject(EINVAL);
  // ATOMIC WRITE: 8 bytes, from one SGE or inline. Its alignment is the responder's to judge
  // (IBTA 1.5 A19: a misaligned one is NAKed as an invalid request), as rxe leaves it.
  const bool atomic_write = wr.opcode == WrOpcode::kAtomicWrite;
  if (atomic_write && (w.length != 8 || wr.sg_list.empty())) return reject(EINVAL);
  if (wr.opcode == WrOpcode::kFlush) {
    // FLUSH carries no data: a placement type (global visibility and/or persistence) and a
    // selectivity level (the range, or the whole region), for a range of at most 2^31 bytes.
    if (!wr.sg_list.empty() || wr.flush_type == 0 || (wr.flush_type & ~3u) || wr.flush_level > 1 ||
        wr.flush_length > (1ull << 31)) {
      return reject(EINVAL);
    }
    w.length = wr.flush_length;
    w.flush_type = wr.flush_type;
    w.flush_level = wr.flush_level;
  }
  if (w.length > (1ull << 31)) return reject(EINVAL);
  if ((wr.send_flags & kSendInline) && wr.opcode != WrOpcode::kRdmaRead && !atomic &&
      wr.opcode != WrOpcode::kFlush) {
    if (w.length > cap_.max_inline_data && !atomic_write) return reject(EINVAL);
    // Inline data is copied now; the application may reuse its buffers at once.
    std::size_t off = 0;
    for (const Sge& s : wr.sg_list) {
      if (s.length == 0) continue;  // its address may be anything, NULL included (UCX posts such)
      std::memcpy(w.inline_data.data() + off, reinterpret_cast<const void*>(s.addr), s.length);
      off += s.length;
    }
    w.is_inline = true;
  } else {
    w.sge.assign(wr.sg_list.begin(), wr.sg_list.end());
  }
  if (type_ == QpType::kUd) {
    if (!dev_.find_ah(wr.ah, w.av)) return reject(EINVAL);
    w.remote_qpn = wr.remote_qpn;
    // A Q_Key with the high bit set means "use the QP's own Q_Key" (IBTA 10.2.5).
    w.remote_qkey = (wr.remote_qkey & 0x80000000u) ? attr_.qkey : wr.remote_qkey;
    if (w.length > mtu_bytes(dev_.port_attr().active_mtu)) return reject(EINVAL);
  }
  if (st == QpState::kErr || st == QpState::kSqe) {
    // Completed with a flush error, as on hardware.
    w.done = true;
    w.status = WcStatus::kWrFlushErr;
    complete_ready();
    return 0;
  }
  lock.unlock();
  dev_.kick(this);
  return 0;
}

int Qp::post_recv(const RecvWr& wr) {
  std::unique_lock lock(mutex_);
  if (srq_ || xrc()) return EINVAL;  // no receive queue of its own
  if (attr_.qp_state == QpState::kReset) return EINVAL;
  const int rc = rq_.post(wr);
  if (rc) return rc;
  if (attr_.qp_state == QpState::kErr) flush_queues();
  // Datagrams waiting for a WQE take it now (or in the progress pass under way).
  if (!ud_hold_.empty()) {
    lock.unlock();
    dev_.receives_posted(this);
  }
  return 0;
}

void Qp::post_recv_completion(const Wc& wc, bool solicited) {
  dev_.complete_recv(*this, rx_cq(), wc, solicited);
}

void Qp::flush_queues() {
  // Send queue: everything not yet completed, in order.
  for (SendWqe& w : sq_) {
    if (!w.done) {
      w.done = true;
      w.status = WcStatus::kWrFlushErr;
    }
  }
  complete_ready();
  while (!rq_.empty()) {
    Wc wc;
    wc.wr_id = rq_.front().wr_id;
    wc.status = WcStatus::kWrFlushErr;
    wc.opcode = WcOpcode::kRecv;
    wc.qp_num = qpn_;
    post_recv_completion(wc, false);
    rq_.pop();
  }
  if (!have_wqe_) return;
  // An XRC target outside a request (modify to ERR): the SRQ the WQE came from, if it still
  // exists, takes the flush error on its CQ; if it was destroyed, the WQE went with it.
  const bool outside = type_ == QpType::kXrcRecv && !xrc_srq_;
  if (outside && !hold_xrc_srq(xrc_wqe_srqn_)) {
    have_wqe_ = false;
    return;
  }
  fail_recv_wqe(WcStatus::kWrFlushErr);
  if (outside) drop_xrc_srq();
}

void Qp::publish_receiving(QpState state) {
  Directory* d = dev_.directory();
  if (!d || type_ == QpType::kUd || xrc()) return;  // XRC: the PD is each request's SRQ's
  const bool receiving = state == QpState::kRtr || state == QpState::kRts ||
                         state == QpState::kSqd || state == QpState::kSqe;
  if (receiving && (attr_.qp_access_flags & kAccessRemoteWrite)) {
    d->set_qp(qpn_, DirQp{pd_->handle, type_, true, attr_.dest_qp_num, peer_, pkey()});
  } else {
    d->remove_qp(qpn_);
  }
}

void Qp::enter_error() {
  const bool was_err = attr_.qp_state == QpState::kErr;
  publish_receiving(QpState::kErr);
  attr_.qp_state = QpState::kErr;
  retransmit_deadline_ = rnr_deadline_ = Clock::time_point::max();
  ack_hold_.reset();
  in_message_ = false;
  for (auto& r : resources_) r.active = false;
  counters_.dropped_no_recv += ud_hold_.clear();
  if (fwd_) *fwd_ = XrcForward{};  // a passed request's answer is ignored, the parked dropped
  flush_queues();
  if (!was_err) last_wqe_reached();
}

void Qp::last_wqe_reached() {
  // A QP of an SRQ takes no more of its WQEs: the owner may now destroy it (IBTA 11.6.3.1;
  // SPDK's NVMe-oF target waits for it before it does). An XRC target takes from the SRQs of
  // its domain, so it says so too (annex A14).
  if (srq_ || type_ == QpType::kXrcRecv) {
    dev_.async_event({AsyncEventType::kQpLastWqeReached, this});
  }
}

wire::Transport Qp::wire_transport() const {
  return transport_of(type_);
}

Clock::time_point Qp::next_deadline() const {
  return std::min({retransmit_deadline_, rnr_deadline_, pace_deadline_, ack_hold_.deadline(),
                   ud_hold_.empty() ? Clock::time_point::max() : ud_hold_.front_deadline(),
                   fwd_ ? fwd_->deadline : Clock::time_point::max()});
}

}  // namespace softrdma::rxe
