// The document a process's monitoring endpoint answers with: who it is, each of its devices
// with all its counters and its objects, and the sections added by layers above
// (monitor/sections.h). JSON, with the rdma tool's field names where it has them
// (docs/monitoring.md lists every field).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "iwarp/snapshot.h"
#include "rxe/snapshot.h"

namespace softrdma::monitor {

inline constexpr int kReportVersion = 1;

struct DeviceReport {
  std::string name, transport, backend, address;  // "softroce0", "roce", "udp", "127.1.0.9"
  std::uint16_t lid = 0;
  std::vector<std::pair<std::string, std::uint64_t>> counters;
  std::optional<rxe::DeviceSnapshot> objects;          // softroce0's
  std::optional<iwarp::DeviceSnapshot> iwarp_objects;  // softiwarp0's
};

struct ProcessReport {
  int pid = 0;
  std::string comm;       // /proc/self/comm
  double start_time = 0;  // when the device started, Unix seconds
  std::vector<DeviceReport> devices;
};

std::string to_json(const ProcessReport& r);

// This process's name as ps shows it (/proc/self/comm).
std::string own_comm();
// Now, in Unix seconds.
double unix_now();

}  // namespace softrdma::monitor
