// The requester's opcode choice, from tables: a work request's operation and suffix
// (immediate, invalidate), and the opcode of each of its packets read from the IBTA
// opcode table by transport and place in the message (wire::segment_opcode).
#pragma once

#include <cstdint>
#include <optional>

#include "core/types.h"
#include "wire/roce_opcode.h"
#include "rxe/uses_core.h"

namespace softrdma::rxe {

// The opcode of the packet of `op` at place first/last in its message on a QP of `type`;
// none where the transport has no such packet.
std::optional<std::uint8_t> request_opcode(QpType type, WrOpcode op, bool first, bool last);

// The transport of the packets a QP of `type` sends and takes (XRC for both XRC kinds).
wire::Transport transport_of(QpType type);

// The operation a work request sends (kSend, kWrite, kReadRequest, kAtomic, kAtomicWrite,
// kFlush; kNone for the local ones).
wire::OpKind request_kind(WrOpcode op);

}  // namespace softrdma::rxe
