// rxe/ is built on core/: inside namespace rxe the core's names (Sge, Wc, Mr, Cq, Srq…) need no
// qualification, and rxe::Sge still names core::Sge for code written before the core existed.
#pragma once

#include "core/types.h"

namespace softrdma::rxe {
using namespace softrdma::core;
}  // namespace softrdma::rxe
