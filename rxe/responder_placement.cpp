// The responder's steps for the memory placement operations of IBTA 1.5 annex A19, kept apart
// from the other requests' (rxe/responder.cpp, responder_execute.cpp):
//  - ATOMIC WRITE: 8 bytes (the RETH's DMA length and the payload) stored at an 8-byte aligned
//    address as one 64-bit store; the QP and the region need remote write access.
//  - FLUSH: the RETH's range (selectivity level 0) or the whole region (level 1) made globally
//    visible; the region needs IBV_ACCESS_FLUSH_GLOBAL, and FLUSH_PERSISTENT for persistence,
//    which no region here has (memory is process memory: docs/verbs-abi.md).
// Both are answered by an RDMA READ response ONLY without payload, in PSN order, and keep a
// responder resource so that a duplicate is answered again without running twice.
#include <atomic>
#include <cstring>

#include "core/mr.h"
#include "core/safe_copy.h"
#include "rxe/device.h"
#include "rxe/qp.h"
#include "rxe/responder.h"
#include "rxe/uses_core.h"

namespace softrdma::rxe {

namespace {

// The region access a FLUSH of this placement type needs.
std::uint32_t flush_access(std::uint8_t placement) {
  std::uint32_t a = 0;
  if (placement & wire::flush::kGlobal) a |= kAccessFlushGlobal;
  if (placement & wire::flush::kPersistent) a |= kAccessFlushPersistent;
  return a;
}

}  // namespace

RxVerdict Qp::check_atomic_write_target(const InboundRequest& rq) {
  const wire::Reth& reth = *rq.pkt.hdr.reth;
  if (!(attr_.qp_access_flags & kAccessRemoteWrite) || resources_.empty()) {
    return fail_request(rq, wire::syndrome::kNakInvalidRequest);
  }
  // Exactly 8 bytes, at an 8-byte aligned address (A19: else an invalid request).
  if (reth.dma_len != wire::kAtomicWriteLen || rq.n != wire::kAtomicWriteLen || (reth.va & 7)) {
    return fail_request(rq, wire::syndrome::kNakInvalidRequest);
  }
  return RxVerdict::kPass;  // its rkey is resolved as it executes, under the same guard
}

RxVerdict Qp::check_flush_target(const InboundRequest& rq) {
  const wire::Feth& f = *rq.pkt.hdr.feth;
  if (resources_.empty() || f.placement == 0 || (f.placement & ~3u) ||
      f.selectivity > wire::flush::kRegion) {
    return fail_request(rq, wire::syndrome::kNakInvalidRequest);
  }
  return RxVerdict::kPass;
}

RxVerdict Qp::execute_atomic_write(const InboundRequest& rq) {
  const wire::Reth& reth = *rq.pkt.hdr.reth;
  {
    MrTable::Guard g(dev_.mrs());
    std::uint8_t* host = nullptr;
    bool on_demand = false;
    const MrCheck c = dev_.mrs().resolve(reth.rkey, rx_pd(), reth.va, wire::kAtomicWriteLen,
                                         kAccessRemoteWrite, &host, qpn_, &on_demand);
    if (c != MrCheck::kOk) return fail_request(rq, nak_for(c));
    // A region registered at an iova of another alignment than its host address.
    if (reinterpret_cast<std::uintptr_t>(host) & 7) {
      return fail_request(rq, wire::syndrome::kNakInvalidRequest);
    }
    // An ODP region's word is probed first, as an atomic's (responder_execute.cpp).
    if (on_demand && !core::fault_safe_probe_writable(host)) {
      dev_.mrs().count_odp_fault();
      return fail_request(rq, wire::syndrome::kNakRemoteAccess);
    }
    // The payload's bytes as they are, stored at once: no reader sees half of them.
    std::uint64_t value;
    std::memcpy(&value, rq.pkt.payload.data(), sizeof value);
    std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(host))
        .store(value, std::memory_order_release);
  }
  RespResource& r = claim_resource();
  r.kind = RespResource::Kind::kPlacement;
  r.first_psn = r.last_psn = rq.psn;
  msn_ = (msn_ + 1) & 0xFFFFFF;
  respond_empty_read(rq.psn);
  return RxVerdict::kDone;
}

RxVerdict Qp::execute_flush(const InboundRequest& rq) {
  const wire::Feth& f = *rq.pkt.hdr.feth;
  const wire::Reth& reth = *rq.pkt.hdr.reth;
  // The whole region (or window) the key names, whatever the RETH says, at level 1.
  std::uint64_t va = reth.va, len = reth.dma_len;
  if (f.selectivity == wire::flush::kRegion) {
    Mw w;
    if (auto mr = dev_.mrs().find(reth.rkey)) {
      va = mr->iova;
      len = mr->length;
    } else if (dev_.mrs().find_mw(reth.rkey >> 8, &w) && w.mr) {
      va = w.iova;
      len = w.length;
    }
  }
  {
    MrTable::Guard g(dev_.mrs());
    std::uint8_t* host = nullptr;
    const MrCheck c =
        dev_.mrs().resolve(reth.rkey, rx_pd(), va, len, flush_access(f.placement), &host, qpn_);
    if (c != MrCheck::kOk) return fail_request(rq, nak_for(c));
  }
  // Every earlier request of this QP was executed before this one (in PSN order), its stores
  // made by this thread or, placed directly, by the sender before it sent them. Once this fence
  // is passed they are visible to every thread and process that maps the memory: global
  // visibility. The response leaves after it.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  RespResource& r = claim_resource();
  r.kind = RespResource::Kind::kPlacement;
  r.first_psn = r.last_psn = rq.psn;
  msn_ = (msn_ + 1) & 0xFFFFFF;
  respond_empty_read(rq.psn);
  return RxVerdict::kDone;
}

void Qp::duplicate_placement(const InboundRequest& rq) {
  // Answered again from its resource, not run again (a later write may have followed it); a
  // duplicate whose resource was reused is dropped, as a READ's would be.
  for (const RespResource& r : resources_) {
    if (r.kind == RespResource::Kind::kPlacement && r.first_psn == rq.psn) {
      respond_empty_read(rq.psn);
      return;
    }
  }
}

}  // namespace softrdma::rxe
