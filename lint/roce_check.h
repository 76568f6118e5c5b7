// Per-packet RoCEv2 checks for lint: header layout for the opcode, lengths, pad,
// reserved bits, CNP reserved bytes, atomic alignment and the ICRC.
#pragma once

#include <cstdint>

#include "lint/report.h"
#include "wire/frame.h"

namespace softrdma::lint {

// `frame` carries a UDP datagram to a RoCEv2 port; frame_no is 1-based.
void check_roce(std::uint64_t frame_no, const wire::FrameView& frame, Report& report);

}  // namespace softrdma::lint
