// Fuzz target: softrdma's own command line (tools/softrdma/cli_args.h, watch_args.h): the
// options of run, stat, res, top, exporter, lint and trace merge, as argv. The first input byte
// picks the command, the rest is split at NUL bytes into the arguments. Each parser either
// refuses with a message (the command's exit 2) or gives options that, written out again as
// arguments, parse to the same options; run's variables then either load (verbs::load_config)
// or are refused with a message. No exception may escape, as none would in the command.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "tools/softrdma/cli_args.h"
#include "tools/softrdma/watch_args.h"
#include "verbs/engine.h"

namespace {
using namespace softrdma;
using namespace softrdma::tools;

[[noreturn]] void fail(const char* what, const std::string& detail = "") {
  std::fprintf(stderr, "fuzz_cli: %s %s\n", what, detail.c_str());
  std::abort();
}

// argv for the words (which must outlive it).
std::vector<char*> argv_of(std::vector<std::string>& words) {
  std::vector<char*> v;
  for (std::string& w : words) v.push_back(w.data());
  v.push_back(nullptr);
  return v;
}

// Parses `words` into `out` with `parse` (one of cli_args.h's or watch_args.h's parsers); a
// refusal must come with a message (else `silent` is the failure). Whether it took them.
template <class Args, class Parse>
bool takes(std::vector<std::string>& words, Parse parse, Args& out, const char* silent) {
  auto argv = argv_of(words);
  std::string error;
  if (parse(static_cast<int>(words.size()), argv.data(), out, error)) return true;
  if (error.empty()) fail(silent);
  return false;
}

// Parses `again`, options written out from what was parsed, into `out`: it must take them (else
// `refused` and the message are the failure).
template <class Args, class Parse>
void retakes(std::vector<std::string>& again, Parse parse, Args& out, const char* refused) {
  auto argv = argv_of(again);
  std::string error;
  if (!parse(static_cast<int>(again.size()), argv.data(), out, error)) fail(refused, error);
}

std::string flag_of(const std::string& var) {
  for (const auto& [flag, v] : run_options()) {
    if (v == var) return flag;
  }
  fail("run set a variable no option names:", var);
}

void check_run(std::vector<std::string> words) {
  const int argc = static_cast<int>(words.size());
  RunArgs a;
  if (!takes(words, parse_run_args, a, "run refused without a message")) return;
  if (a.program < 0 || a.program >= argc) fail("run's PROGRAM is outside argv");
  // Written out as "--opt VALUE ... -- PROGRAM ARGS" they parse the same.
  std::vector<std::string> again;
  for (const auto& [var, value] : a.env) {
    again.push_back(flag_of(var));
    if (var != "SOFTRDMA_STATS") again.push_back(value);
  }
  again.push_back("--");
  again.insert(again.end(), words.begin() + a.program, words.end());
  RunArgs b;
  retakes(again, parse_run_args, b, "run's options written out are refused:");
  if (b.env != a.env) fail("run's options written out parse differently");
  if (std::vector(again.begin() + b.program, again.end()) !=
      std::vector(words.begin() + a.program, words.end())) {
    fail("run's program and arguments written out parse differently");
  }
  // What cmd_run does next: the variables are checked as the program would read them.
  for (const auto& [flag, var] : run_options()) unsetenv(var.c_str());
  unsetenv("SOFTRDMA_CONFIG");
  for (const auto& [var, value] : a.env) setenv(var.c_str(), value.c_str(), 1);
  verbs::Config cfg;
  std::string error;
  if (!verbs::load_config(cfg, error) && error.empty()) fail("run's settings refused silently");
}

void check_watch(std::vector<std::string> words, const std::string& allowed) {
  const auto parse = [&](int argc, char** argv, WatchArgs& out, std::string& error) {
    return parse_watch_args(argc, argv, allowed, out, error);
  };
  WatchArgs a;
  if (!takes(words, parse, a, "a watch command refused without a message")) return;
  if (a.pid && *a.pid <= 0) fail("a PID not above 0 was taken");
  if (a.seconds && !(std::isfinite(*a.seconds) && *a.seconds > 0 && *a.seconds <= 3600)) {
    fail("SECONDS out of range was taken");
  }
  std::vector<std::string> again;
  if (a.json) again.push_back("--json");
  if (a.once) again.push_back("--once");
  if (a.pid) again.insert(again.end(), {"-p", std::to_string(*a.pid)});
  if (a.seconds) {
    char s[64];
    std::snprintf(s, sizeof s, "%.17g", *a.seconds);
    again.insert(again.end(), {allowed.find("-w") != std::string::npos ? "-w" : "-d", s});
  }
  if (allowed.find("--listen") != std::string::npos && !a.listen.empty()) {
    again.push_back("--listen=" + a.listen);
  }
  again.insert(again.end(), a.words.begin(), a.words.end());
  WatchArgs b;
  retakes(again, parse, b, "watch options written out are refused:");
  if (b.json != a.json || b.once != a.once || b.pid != a.pid || b.seconds != a.seconds ||
      b.listen != a.listen || b.words != a.words) {
    fail("watch options written out parse differently");
  }
}

void check_lint(std::vector<std::string> words) {
  LintArgs a;
  if (!takes(words, parse_lint_args, a, "lint refused without a message")) return;
  if (a.help) return;
  for (std::uint16_t p : a.opts.roce_ports) {
    if (p == 0) fail("lint took port 0");
  }
  std::vector<std::string> again;
  if (a.json) again.push_back("--json");
  if (a.opts.strict) again.push_back("--strict");
  // (4791 is always in the list: the ports given come after it.)
  const std::vector<std::uint16_t> given(a.opts.roce_ports.begin() + 1, a.opts.roce_ports.end());
  if (a.opts.roce_ports.empty() || a.opts.roce_ports[0] != 4791) fail("lint lost port 4791");
  for (std::uint16_t p : given) again.push_back("--roce-port=" + std::to_string(p));
  again.push_back(a.file);
  LintArgs b;
  retakes(again, parse_lint_args, b, "lint's options written out are refused:");
  if (b.json != a.json || b.opts.strict != a.opts.strict ||
      b.opts.roce_ports != a.opts.roce_ports || b.file != a.file || b.help) {
    fail("lint's options written out parse differently");
  }
}

void check_merge(std::vector<std::string> words) {
  MergeArgs a;
  if (!takes(words, parse_merge_args, a, "trace merge refused without a message")) return;
  if (a.output.empty() || a.inputs.empty()) fail("trace merge without an input or output");
  for (const std::string& in : a.inputs) {
    if (in == a.output) fail("trace merge would overwrite an input");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  std::vector<std::string> words;
  if (size > 1) {
    words.emplace_back();
    for (std::size_t i = 1; i < size && words.size() <= 64; ++i) {
      if (data[i] == 0) {
        words.emplace_back();
      } else {
        words.back().push_back(static_cast<char>(data[i]));
      }
    }
  }
  // The options of stat, res, top and exporter (tools/softrdma/main.cpp's kWatchers).
  constexpr const char* kWatchOptions[] = {"--json -p -w", "--json -p", "--once -d -p", "--listen"};
  const int pick = data[0] % 7;
  if (pick == 0) {
    check_run(words);
  } else if (pick <= 4) {
    check_watch(words, kWatchOptions[pick - 1]);
  } else if (pick == 5) {
    check_lint(words);
  } else {
    check_merge(words);
  }
  return 0;
}
