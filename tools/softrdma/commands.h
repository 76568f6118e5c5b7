// Subcommands of the `softrdma` command line. Each takes argv after its name
// and returns the process exit status.
#pragma once

namespace softrdma::tools {

int cmd_lint(int argc, char** argv);
int cmd_sample_trace(int argc, char** argv);
int cmd_run(int argc, char** argv);
int cmd_devices(int argc, char** argv);
int cmd_trace(int argc, char** argv);
int cmd_trace_plot(int argc, char** argv);  // `trace plot`, through trace_plot.py
// Watching running devices (docs/monitoring.md).
int cmd_stat(int argc, char** argv);
int cmd_res(int argc, char** argv);
int cmd_exporter(int argc, char** argv);
int cmd_top(int argc, char** argv);

}  // namespace softrdma::tools
