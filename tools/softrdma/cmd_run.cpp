// softrdma run [--netdev SPEC] [--faults SPEC] [--mtu N] [--pcap FILE] [--pcap-filter SPEC]
//              [--device NAME]
//              -- PROGRAM ARGS...
// Runs an unmodified verbs program over softrdma: the drop-in libraries come
// first on LD_LIBRARY_PATH and the options become SOFTRDMA_* variables. --device names the
// RoCE device, or softiwarp0 (the iWARP device), which selects --transport iwarp; a name that
// clashes with --transport is an error, exit 2 (verbs::resolve_device).
// softrdma devices: softrdma's version, then the devices as ibv_devices lists them, with their
// backends.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "tools/softrdma/cli_args.h"
#include "tools/softrdma/commands.h"
#include "tools/softrdma/private_view.h"
#include "tools/softrdma/self_prefix.h"
#include "tools/softrdma/usage.h"
#include "verbs/engine.h"

namespace softrdma::tools {

namespace {

// The directory holding softrdma's libibverbs.so.1 and librdmacm.so.1: installed, the private
// directory under the prefix (never on the system's library path); in the build tree, lib/
// beside bin/.
std::string library_dir() {
  if (const char* d = std::getenv("SOFTRDMA_LIBDIR")) return d;
  const std::optional<std::string> prefix = self_prefix();
  if (!prefix) return "";
  const std::string installed = *prefix + "/" + SOFTRDMA_INSTALL_LIBDIR;
  if (access((installed + "/libibverbs.so.1").c_str(), R_OK) == 0) return installed;
  return *prefix + "/lib";
}

}  // namespace

int cmd_run(int argc, char** argv) {
  RunArgs args;
  std::string error;
  if (!parse_run_args(argc, argv, args, error)) return usage_error("run", error);
  for (const auto& [var, value] : args.env) setenv(var.c_str(), value.c_str(), 1);
  const int i = args.program;
  // Check the configuration now: a bad option is a clear error, not a silent
  // fallback inside the program.
  verbs::Config cfg;
  if (!verbs::load_config(cfg, error)) {
    std::fprintf(stderr, "softrdma run: %s\n", error.c_str());
    return 2;
  }
  // The devices under /dev/infiniband and /sys/class/infiniband, for the programs that look
  // there (UCX), in a mount namespace of the program's own.
  if (cfg.view != verbs::Config::View::kOff) {
    if (!enter_private_view(verbs::kernel_view(cfg), error)) {
      if (cfg.view == verbs::Config::View::kOn) {
        std::fprintf(stderr, "softrdma run: --view on: %s\n", error.c_str());
        return 2;
      }
      std::fprintf(stderr,
                   "softrdma run: no private /dev/infiniband and /sys/class/infiniband (%s): "
                   "programs that look there, such as UCX, will not see the devices "
                   "(docs/middleware.md)\n",
                   error.c_str());
    }
  }
  const std::string lib = library_dir();
  std::string path = lib;
  if (const char* old = std::getenv("LD_LIBRARY_PATH"); old && *old) path += ":" + std::string(old);
  setenv("LD_LIBRARY_PATH", path.c_str(), 1);
#ifdef SOFTRDMA_PRELOAD
  // A sanitizer build: the drop-in library needs the ASan runtime loaded first. Leaks are
  // not reported: the programs' own (and the process-lifetime engine) would drown the rest.
  std::string preload = SOFTRDMA_PRELOAD;
  if (const char* old = std::getenv("LD_PRELOAD"); old && *old) preload += ":" + std::string(old);
  setenv("LD_PRELOAD", preload.c_str(), 1);
  setenv("ASAN_OPTIONS", "detect_leaks=0", 0);
#endif
  execvp(argv[i], argv + i);
  std::fprintf(stderr, "softrdma run: %s: %s\n", argv[i], std::strerror(errno));
  return 127;
}

int cmd_devices(int argc, char**) {
  if (argc != 0) {
    std::fprintf(stderr, "usage: softrdma devices\n");
    return 2;
  }
  verbs::Engine* e = verbs::Engine::get();
  if (!e) return 1;  // the reason was printed
  rxe::Device& d = e->device();
  std::printf("softrdma %.*s\n", static_cast<int>(version().size()), version().data());
  std::printf("    %-16s\t   %-16s\t%-10s\t%s\n", "device", "node GUID", "backend", "address");
  std::printf("    %-16s\t   %-16s\t%-10s\t%s\n", "------", "----------------", "-------",
              "-------");
  std::printf("    %-16s\t%016llx\t%-10s\t%s (LID %u)\n", d.name().c_str(),
              static_cast<unsigned long long>(d.node_guid()), d.netdev().backend().c_str(),
              e->address().str().c_str(), e->lid());
  // softiwarp0: iWARP over the kernel's TCP sockets; its node GUID is its MAC (docs/iwarp.md).
  const core::Gid g = e->iwarp_device().gid();
  std::uint64_t guid = 0;
  for (std::size_t k = 0; k < 8; ++k) guid = guid << 8 | g[k];
  std::printf("    %-16s\t%016llx\t%-10s\t%s\n", e->iwarp_device().name().c_str(),
              static_cast<unsigned long long>(guid), "tcp", e->address().str().c_str());
  return 0;
}

}  // namespace softrdma::tools
