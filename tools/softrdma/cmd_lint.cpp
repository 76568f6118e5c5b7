// softrdma lint [--json] [--strict] [--roce-port PORT]... FILE
// Exit status: 0 no error (warnings are printed but pass), 1 errors (with --strict, warnings
// too), 2 unreadable capture or bad usage.
#include <charconv>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>

#include "lint/lint.h"
#include "tools/softrdma/commands.h"

namespace softrdma::tools {

namespace {
constexpr const char* kLintUsage = "softrdma lint [--json] [--strict] [--roce-port PORT]... FILE";

int lint_usage(const char* why) {
  std::fprintf(stderr, "softrdma lint: %s\nusage: %s\n", why, kLintUsage);
  return 2;
}
}  // namespace

int cmd_lint(int argc, char** argv) {
  lint::Options opts;
  bool json = false;
  const char* file = nullptr;
  for (int i = 0; i < argc; ++i) {
    const char* a = argv[i];
    if (!std::strcmp(a, "--json")) {
      json = true;
    } else if (!std::strcmp(a, "--strict")) {
      opts.strict = true;
    } else if (!std::strcmp(a, "--roce-port") || !std::strncmp(a, "--roce-port=", 12)) {
      const char* v = a[11] == '=' ? a + 12 : (i + 1 < argc ? argv[++i] : nullptr);
      if (!v) return lint_usage("--roce-port needs a port number");
      unsigned port = 0;
      const char* end = v + std::strlen(v);
      auto [p, ec] = std::from_chars(v, end, port);
      if (ec != std::errc() || p != end || port == 0 || port > 65535) {
        return lint_usage((std::string("bad port '") + v + "'").c_str());
      }
      opts.roce_ports.push_back(static_cast<std::uint16_t>(port));
    } else if (!std::strcmp(a, "-h") || !std::strcmp(a, "--help")) {
      std::printf(
          "usage: %s\n"
          "Exit status: 0 no error (warnings pass), 1 errors, or warnings with --strict,\n"
          "2 unreadable capture. Rules and severities: docs/lint-rules.md\n",
          kLintUsage);
      return 0;
    } else if (a[0] == '-' && a[1] != '\0') {
      return lint_usage((std::string("unknown option '") + a + "'").c_str());
    } else if (file) {
      return lint_usage("only one FILE");
    } else {
      file = a;
    }
  }
  if (!file) return lint_usage("no FILE given");
  lint::Report report;
  std::string error;
  int rc = lint::run(file, opts, report, error);
  if (rc == 2 && report.counters().packets == 0) {
    std::fprintf(stderr, "softrdma lint: %s: %s\n", file, error.c_str());
    if (json) lint::print_json_error(std::cout, file, error);
    return 2;
  }
  if (json) {
    report.print_json(std::cout, file);
  } else {
    report.print_text(std::cout, file);
  }
  if (rc == 2) std::fprintf(stderr, "softrdma lint: %s: %s\n", file, error.c_str());
  return rc;
}

}  // namespace softrdma::tools
