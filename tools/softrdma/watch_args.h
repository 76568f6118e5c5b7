// What softrdma stat, res, top and exporter share: their options (--json, -p PID, -w SECONDS,
// --once, --listen ADDR:PORT), the errors of a collection (monitor/client.h) and the devices of
// the reports, one row each.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "monitor/client.h"

namespace softrdma::tools {

struct WatchArgs {
  bool json = false, once = false;
  std::optional<int> pid;
  std::optional<double> seconds;   // -w / -d
  std::string listen;              // --listen
  std::vector<std::string> words;  // what is not an option
};

// Parses argv; `allowed` names the options this command takes ("--json -p -w"). False and a
// message on anything else or a bad value.
bool parse_watch_args(int argc, char** argv, const std::string& allowed, WatchArgs& out,
                      std::string& error);

// Prints each error as "softrdma CMD: ERROR" on stderr; true when there was one.
bool print_errors(const char* cmd, const monitor::Collection& c);

struct DeviceRow {
  int pid = 0;
  const nlohmann::json* process = nullptr;  // the report
  const nlohmann::json* device = nullptr;   // one of its "devices"
  std::string key() const;                  // "PID/IFNAME"
};
std::vector<DeviceRow> device_rows(const monitor::Collection& c);

// Unix seconds as 2026-12-01T16:40:01Z.
std::string iso_time(double unix_seconds);

// The fields that say whose a row is, as the rdma tool names them: ifname, port, pid, comm.
nlohmann::json identity(const DeviceRow& d);

}  // namespace softrdma::tools
