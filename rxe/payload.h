// Copies between a message and the memory its scatter/gather list names, through
// the MR table's checks (lkey, PD, access, bounds).
#pragma once

#include <cstdint>
#include <span>

#include "rxe/mr.h"
#include "rxe/types.h"

namespace softrdma::rxe {

// Reads `n` bytes at message offset `off` into `out` (local read: no access flag
// needed). False with *err = kLocProtErr on a bad lkey/range, kLocLenErr when the
// list is too short.
bool gather(const MrTable& mrs, const Pd* pd, std::span<const Sge> sge, std::uint64_t off,
            std::uint8_t* out, std::uint32_t n, WcStatus& err);
// Writes `n` bytes to message offset `off` (needs LOCAL_WRITE).
bool scatter(const MrTable& mrs, const Pd* pd, std::span<const Sge> sge, std::uint64_t off,
             const std::uint8_t* in, std::uint32_t n, WcStatus& err);

inline std::uint8_t syndrome_ack() { return 0x1F; }

}  // namespace softrdma::rxe
