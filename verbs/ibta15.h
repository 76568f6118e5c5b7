// The verbs of IBTA 1.5's memory placement extensions (FLUSH, ATOMIC WRITE) that rdma-core 44's
// <infiniband/verbs.h> lacks, with the values and layout rdma-core 45 gave them, so that the
// drop-in library (and tests built on 44's headers) can offer them to programs built on newer
// headers: access flags, device capability bits (ibv_device_attr_ex.device_cap_flags_ex), the
// work request and completion opcodes, the QP send-op flag and ibv_qp_ex's wr_flush.
#pragma once

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>

namespace softrdma::verbs {

inline constexpr unsigned kIbvAccessFlushGlobal = 1u << 8;          // IBV_ACCESS_FLUSH_GLOBAL
inline constexpr unsigned kIbvAccessFlushPersistent = 1u << 9;      // IBV_ACCESS_FLUSH_PERSISTENT
inline constexpr std::uint64_t kIbvDeviceFlushGlobal = 1ull << 38;  // IB_UVERBS_DEVICE_...
inline constexpr std::uint64_t kIbvDeviceFlushPersistent = 1ull << 39;       // FLUSH_PERSISTENT
inline constexpr std::uint64_t kIbvDeviceAtomicWrite = 1ull << 40;           // ATOMIC_WRITE
inline constexpr int kIbvWrFlush = 14;                                       // IBV_WR_FLUSH
inline constexpr int kIbvWcFlush = 8;                                        // IBV_WC_FLUSH
inline constexpr std::uint64_t kIbvQpExWithFlush = 1u << 11;                 // IBV_QP_EX_WITH_FLUSH
inline constexpr std::uint8_t kIbvFlushGlobal = 1, kIbvFlushPersistent = 2;  // placement type
inline constexpr std::uint8_t kIbvFlushRange = 0, kIbvFlushMr = 1;           // selectivity level

// ibv_qp_ex's member after wr_atomic_write in rdma-core 45 and later.
using WrFlushFn = void (*)(ibv_qp_ex* qp, std::uint32_t rkey, std::uint64_t remote_addr,
                           std::size_t len, std::uint8_t type, std::uint8_t level);

// ibv_wr_flush as rdma-core 45's inline one calls it: through the pointer that follows
// wr_atomic_write (the drop-in library puts one there; see verbs/objects.h).
inline void wr_flush(ibv_qp_ex* qp, std::uint32_t rkey, std::uint64_t remote_addr, std::size_t len,
                     std::uint8_t type, std::uint8_t level) {
  const auto* fn =
      reinterpret_cast<const WrFlushFn*>(reinterpret_cast<const char*>(qp) + sizeof(ibv_qp_ex));
  (*fn)(qp, rkey, remote_addr, len, type, level);
}

}  // namespace softrdma::verbs
