// softrdma lint [--json] [--strict] [--roce-port PORT]... FILE
// Exit status: 0 no error (warnings are printed but pass), 1 errors (with --strict, warnings
// too), 2 unreadable capture or bad usage.
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>

#include "lint/lint.h"
#include "tools/softrdma/cli_args.h"
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
  LintArgs args;
  std::string error;
  if (!parse_lint_args(argc, argv, args, error)) return lint_usage(error.c_str());
  if (args.help) {
    std::printf(
        "usage: %s\n"
        "Exit status: 0 no error (warnings pass), 1 errors, or warnings with --strict,\n"
        "2 unreadable capture. Rules and severities: docs/lint-rules.md\n",
        kLintUsage);
    return 0;
  }
  const lint::Options& opts = args.opts;
  const bool json = args.json;
  const char* file = args.file.c_str();
  lint::Report report;
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
