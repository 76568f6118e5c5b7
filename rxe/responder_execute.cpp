// The responder's execute step, once a request passed its checks (rxe/responder.cpp):
// SEND scattered into the receive WQE, RDMA WRITE placed, READ queued as a resource for
// its responses, atomics run; each completes its message and bumps the MSN at its end.
#include <atomic>
#include <cstring>

#include "core/payload.h"
#include "core/safe_copy.h"
#include "rxe/device.h"
#include "rxe/psn.h"
#include "rxe/qp.h"
#include "rxe/responder.h"
#include "rxe/segment.h"
#include "rxe/uses_core.h"

namespace softrdma::rxe {

RxVerdict Qp::execute_request(const InboundRequest& rq) {
  switch (rq.info.kind) {
    case wire::OpKind::kSend:
      return execute_send(rq);
    case wire::OpKind::kWrite:
      return execute_write(rq);
    case wire::OpKind::kReadRequest:
      return execute_read(rq);
    case wire::OpKind::kAtomic:
      return execute_atomic(rq);
    case wire::OpKind::kAtomicWrite:
      return execute_atomic_write(rq);
    case wire::OpKind::kFlush:
      return execute_flush(rq);
    default:
      ++counters_.dropped_bad_opcode;
      return RxVerdict::kIgnore;
  }
}

RxVerdict Qp::execute_send(const InboundRequest& rq) {
  if (rq.starts) {
    cur_offset_ = 0;
    cur_is_send_ = true;
    in_message_ = !rq.ends;
  }
  if (cur_offset_ + rq.n > cur_wqe_.total) {
    if (rq.rc) return fail_request(rq, wire::syndrome::kNakInvalidRequest, WcStatus::kLocLenErr);
    fail_recv_wqe(WcStatus::kLocLenErr);
    return uc_discard(!rq.ends);
  }
  WcStatus err = WcStatus::kSuccess;
  if (rq.n &&
      !scatter(dev_.mrs(), rx_pd(), cur_wqe_.sge, cur_offset_, rq.pkt.payload.data(), rq.n, err)) {
    return fail_placement(rq, wire::syndrome::kNakRemoteOp, WcStatus::kLocProtErr);
  }
  cur_offset_ += rq.n;
  if (!rq.ends) return RxVerdict::kDone;
  const wire::RoceHeaders& hdr = rq.pkt.hdr;
  Wc wc;
  wc.wr_id = cur_wqe_.wr_id;
  wc.opcode = WcOpcode::kRecv;
  wc.byte_len = static_cast<std::uint32_t>(cur_offset_);
  wc.qp_num = reported_qpn_;
  wc.src_qp = attr_.dest_qp_num;
  if (hdr.imm) {
    wc.imm_data = *hdr.imm;
    wc.wc_flags |= kWcWithImm;
  }
  if (hdr.inv_rkey) {
    wc.invalidated_rkey = *hdr.inv_rkey;
    wc.wc_flags |= kWcWithInv;
    if (!dev_.mrs().invalidate(*hdr.inv_rkey, qpn_)) {
      return fail_request(rq, wire::syndrome::kNakInvalidRequest);
    }
  }
  have_wqe_ = false;
  in_message_ = false;
  msn_ = (msn_ + 1) & 0xFFFFFF;
  post_recv_completion(wc, hdr.bth.se);
  return RxVerdict::kDone;
}

RxVerdict Qp::execute_write(const InboundRequest& rq) {
  if (rq.n) {
    MrTable::Guard g(dev_.mrs());
    std::uint8_t* host = nullptr;
    bool on_demand = false;
    const MrCheck c = dev_.mrs().resolve(write_rkey_, rx_pd(), write_va_ + cur_offset_, rq.n,
                                         kAccessRemoteWrite, &host, qpn_, &on_demand);
    if (c != MrCheck::kOk) return fail_placement(rq, nak_for(c), WcStatus::kSuccess);
    if (rq.raw.placed) {
      ++counters_.placed_received;  // its sender wrote it already (direct placement)
    } else if (!on_demand) {
      std::memcpy(host, rq.pkt.payload.data(), rq.n);
    } else if (!core::fault_safe_write(host, rq.pkt.payload.data(), rq.n)) {
      dev_.mrs().count_odp_fault();  // an ODP region's page unmapped under the write
      return fail_placement(rq, wire::syndrome::kNakRemoteAccess, WcStatus::kSuccess);
    }
  }
  cur_offset_ += rq.n;
  if (!rq.ends) return RxVerdict::kDone;
  in_message_ = false;
  msn_ = (msn_ + 1) & 0xFFFFFF;
  if (rq.pkt.hdr.imm) {
    Wc wc;
    wc.wr_id = cur_wqe_.wr_id;
    wc.opcode = WcOpcode::kRecvRdmaWithImm;
    wc.byte_len = static_cast<std::uint32_t>(write_len_);
    wc.qp_num = reported_qpn_;
    wc.src_qp = attr_.dest_qp_num;
    wc.imm_data = *rq.pkt.hdr.imm;
    wc.wc_flags = kWcWithImm;
    have_wqe_ = false;
    post_recv_completion(wc, rq.pkt.hdr.bth.se);
  }
  return RxVerdict::kDone;
}

RxVerdict Qp::execute_read(const InboundRequest& rq) {
  const wire::Reth& reth = *rq.pkt.hdr.reth;
  start_read(rq.psn, reth).last_psn = psn_add(rq.psn, packets_for(reth.dma_len, mtu_) - 1);
  msn_ = (msn_ + 1) & 0xFFFFFF;
  return RxVerdict::kDone;  // responses are built by run_send
}

RxVerdict Qp::execute_atomic(const InboundRequest& rq) {
  const wire::AtomicEth& a = *rq.pkt.hdr.atomic_eth;
  std::uint64_t orig = 0;
  {
    MrTable::Guard g(dev_.mrs());
    std::uint8_t* host = nullptr;
    bool on_demand = false;
    const MrCheck c =
        dev_.mrs().resolve(a.rkey, rx_pd(), a.va, 8, kAccessRemoteAtomic, &host, qpn_, &on_demand);
    if (c != MrCheck::kOk) return fail_request(rq, nak_for(c));
    // An ODP region: its (8-byte aligned, so one page's) word probed first. A page unmapped by
    // another thread between the probe and the atomic is the window docs/verbs-abi.md names.
    if (on_demand && !core::fault_safe_probe_writable(host)) {
      dev_.mrs().count_odp_fault();
      return fail_request(rq, wire::syndrome::kNakRemoteAccess);
    }
    std::atomic_ref<std::uint64_t> target(*reinterpret_cast<std::uint64_t*>(host));
    const std::uint8_t opcode = rq.pkt.hdr.bth.opcode;
    if (opcode == wire::op::kRcCompareSwap || opcode == wire::op::kXrcCompareSwap) {
      orig = a.compare;
      target.compare_exchange_strong(orig, a.swap_add);
    } else {
      orig = target.fetch_add(a.swap_add);
    }
  }
  RespResource& r = claim_resource();
  r.kind = RespResource::Kind::kAtomic;
  r.first_psn = r.last_psn = rq.psn;
  r.orig = orig;
  msn_ = (msn_ + 1) & 0xFFFFFF;
  respond(wire::syndrome::kAckNoCredit, rq.psn, true, orig);
  return RxVerdict::kDone;
}

RespResource& Qp::claim_resource() {
  RespResource& r = resources_[next_resource_];
  next_resource_ = (next_resource_ + 1) % resources_.size();
  r = RespResource{};
  return r;
}

RespResource& Qp::start_read(std::uint32_t psn, const wire::Reth& reth) {
  RespResource& r = claim_resource();
  r.kind = RespResource::Kind::kRead;
  r.first_psn = r.next_psn = psn;
  r.va = reth.va;
  r.rkey = reth.rkey;
  r.pd = rx_pd();
  r.length = reth.dma_len;
  r.active = true;
  return r;
}

RxVerdict Qp::fail_placement(const InboundRequest& rq, std::uint8_t syndrome,
                             WcStatus recv_status) {
  if (rq.rc) return fail_request(rq, syndrome, recv_status);
  enter_error();  // UC: no NAK to send; the QP fails
  return RxVerdict::kIgnore;
}

}  // namespace softrdma::rxe
