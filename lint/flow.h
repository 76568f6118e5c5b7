// Human-readable flow names for lint reports ("10.0.0.1:50000 > 10.0.0.2:4791").
#pragma once

#include <string>

#include "wire/frame.h"

namespace softrdma::lint {

std::string ip_string(const wire::FrameView& f, bool source);
std::string flow_string(const wire::FrameView& f);

}  // namespace softrdma::lint
