// The IBTA QP state machine as a table: for each (type, from, to) transition,
// whether it is allowed and which attribute-mask bits are required and optional.
#pragma once

#include <cstdint>

#include "core/types.h"
#include "rxe/uses_core.h"

namespace softrdma::rxe {

struct TransitionRule {
  bool valid = false;
  std::uint32_t required = 0;
  std::uint32_t optional = 0;
};

const TransitionRule& transition_rule(QpType type, QpState from, QpState to);

// True when `mask` (which includes kQpState) fits the rule for from → to.
bool transition_ok(QpType type, QpState from, QpState to, std::uint32_t mask);

}  // namespace softrdma::rxe
