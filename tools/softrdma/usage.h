// The usage text of each `softrdma` subcommand, in one place: `softrdma help [COMMAND]`,
// `softrdma COMMAND --help` and the subcommands' own errors print it.
#pragma once

#include <cstdio>
#include <span>
#include <string>
#include <string_view>

namespace softrdma::tools {

struct CommandHelp {
  std::string_view name;
  std::string_view synopsis;  // "softrdma run [OPTIONS] -- PROGRAM [ARGS...]"
  std::string_view text;      // what it does, and its options
};

// Every subcommand, in the order `softrdma help` lists them.
std::span<const CommandHelp> commands();
// The entry for `name`, or nullptr.
const CommandHelp* find_command(std::string_view name);
// Prints "usage: SYNOPSIS" and the text.
void print_help(std::FILE* out, const CommandHelp& c);
// A subcommand's bad usage: "softrdma NAME: WHY" and NAME's help on stderr; returns exit status 2.
int usage_error(std::string_view name, const std::string& why);

// The version, from the project's one VERSION (CMakeLists.txt).
std::string_view version();

}  // namespace softrdma::tools
