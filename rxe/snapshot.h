// A point-in-time copy of a device's objects for monitoring (softrdma res, docs/monitoring.md):
// plain values, no pointers into the device. Device::snapshot() takes each object's own lock
// briefly, one object at a time; nothing here is on the packet path.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/object_info.h"
#include "core/types.h"
#include "rxe/qp.h"
#include "rxe/uses_core.h"

namespace softrdma::rxe {

struct QpInfo {
  std::uint32_t qpn = 0, dest_qpn = 0, pdn = 0, send_cqn = 0, recv_cqn = 0, srqn = 0;
  QpType type = QpType::kRc;
  QpState state = QpState::kReset;
  std::uint32_t sq_psn = 0;      // next PSN to send
  std::uint32_t rq_psn = 0;      // next PSN expected
  std::uint16_t pkey_index = 0;  // its P_Key table entry, and that entry's P_Key
  std::uint16_t pkey = 0xFFFF;
  std::string peer;                  // RC/UC: the connected peer's address, else empty
  std::size_t send_outstanding = 0;  // posted send WRs not yet completed
  std::size_t recv_outstanding = 0;  // posted receive WRs not yet consumed (own RQ)
  QpCounters counters;
  // DCQCN: the rate the requester is paced at, and its target (bits/s); 0 with --cc none.
  double cc_rate_bps = 0, cc_target_bps = 0;
  // RC and XRC: the packets losses leave it to have out (LossWindow::limit; 0 for the others).
  std::uint32_t loss_window = 0;
};

struct DeviceSnapshot {
  std::vector<QpInfo> qps;  // by QPN
  std::vector<CqInfo> cqs;
  std::vector<MrInfo> mrs;
  std::vector<PdInfo> pds;
  std::vector<SrqInfo> srqs;
};

}  // namespace softrdma::rxe
