#include "tools/softrdma/self_prefix.h"

#include <unistd.h>

#include <climits>

namespace softrdma::tools {

std::optional<std::string> self_prefix() {
  char self[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return std::nullopt;
  self[n] = '\0';
  std::string dir(self);
  dir = dir.substr(0, dir.rfind('/'));  // .../bin
  return dir.substr(0, dir.rfind('/'));
}

}  // namespace softrdma::tools
