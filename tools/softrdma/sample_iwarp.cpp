#include "tools/softrdma/sample_iwarp.h"

namespace softrdma::tools {

int write_sample_iwarp(const std::function<void(wire::Bytes)>&) { return 0; }

}  // namespace softrdma::tools
