#include "tools/softrdma/cli_args.h"

#include <charconv>
#include <cstring>

namespace softrdma::tools {

const std::vector<std::pair<std::string, std::string>>& run_options() {
  static const std::vector<std::pair<std::string, std::string>> opts = {
      {"--netdev", "SOFTRDMA_NETDEV"},
      {"--faults", "SOFTRDMA_FAULTS"},
      {"--mtu", "SOFTRDMA_MTU"},
      {"--pcap", "SOFTRDMA_PCAP"},
      {"--pcap-filter", "SOFTRDMA_PCAP_FILTER"},
      {"--device", "SOFTRDMA_DEVICE"},
      {"--transport", "SOFTRDMA_TRANSPORT"},
      {"--mpa", "SOFTRDMA_MPA"},
      {"--tcp", "SOFTRDMA_TCP"},
      {"--vlan", "SOFTRDMA_VLAN"},
      {"--dpdk-qps", "SOFTRDMA_DPDK_QPS"},
      {"--pkeys", "SOFTRDMA_PKEYS"},
      {"--local", "SOFTRDMA_LOCAL"},
      {"--view", "SOFTRDMA_VIEW"},
      {"--cc", "SOFTRDMA_CC"},
      {"--switch", "SOFTRDMA_SWITCH"},
      {"--stats", "SOFTRDMA_STATS"}};
  return opts;
}

bool parse_run_args(int argc, char** argv, RunArgs& out, std::string& error) {
  out = {};
  int i = 0;
  for (; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--") {
      ++i;
      break;
    }
    if (a == "--stats") {  // a flag: no value
      out.env.emplace_back("SOFTRDMA_STATS", "1");
      continue;
    }
    bool known = false;
    for (const auto& [flag, var] : run_options()) {
      if (flag == "--stats") continue;
      std::string value;
      if (a == flag) {
        if (i + 1 >= argc) {
          error = flag + " needs a value";
          return false;
        }
        value = argv[++i];
      } else if (a.rfind(flag + "=", 0) == 0) {
        value = a.substr(flag.size() + 1);
      } else {
        continue;
      }
      out.env.emplace_back(var, value);
      known = true;
      break;
    }
    if (!known) {
      if (a[0] == '-') {
        error = "unknown option '" + a + "'";
        return false;
      }
      break;  // the program, without "--"
    }
  }
  if (i >= argc) {
    error = "no PROGRAM given";
    return false;
  }
  out.program = i;
  return true;
}

bool parse_lint_args(int argc, char** argv, LintArgs& out, std::string& error) {
  out = {};
  bool have_file = false;
  for (int i = 0; i < argc; ++i) {
    const char* a = argv[i];
    if (!std::strcmp(a, "--json")) {
      out.json = true;
    } else if (!std::strcmp(a, "--strict")) {
      out.opts.strict = true;
    } else if (!std::strcmp(a, "--roce-port") || !std::strncmp(a, "--roce-port=", 12)) {
      const char* v = a[11] == '=' ? a + 12 : (i + 1 < argc ? argv[++i] : nullptr);
      if (!v) {
        error = "--roce-port needs a port number";
        return false;
      }
      unsigned port = 0;
      const char* end = v + std::strlen(v);
      auto [p, ec] = std::from_chars(v, end, port);
      if (ec != std::errc() || p != end || port == 0 || port > 65535) {
        error = std::string("bad port '") + v + "'";
        return false;
      }
      out.opts.roce_ports.push_back(static_cast<std::uint16_t>(port));
    } else if (!std::strcmp(a, "-h") || !std::strcmp(a, "--help")) {
      out.help = true;
      return true;
    } else if (a[0] == '-' && a[1] != '\0') {
      error = std::string("unknown option '") + a + "'";
      return false;
    } else if (have_file) {
      error = "only one FILE";
      return false;
    } else {
      out.file = a;
      have_file = true;
    }
  }
  if (!have_file) {
    error = "no FILE given";
    return false;
  }
  return true;
}

bool parse_merge_args(int argc, char** argv, MergeArgs& out, std::string& error) {
  out = {};
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-o" || a == "--output") {
      if (i + 1 >= argc) {
        error = "-o needs a file name";
        return false;
      }
      if (!out.output.empty()) {
        error = "-o given twice";
        return false;
      }
      out.output = argv[++i];
    } else if (a.size() > 1 && a[0] == '-') {
      error = "unknown option '" + a + "'";
      return false;
    } else {
      out.inputs.push_back(a);
    }
  }
  if (out.output.empty()) {
    error = "no output given (-o OUT)";
    return false;
  }
  if (out.inputs.empty()) {
    error = "no input given";
    return false;
  }
  for (const std::string& in : out.inputs) {
    if (in == out.output) {
      error = "output " + out.output + " is also an input";
      return false;
    }
  }
  return true;
}

}  // namespace softrdma::tools
