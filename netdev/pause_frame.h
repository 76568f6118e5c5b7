// PFC pause frames (IEEE 802.1Qbb) as softrdma carries them: a lossless switch port
// (netdev/switch_port.h, `pfc=XOFF:XON`) sends one to each sender feeding it when its queue
// passes XOFF, and one with zero quanta (resume) once it drains below XON. On every backend it
// travels as a RoCEv2 datagram on the RoCE port: a BTH with the manufacturer-specific opcode
// 0xC0, then the MAC-control body of an 802.1Qbb frame (opcode 0x0101, class-enable vector,
// eight pause times in quanta of 512 bit times), then the ICRC. See docs/congestion.md.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <optional>

#include "netdev/netdev.h"
#include "wire/pfc_pause.h"

namespace softrdma::netdev {

using wire::kPauseFrameLen;
using wire::kPauseOpcode;
using wire::kPfcOpcode;
inline constexpr std::uint16_t kMaxQuanta = 0xFFFF;

struct PauseFrame {
  std::uint8_t enabled = 0;  // bit i: priority i's quanta apply
  std::array<std::uint16_t, 8> quanta{};
};

// Writes the frame into p.data (cap at least kPauseFrameLen), ICRC left zero for the backend to
// fill, and sets p.len.
void build_pause(Packet& p, const PauseFrame& f);
// A datagram with the pause opcode (cheap: one byte).
inline bool is_pause(const Packet& p) {
  return p.len >= 1 && p.data[0] == kPauseOpcode;
}
// The frame, or none when it is not a well-formed one (short, another MAC-control opcode).
std::optional<PauseFrame> parse_pause(const Packet& p);
// How long `quanta` pause a link of `link_bps` (a quantum is 512 bit times at its rate).
std::chrono::nanoseconds pause_time(std::uint16_t quanta, double link_bps);
// A priority as PFC sees it: the DSCP's top three bits (the default DSCP-to-priority map).
inline std::uint8_t pfc_priority(std::uint8_t traffic_class) {
  return static_cast<std::uint8_t>(traffic_class >> 5);
}

}  // namespace softrdma::netdev
