// The iWARP part of `softrdma sample-trace`: a TCP connection carrying an MPA
// request and reply and a few FPDUs, as frames handed to `emit`.
#pragma once

#include <functional>

#include "wire/bytes.h"

namespace softrdma::tools {

// Returns the number of frames emitted.
int write_sample_iwarp(const std::function<void(wire::Bytes)>& emit);

}  // namespace softrdma::tools
