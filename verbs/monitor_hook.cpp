#include "verbs/monitor_hook.h"

#include <unistd.h>

#include <cstdio>
#include <optional>

#include "iwarp/device.h"
#include "iwarp/snapshot.h"
#include "monitor/report.h"
#include "monitor/server.h"
#include "verbs/engine.h"

namespace softrdma::verbs {
namespace {

// softroce0 as softrdma top shows it; watched from now on: its CQs measure post-to-poll latency.
monitor::DeviceReport roce_report(Engine& e) {
  rxe::Device& d = e.device();
  d.sample_latency(true);
  monitor::DeviceReport roce;
  roce.name = d.name();
  roce.transport = "roce";
  roce.backend = d.netdev().backend();
  roce.address = e.address().str();
  roce.lid = e.lid();
  roce.counters = d.hw_counters();
  // Bytes through the backend (not among rxe's hw_counters; softrdma top's MB/s).
  const netdev::Counters nd = d.netdev().counters();
  roce.counters.emplace_back("netdev_tx_bytes", nd.tx_bytes);
  roce.counters.emplace_back("netdev_rx_bytes", nd.rx_bytes);
  roce.objects = d.snapshot();
  return roce;
}

// softiwarp0's, when something started it (a report never starts it).
std::optional<monitor::DeviceReport> iwarp_report(Engine& e) {
  iwarp::Device* iw = e.iwarp_if_started();
  if (!iw) return std::nullopt;
  monitor::DeviceReport dev;
  dev.name = iw->name();
  dev.transport = "iwarp";
  dev.backend = "tcp";
  dev.address = e.address().str();
  dev.counters = iw->hw_counters();
  dev.iwarp_objects = iw->snapshot();
  return dev;
}

}  // namespace

void start_monitor(Engine& e) {
  const double started = monitor::unix_now();
  std::string error;
  auto answer = [&e, started] {
    monitor::ProcessReport r;
    r.pid = static_cast<int>(getpid());
    r.comm = monitor::own_comm();
    r.start_time = started;
    r.devices.push_back(roce_report(e));
    if (auto iw = iwarp_report(e)) r.devices.push_back(std::move(*iw));
    return monitor::to_json(r);
  };
  if (!monitor::start_server(std::move(answer), error)) {
    std::fprintf(stderr, "softrdma: not monitored: %s\n", error.c_str());
  }
}

}  // namespace softrdma::verbs
