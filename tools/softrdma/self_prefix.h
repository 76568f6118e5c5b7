// Where this softrdma binary runs from: the prefix above its bin/ directory (PREFIX of
// PREFIX/bin/softrdma; in the build tree, build/), or nothing when /proc/self/exe cannot be read.
#pragma once

#include <optional>
#include <string>

namespace softrdma::tools {

std::optional<std::string> self_prefix();

}  // namespace softrdma::tools
