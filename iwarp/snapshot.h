// A point-in-time copy of softiwarp0's objects for monitoring (softrdma res, docs/monitoring.md):
// plain values, no pointers into the device. An iWARP QP has no PSNs, P_Key or remote QPN (TCP
// numbers and retransmits the bytes); it has a TCP connection, the MPA options negotiated on it,
// and FPDU/byte counters. Device::snapshot() takes the progress lock and each QP's lock briefly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/object_info.h"
#include "core/types.h"
#include "iwarp/qp.h"

namespace softrdma::iwarp {

struct QpInfo {
  std::uint32_t qpn = 0, pdn = 0, send_cqn = 0, recv_cqn = 0, srqn = 0;
  core::QpState state = core::QpState::kReset;
  std::string local, peer;           // "address:port" of the TCP connection; empty without one
  std::size_t send_outstanding = 0;  // posted send WRs not yet completed
  std::size_t recv_outstanding = 0;  // posted receive WRs not yet consumed (own RQ)
  std::uint8_t mpa_revision = 0;     // once negotiated (0: not connected yet)
  bool mpa_crc = false, mpa_markers = false;
  std::uint16_t ird = 0, ord = 0;  // negotiated
  QpCounters counters;
};

struct DeviceSnapshot {
  std::vector<QpInfo> qps;  // by QPN
  std::vector<core::CqInfo> cqs;
  std::vector<core::MrInfo> mrs;
  std::vector<core::PdInfo> pds;
  std::vector<core::SrqInfo> srqs;
};

}  // namespace softrdma::iwarp
