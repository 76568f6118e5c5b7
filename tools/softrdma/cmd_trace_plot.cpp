// softrdma trace plot CAPTURE -o FILE.png [--flow N]: runs trace_plot.py (matplotlib) with the
// system's python3. The script is found by SOFTRDMA_PLOT_SCRIPT, else installed beside the
// prefix (share/softrdma/), else in the source tree this binary was built from.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "tools/softrdma/commands.h"
#include "tools/softrdma/self_prefix.h"

namespace softrdma::tools {

namespace {

std::string plot_script() {
  if (const char* s = std::getenv("SOFTRDMA_PLOT_SCRIPT")) return s;
  if (const std::optional<std::string> prefix = self_prefix()) {
    const std::string installed =
        *prefix + "/" + SOFTRDMA_INSTALL_DATADIR + "/softrdma/trace_plot.py";
    if (access(installed.c_str(), R_OK) == 0) return installed;
  }
  return SOFTRDMA_PLOT_SCRIPT_SRC;
}

}  // namespace

int cmd_trace_plot(int argc, char** argv) {
  const std::string script = plot_script();
  const char* python = access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
  std::vector<char*> args{const_cast<char*>(python), const_cast<char*>(script.c_str())};
  for (int i = 0; i < argc; ++i) args.push_back(argv[i]);
  args.push_back(nullptr);
  execvp(python, args.data());
  std::fprintf(stderr, "softrdma trace plot: %s: %s\n", python, std::strerror(errno));
  return 2;
}

}  // namespace softrdma::tools
