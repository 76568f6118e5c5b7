// The asking side: finds the running processes with a softrdma device (monitor/endpoint.h),
// fetches their reports (monitor/report.h) and checks that each is one, so that the commands
// built on it (softrdma stat, res, top, exporter) only see well-formed documents.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace softrdma::monitor {

struct Fetched {
  int pid = 0;
  nlohmann::json doc;  // a checked report
};

struct Collection {
  std::vector<Fetched> reports;     // by pid
  std::vector<std::string> errors;  // one line each: the bad input the caller exits 2 for
};

// Every process of this network namespace that holds an endpoint and is ours (or any, as root);
// with `pid`, that process only, and an error when it has no device, is not ours, or is gone.
// A process that ends while it is asked is left out (with `pid`: an error). Each query waits
// at most `timeout_ms`: never a hang.
Collection collect(std::optional<int> pid, int timeout_ms = 3000);

// True when `doc` is a report of `pid` this tool can read; else false and why.
bool check_report(const nlohmann::json& doc, int pid, std::string& why);

}  // namespace softrdma::monitor
