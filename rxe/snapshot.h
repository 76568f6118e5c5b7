// A point-in-time copy of a device's objects for monitoring (softrdma res, docs/monitoring.md):
// plain values, no pointers into the device. Device::snapshot() takes each object's own lock
// briefly, one object at a time; nothing here is on the packet path.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/types.h"
#include "rxe/qp.h"
#include "rxe/uses_core.h"

namespace softrdma::rxe {

struct QpInfo {
  std::uint32_t qpn = 0, dest_qpn = 0, pdn = 0, send_cqn = 0, recv_cqn = 0, srqn = 0;
  QpType type = QpType::kRc;
  QpState state = QpState::kReset;
  std::uint32_t sq_psn = 0;          // next PSN to send
  std::uint32_t rq_psn = 0;          // next PSN expected
  std::string peer;                  // RC/UC: the connected peer's address, else empty
  std::size_t send_outstanding = 0;  // posted send WRs not yet completed
  std::size_t recv_outstanding = 0;  // posted receive WRs not yet consumed (own RQ)
  QpCounters counters;
  // DCQCN: the rate the requester is paced at, and its target (bits/s); 0 with --cc none.
  double cc_rate_bps = 0, cc_target_bps = 0;
};

struct CqInfo {
  std::uint32_t cqn = 0, cqe = 0;
  std::size_t queued = 0;   // completions waiting to be polled
  std::uint32_t users = 0;  // QPs that complete into it
  // Post-to-poll latency of its send completions, once the device samples it.
  std::uint64_t latency_samples = 0, latency_p50_ns = 0, latency_p99_ns = 0;
};

struct MrInfo {
  std::uint32_t lkey = 0, rkey = 0, pdn = 0, access = 0;
  std::uint64_t length = 0, iova = 0;
};

struct PdInfo {
  std::uint32_t pdn = 0, users = 0;  // QPs, MRs and SRQs of the PD
};

struct SrqInfo {
  std::uint32_t srqn = 0, pdn = 0, max_wr = 0, limit = 0;
  std::size_t posted = 0;
  std::vector<std::uint32_t> qpns;  // QPs that take from it
};

struct DeviceSnapshot {
  std::vector<QpInfo> qps;  // by QPN
  std::vector<CqInfo> cqs;
  std::vector<MrInfo> mrs;
  std::vector<PdInfo> pds;
  std::vector<SrqInfo> srqs;
};

}  // namespace softrdma::rxe
