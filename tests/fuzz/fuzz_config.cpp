// Fuzz target: the settings a program is started with (verbs::load_config): a SOFTRDMA_CONFIG
// file and one SOFTRDMA_* variable, which between them reach every option parser (netdev, faults,
// MPA, pcap filter, numbers, names). The first input byte picks the variable, the bytes up to the
// first NUL are its value, the rest is the file. A refusal must say why; an accepted setting must
// be accepted again on its own (what was stored is what was checked).
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "netdev/faults.h"
#include "netdev/trace.h"
#include "tests/fuzz/reader.h"
#include "verbs/engine.h"

namespace {
using namespace softrdma;

constexpr const char* kVars[] = {
    "SOFTRDMA_DEVICE", "SOFTRDMA_NETDEV",      "SOFTRDMA_FAULTS",    "SOFTRDMA_MTU",
    "SOFTRDMA_PCAP",   "SOFTRDMA_PCAP_FILTER", "SOFTRDMA_TRANSPORT", "SOFTRDMA_MPA",
    "SOFTRDMA_VLAN",   "SOFTRDMA_DPDK_QPS",    "SOFTRDMA_LOCAL",     "SOFTRDMA_STATS",
    "SOFTRDMA_VIEW",   "SOFTRDMA_PKEYS",       "SOFTRDMA_CC",        "SOFTRDMA_SWITCH"};

[[noreturn]] void fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "fuzz_config: %s: %s\n", what, detail.c_str());
  std::abort();
}

// The file the input is written to, removed at exit.
struct TempFile {
  std::string path = "/tmp/fuzz_config." + std::to_string(getpid());
  ~TempFile() { unlink(path.c_str()); }
};
const std::string& file_name() {
  static const TempFile f;
  return f.path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz::Reader r{data, size};
  const std::uint8_t pick = r.u8();
  std::string rest = r.bytes(r.n);
  const auto nul = rest.find('\0');
  const std::string value = rest.substr(0, nul);
  const std::string file = nul == std::string::npos ? "" : rest.substr(nul + 1);
  for (const char* v : kVars) unsetenv(v);
  if (pick < std::size(kVars)) setenv(kVars[pick], value.c_str(), 1);
  {
    std::ofstream out(file_name(), std::ios::binary | std::ios::trunc);
    out << file;
  }
  setenv("SOFTRDMA_CONFIG", file_name().c_str(), 1);
  verbs::Config cfg;
  std::string error;
  if (!verbs::load_config(cfg, error)) {
    if (error.empty()) fail("a refusal without a message", value);
    return 0;
  }
  // What was stored parses again.
  std::string again;
  netdev::FaultConfig f;
  if (!cfg.faults.empty() && !netdev::parse_faults(cfg.faults, f, again)) {
    fail("stored faults no longer parse", cfg.faults);
  }
  netdev::TraceConfig t;
  if (!cfg.pcap_filter.empty() && !netdev::parse_trace_spec(cfg.pcap_filter, t, again)) {
    fail("stored pcap filter no longer parses", cfg.pcap_filter);
  }
  if (cfg.transport != "roce" && cfg.transport != "iwarp") fail("transport", cfg.transport);
  if (cfg.device_name.empty() || cfg.device_name.size() >= 64) fail("device", cfg.device_name);
  return 0;
}
