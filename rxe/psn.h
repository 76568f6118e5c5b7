// 24-bit packet sequence number arithmetic.
#pragma once

#include <cstdint>

namespace softrdma::rxe {

inline constexpr std::uint32_t kPsnMask = 0xFFFFFF;
inline std::uint32_t psn_add(std::uint32_t psn, std::uint32_t n) { return (psn + n) & kPsnMask; }
// <0 when a is before b, 0 equal, >0 after (within half the PSN space).
inline int psn_cmp(std::uint32_t a, std::uint32_t b) {
  return static_cast<std::int32_t>((a - b) << 8) >> 8;
}

}  // namespace softrdma::rxe
