// The `softrdma` command line: dispatches to subcommands. `softrdma help [COMMAND]`,
// `softrdma COMMAND --help` and `softrdma --version` print to stdout and exit 0.
#include <cstdio>
#include <cstring>
#include <string_view>

#include "tools/softrdma/commands.h"
#include "tools/softrdma/usage.h"

namespace {

using namespace softrdma::tools;

void usage(std::FILE* out) {
  std::fprintf(out, "usage: softrdma COMMAND [ARGS]\n\ncommands:\n");
  for (const CommandHelp& c : commands()) {
    std::fprintf(out, "  %.*s\n", static_cast<int>(c.synopsis.size()), c.synopsis.data());
  }
  std::fprintf(out,
               "\n`softrdma help COMMAND` or `softrdma COMMAND --help` says more; "
               "`man softrdma` says all.\n");
}

bool is_help(const char* a) {
  return !std::strcmp(a, "--help") || !std::strcmp(a, "-h");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  const std::string_view cmd = argv[1];
  if (cmd == "--version" || cmd == "version") {
    std::printf("softrdma %.*s\n", static_cast<int>(version().size()), version().data());
    return 0;
  }
  if (cmd == "help" || is_help(argv[1])) {
    if (argc < 3) {
      usage(stdout);
      return 0;
    }
    const CommandHelp* c = find_command(argv[2]);
    if (!c) {
      std::fprintf(stderr, "softrdma: no command '%s'\n", argv[2]);
      usage(stderr);
      return 2;
    }
    print_help(stdout, *c);
    return 0;
  }
  // `softrdma COMMAND --help`: only right after the command (`run -- prog --help` is the
  // program's).
  if (argc >= 3 && is_help(argv[2])) {
    if (const CommandHelp* c = find_command(cmd)) {
      print_help(stdout, *c);
      return 0;
    }
  }
  if (cmd == "lint") return cmd_lint(argc - 2, argv + 2);
  if (cmd == "run") return cmd_run(argc - 2, argv + 2);
  if (cmd == "devices") return cmd_devices(argc - 2, argv + 2);
  if (cmd == "trace") return cmd_trace(argc - 2, argv + 2);
  if (cmd == "sample-trace") return cmd_sample_trace(argc - 2, argv + 2);
  if (cmd == "stat") return cmd_stat(argc - 2, argv + 2);
  if (cmd == "res") return cmd_res(argc - 2, argv + 2);
  if (cmd == "exporter") return cmd_exporter(argc - 2, argv + 2);
  if (cmd == "top") return cmd_top(argc - 2, argv + 2);
  std::fprintf(stderr, "softrdma: unknown command '%s'\n", argv[1]);
  usage(stderr);
  return 2;
}
