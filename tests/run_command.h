// Running a shell command from a test: run_command() gives its exit status (-1 when it did
// not exit normally) and its output, stdout and stderr together; succeeds() only whether it
// exited 0, its output discarded.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace softrdma::test {

struct CommandResult {
  int status = -1;  // exit status, or -1
  std::string out;  // stdout and stderr
};

inline CommandResult run_command(const std::string& cmd) {
  CommandResult r;
  std::FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return r;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

inline bool succeeds(const std::string& cmd) {
  return std::system((cmd + " >/dev/null 2>&1").c_str()) == 0;
}

}  // namespace softrdma::test
