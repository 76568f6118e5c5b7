// softrdma's PFC pause frame (IEEE 802.1Qbb carried in RoCEv2, docs/congestion.md): a BTH with
// the manufacturer-specific opcode 0xC0, the 802.1Qbb MAC-control body (opcode 0x0101, a
// reserved byte, the class-enable vector, eight pause times in quanta), then the ICRC.
#pragma once

#include <cstdint>

#include "wire/bytes.h"

namespace softrdma::wire {

inline constexpr std::uint8_t kPauseOpcode = 0xC0;  // IBTA: 0xC0-0xFF are manufacturer-specific
inline constexpr std::uint16_t kPfcOpcode = 0x0101;
inline constexpr std::size_t kPauseBody = 12;  // the MAC-control body follows the BTH
// BTH, opcode, class-enable vector, 8 quanta, ICRC.
inline constexpr std::uint32_t kPauseFrameLen = 12 + 2 + 2 + 16 + 4;

// Whether the RoCEv2 datagram `d` is a well-formed pause frame.
inline bool is_pfc_pause(Bytes d) {
  return d.size() == kPauseFrameLen && d[0] == kPauseOpcode &&
         load16(d.data() + kPauseBody) == kPfcOpcode && d[kPauseBody + 2] == 0;
}

}  // namespace softrdma::wire
