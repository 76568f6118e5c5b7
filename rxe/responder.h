// The responder's receive pipeline for RC and UC requests (rxe/responder.cpp): the packet
// as the checks see it, and what each check decides. Internal to rxe/.
#pragma once

#include <cstdint>

#include "core/mr.h"
#include "netdev/netdev.h"
#include "rxe/uses_core.h"
#include "wire/roce_headers.h"

namespace softrdma::rxe {

// One request packet while it runs through the checks, with what they all read.
struct InboundRequest {
  const wire::RocePacket& pkt;
  const netdev::Packet& raw;
  const wire::RoceOpcodeInfo& info;
  std::uint32_t psn;
  std::uint32_t n;  // payload bytes
  bool rc;          // RC (else UC)
  bool starts;      // FIRST or ONLY
  bool ends;        // LAST or ONLY
};

// What a step of the pipeline decided. The expected PSN moves on the verdict alone
// (Qp::finish_request), in one place.
enum class RxVerdict : std::uint8_t {
  kPass,    // on to the next check
  kIgnore,  // not taken: RC keeps its expected PSN, UC resynchronises on this one
  kSkip,    // UC: dropped, its PSN consumed (the rest of a damaged message)
  kDone,    // executed: its PSN(s) consumed, acknowledged when it asks
  kPassed,  // XRC: passed to the device holding its SRQ; its answer decides (rxe/xrc_relay.h)
};

// The NAK for a request whose region check failed: a remote access error, whatever the cause.
inline std::uint8_t nak_for(MrCheck) {
  return wire::syndrome::kNakRemoteAccess;
}

}  // namespace softrdma::rxe
