// Copies between a message and the memory its scatter/gather list names, through
// the MR table's checks (lkey, PD, access, bounds); an on-demand paging region's memory
// fault-safely (core/safe_copy.h), its unmapped pages a kLocProtErr.
#pragma once

#include <cstdint>
#include <span>

#include "core/mr.h"
#include "core/types.h"

namespace softrdma::core {

// Reads `n` bytes at message offset `off` into `out` (local read: no access flag
// needed). False with *err = kLocProtErr on a bad lkey/range, kLocLenErr when the
// list is too short.
bool gather(const MrTable& mrs, const Pd* pd, std::span<const Sge> sge, std::uint64_t off,
            std::uint8_t* out, std::uint32_t n, WcStatus& err);
// Writes `n` bytes to message offset `off` (needs LOCAL_WRITE).
bool scatter(const MrTable& mrs, const Pd* pd, std::span<const Sge> sge, std::uint64_t off,
             const std::uint8_t* in, std::uint32_t n, WcStatus& err);

}  // namespace softrdma::core
