// Point-in-time copies of a device's transport-independent objects (CQs, MRs, PDs, SRQs) for
// monitoring (softrdma res, docs/monitoring.md): plain values, no pointers into the device.
// Objects::object_infos fills them; each transport adds its own QPs' copies.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace softrdma::core {

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

// What a QP uses, as the users of CQs, PDs and SRQs are counted.
struct QpLinks {
  std::uint32_t qpn = 0, pdn = 0, send_cqn = 0, recv_cqn = 0, srqn = 0;
};

struct ObjectInfos {
  std::vector<CqInfo> cqs;
  std::vector<MrInfo> mrs;  // by lkey
  std::vector<PdInfo> pds;
  std::vector<SrqInfo> srqs;
};

}  // namespace softrdma::core
