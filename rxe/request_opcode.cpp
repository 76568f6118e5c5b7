#include "rxe/request_opcode.h"

#include <array>

#include "rxe/segment.h"

namespace softrdma::rxe {

namespace {

using wire::OpKind;

// What a work request puts on the wire: the operation, the suffix header its LAST or ONLY
// packet carries (ImmDt, IETH), and for atomics (one shape, two opcodes) the opcode itself.
struct RequestShape {
  OpKind kind = OpKind::kNone;
  std::uint8_t suffix = 0;
  std::uint8_t atomic_opcode = 0;
};

constexpr std::size_t kWrOpcodes = static_cast<std::size_t>(WrOpcode::kAtomicWrite) + 1;

constexpr std::array<RequestShape, kWrOpcodes> make_shapes() {
  std::array<RequestShape, kWrOpcodes> t{};
  const auto at = [&t](WrOpcode op) -> RequestShape& { return t[static_cast<std::size_t>(op)]; };
  at(WrOpcode::kRdmaWrite) = {OpKind::kWrite, 0, 0};
  at(WrOpcode::kRdmaWriteWithImm) = {OpKind::kWrite, wire::kImmDt, 0};
  at(WrOpcode::kSend) = {OpKind::kSend, 0, 0};
  at(WrOpcode::kSendWithImm) = {OpKind::kSend, wire::kImmDt, 0};
  at(WrOpcode::kSendWithInv) = {OpKind::kSend, wire::kIeth, 0};
  at(WrOpcode::kRdmaRead) = {OpKind::kReadRequest, 0, 0};
  at(WrOpcode::kAtomicCmpAndSwp) = {OpKind::kAtomic, 0, wire::op::kRcCompareSwap};
  at(WrOpcode::kAtomicFetchAndAdd) = {OpKind::kAtomic, 0, wire::op::kRcFetchAdd};
  at(WrOpcode::kAtomicWrite) = {OpKind::kAtomicWrite, 0, 0};  // RC only: the table has no UC one
  at(WrOpcode::kFlush) = {OpKind::kFlush, 0, 0};
  return t;
}

constexpr auto kShapes = make_shapes();

const RequestShape& shape_of(WrOpcode op) {
  static constexpr RequestShape kNone{};
  const auto i = static_cast<std::size_t>(op);
  return i < kShapes.size() ? kShapes[i] : kNone;
}

}  // namespace

wire::Transport transport_of(QpType type) {
  switch (type) {
    case QpType::kRc:
      return wire::Transport::kRc;
    case QpType::kUc:
      return wire::Transport::kUc;
    case QpType::kXrcSend:
    case QpType::kXrcRecv:
      return wire::Transport::kXrc;
    default:
      return wire::Transport::kUd;
  }
}

std::optional<std::uint8_t> request_opcode(QpType type, WrOpcode op, bool first, bool last) {
  const RequestShape& s = shape_of(op);
  if (s.kind == OpKind::kAtomic) {
    if (type == QpType::kXrcSend) return wire::op::kXrcBase | s.atomic_opcode;  // A14: RC's + 0xA0
    if (type != QpType::kRc) return std::nullopt;
    return s.atomic_opcode;
  }
  if (s.kind == OpKind::kNone) return std::nullopt;
  return wire::segment_opcode(transport_of(type), s.kind, segment_of(first, last),
                              last ? s.suffix : 0);
}

wire::OpKind request_kind(WrOpcode op) {
  return shape_of(op).kind;
}

}  // namespace softrdma::rxe
