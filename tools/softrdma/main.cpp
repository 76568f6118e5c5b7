// The `softrdma` command line: dispatches to subcommands. `softrdma help [COMMAND]`,
// `softrdma COMMAND --help` and `softrdma --version` print to stdout and exit 0.
#include <cstdio>
#include <cstring>
#include <string>
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

// The commands that watch running devices: their options (watch_args.h) are parsed here.
struct Watcher {
  std::string_view name;
  const char* options;    // what parse_watch_args allows
  std::size_t max_words;  // words besides the options (res's object kind)
  int (*run)(const WatchArgs&);
};
constexpr Watcher kWatchers[] = {
    {"stat", "--json -p -w", 0, cmd_stat},
    {"res", "--json -p", 1, cmd_res},
    {"exporter", "--listen", 0, cmd_exporter},
    {"top", "--once -d -p", 0, cmd_top},
};

int watch(const Watcher& w, int argc, char** argv) {
  WatchArgs args;
  std::string error;
  if (!parse_watch_args(argc, argv, w.options, args, error)) return usage_error(w.name, error);
  if (args.words.size() > w.max_words) {
    return usage_error(w.name, "unexpected '" + args.words[w.max_words] + "'");
  }
  return w.run(args);
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
  for (const Watcher& w : kWatchers) {
    if (cmd == w.name) return watch(w, argc - 2, argv + 2);
  }
  std::fprintf(stderr, "softrdma: unknown command '%s'\n", argv[1]);
  usage(stderr);
  return 2;
}
