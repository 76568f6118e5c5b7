// A message's segmentation by the path MTU: how many packets it takes, and each packet's
// place in it (FIRST, MIDDLE, LAST or ONLY), as the opcode table names it.
#pragma once

#include <cstdint>

#include "wire/roce_opcode.h"

namespace softrdma::rxe {

inline std::uint32_t packets_for(std::uint64_t len, std::uint32_t mtu) {
  return len == 0 ? 1 : static_cast<std::uint32_t>((len + mtu - 1) / mtu);
}

inline wire::Seg segment_of(bool first, bool last) {
  if (first) return last ? wire::Seg::kOnly : wire::Seg::kFirst;
  return last ? wire::Seg::kLast : wire::Seg::kMiddle;
}

}  // namespace softrdma::rxe
