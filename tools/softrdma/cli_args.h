// The option parsers of `softrdma run`, `lint` and `trace merge`, apart from the commands that
// act on them: argv in, the parsed options or a message out (the command prints the message
// with its usage and exits 2). Pure functions: no environment, no files, no exit.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "lint/lint.h"

namespace softrdma::tools {

// run's options and the SOFTRDMA_* variable each sets ("--stats", a flag, sets
// SOFTRDMA_STATS=1; the others take a value, as "--opt VALUE" or "--opt=VALUE").
const std::vector<std::pair<std::string, std::string>>& run_options();

struct RunArgs {
  std::vector<std::pair<std::string, std::string>> env;  // variable, value; in argv's order
  int program = 0;                                       // argv index of PROGRAM
};
// Options up to "--" or the first word that is not one; PROGRAM must follow.
bool parse_run_args(int argc, char** argv, RunArgs& out, std::string& error);

struct LintArgs {
  lint::Options opts;
  bool json = false;
  bool help = false;  // -h or --help: print the help and exit 0
  std::string file;
};
bool parse_lint_args(int argc, char** argv, LintArgs& out, std::string& error);

struct MergeArgs {
  std::vector<std::string> inputs;
  std::string output;
};
// The arguments after `trace merge`.
bool parse_merge_args(int argc, char** argv, MergeArgs& out, std::string& error);

}  // namespace softrdma::tools
