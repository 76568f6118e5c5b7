// Subcommands of the `softrdma` command line. Each takes argv after its name
// and returns the process exit status.
#pragma once

#include "tools/softrdma/watch_args.h"

namespace softrdma::tools {

int cmd_lint(int argc, char** argv);
int cmd_sample_trace(int argc, char** argv);
int cmd_run(int argc, char** argv);
int cmd_devices(int argc, char** argv);
int cmd_trace(int argc, char** argv);
int cmd_trace_plot(int argc, char** argv);  // `trace plot`, through trace_plot.py
// Watching running devices (docs/monitoring.md): main.cpp parses their options, once.
int cmd_stat(const WatchArgs& args);
int cmd_res(const WatchArgs& args);
int cmd_exporter(const WatchArgs& args);
int cmd_top(const WatchArgs& args);

}  // namespace softrdma::tools
