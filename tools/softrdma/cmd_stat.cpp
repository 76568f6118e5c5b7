// softrdma stat [--json] [-p PID] [-w SECONDS]: every running device's hw_counters (as
// `rdma statistic show`); with -w, two samples SECONDS apart and the rates between them.
// Exit status 2 on bad usage or bad input (an unknown PID, a corrupt entry, no answer).
#include <chrono>
#include <cstdio>
#include <map>
#include <thread>

#include "tools/softrdma/commands.h"
#include "tools/softrdma/watch_args.h"

namespace softrdma::tools {

namespace {

using nlohmann::json;

json device_json(const DeviceRow& d) {
  json row = identity(d);
  const json& dev = *d.device;
  for (const char* k : {"transport", "backend", "address", "lid", "mr_count", "mr_bytes"}) {
    if (dev.contains(k)) row[k] = dev[k];
  }
  row["start_time"] = iso_time((*d.process)["start_time"].get<double>());
  row["counters"] = dev["counters"];
  return row;
}

void print_text(const DeviceRow& d, const json* rates) {
  const json& dev = *d.device;
  std::printf("link %s/%d pid %d comm %s transport %s backend %s address %s start %s",
              dev["ifname"].get<std::string>().c_str(), dev.value("port", 1), d.pid,
              (*d.process)["comm"].get<std::string>().c_str(),
              dev["transport"].get<std::string>().c_str(),
              dev["backend"].get<std::string>().c_str(), dev["address"].get<std::string>().c_str(),
              iso_time((*d.process)["start_time"].get<double>()).c_str());
  for (const auto& [name, value] : dev["counters"].items()) {
    std::printf(" %s %llu", name.c_str(),
                static_cast<unsigned long long>(value.get<std::uint64_t>()));
    if (rates && rates->contains(name)) std::printf(" (%.1f/s)", (*rates)[name].get<double>());
  }
  std::printf("\n");
}

}  // namespace

int cmd_stat(const WatchArgs& args) {
  using Clock = std::chrono::steady_clock;
  monitor::Collection first;
  Clock::time_point t0{};
  if (args.seconds) {
    first = monitor::collect(args.pid);
    t0 = Clock::now();
    if (print_errors("stat", first)) return 2;
    std::this_thread::sleep_for(std::chrono::duration<double>(*args.seconds));
  }
  const monitor::Collection now = monitor::collect(args.pid);
  const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
  // A device that ended during the interval is not listed; one that started has no rates.
  std::map<std::string, json> before;
  for (const DeviceRow& d : device_rows(first)) before[d.key()] = (*d.device)["counters"];
  json out = json::array();
  for (const DeviceRow& d : device_rows(now)) {
    json rates;
    const bool has_rates = args.seconds && before.contains(d.key());
    if (has_rates) {
      rates = json::object();
      const json& old = before[d.key()];
      for (const auto& [name, value] : (*d.device)["counters"].items()) {
        if (!old.contains(name)) continue;
        const auto a = old[name].get<std::uint64_t>(), b = value.get<std::uint64_t>();
        rates[name] = b >= a ? static_cast<double>(b - a) / dt : 0.0;
      }
    }
    if (args.json) {
      json row = device_json(d);
      if (has_rates) {
        row["interval"] = dt;
        row["rates"] = rates;
      }
      out.push_back(std::move(row));
    } else {
      print_text(d, has_rates ? &rates : nullptr);
    }
  }
  if (args.json) std::printf("%s\n", out.dump(2).c_str());
  return print_errors("stat", now) ? 2 : 0;
}

}  // namespace softrdma::tools
