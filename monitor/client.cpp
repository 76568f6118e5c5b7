#include "monitor/client.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>

#include "monitor/endpoint.h"
#include "monitor/report.h"

namespace softrdma::monitor {
namespace {

using nlohmann::json;

bool alive(int pid) {
  return kill(pid, 0) == 0 || errno == EPERM;
}

std::string comm_of(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/comm");
  std::string s;
  std::getline(in, s);
  return s;
}

std::string who(int pid) {
  const std::string c = comm_of(pid);
  return "pid " + std::to_string(pid) + (c.empty() ? "" : " (" + c + ")");
}

bool is_string(const json& o, const char* k) {
  return o.contains(k) && o[k].is_string();
}

bool check_rows(const json& o, const char* k, std::string& why) {
  if (!o.contains(k)) return true;
  if (!o[k].is_array()) {
    why = std::string("\"") + k + "\" is not an array";
    return false;
  }
  for (const json& row : o[k]) {
    if (!row.is_object()) {
      why = std::string("a row of \"") + k + "\" is not an object";
      return false;
    }
  }
  return true;
}

bool check_device(const json& d, std::string& why) {
  if (!d.is_object()) {
    why = "a device is not an object";
    return false;
  }
  for (const char* k : {"ifname", "transport", "backend", "address"}) {
    if (!is_string(d, k)) {
      why = std::string("a device lacks \"") + k + "\"";
      return false;
    }
  }
  if (!d.contains("counters") || !d["counters"].is_object()) {
    why = "device " + d["ifname"].get<std::string>() + " has no counters";
    return false;
  }
  for (const auto& [name, value] : d["counters"].items()) {
    if (!value.is_number_unsigned()) {
      why = "counter " + name + " is not an unsigned integer";
      return false;
    }
  }
  for (const char* k : {"port", "lid", "mr_count", "mr_bytes"}) {
    if (d.contains(k) && !d[k].is_number_unsigned()) {
      why = std::string("\"") + k + "\" is not an unsigned integer";
      return false;
    }
  }
  if (d.contains("objects")) {
    if (!d["objects"].is_object()) {
      why = "\"objects\" is not an object";
      return false;
    }
    for (const char* k : {"qp", "cq", "mr", "pd", "srq"}) {
      if (!check_rows(d["objects"], k, why)) return false;
    }
  }
  return true;
}

}  // namespace

bool check_report(const json& doc, int pid, std::string& why) {
  if (!doc.is_object()) {
    why = "not a JSON object";
    return false;
  }
  if (is_string(doc, "error")) {
    why = doc["error"].get<std::string>();
    return false;
  }
  if (!doc.contains("version") || doc["version"] != kReportVersion) {
    why = "not a version " + std::to_string(kReportVersion) + " report";
    return false;
  }
  if (!doc.contains("pid") || doc["pid"] != pid) {
    why = "the report names another pid";
    return false;
  }
  if (!is_string(doc, "comm") || !doc.contains("start_time") || !doc["start_time"].is_number()) {
    why = "no comm or start_time";
    return false;
  }
  if (!doc.contains("devices") || !doc["devices"].is_array()) {
    why = "no devices";
    return false;
  }
  for (const json& d : doc["devices"]) {
    if (!check_device(d, why)) return false;
  }
  return check_rows(doc, "cm_id", why);
}

Collection collect(std::optional<int> pid, int timeout_ms) {
  Collection c;
  std::vector<int> pids;
  if (pid) {
    if (!alive(*pid)) {
      c.errors.push_back("no process " + std::to_string(*pid));
      return c;
    }
    pids.push_back(*pid);
  } else {
    pids = list_endpoints();
  }
  const long me = static_cast<long>(geteuid());
  for (const int p : pids) {
    const long uid = process_uid(p);
    if (me != 0 && uid != me) {
      if (pid) c.errors.push_back(who(p) + " belongs to another user (only root sees it)");
      continue;  // listing: others' devices are not ours to see
    }
    std::string text, error;
    switch (query(p, timeout_ms, text, error)) {
      case Query::kOk:
        break;
      case Query::kGone:
        if (pid) {
          c.errors.push_back(alive(p) ? who(p) + " runs no softrdma device"
                                      : "pid " + std::to_string(p) + " ended while asked");
        }
        continue;
      case Query::kNoAnswer:
        c.errors.push_back(who(p) + " did not answer within " + std::to_string(timeout_ms) +
                           " ms (stopped or stuck?)");
        continue;
      case Query::kBadPeer:
        c.errors.push_back("the entry of pid " + std::to_string(p) + " is corrupt: " + error);
        continue;
      case Query::kError:
        c.errors.push_back(who(p) + ": " + error);
        continue;
    }
    json doc = json::parse(text, nullptr, false);
    std::string why;
    if (doc.is_discarded() || !check_report(doc, p, why)) {
      if (!holds_endpoint(p)) {  // it ended mid-answer: gone, not corrupt
        if (pid) c.errors.push_back("pid " + std::to_string(p) + " ended while asked");
        continue;
      }
      c.errors.push_back("the entry of " + who(p) +
                         " is corrupt: " + (doc.is_discarded() ? "its answer is not JSON" : why));
      continue;
    }
    c.reports.push_back({p, std::move(doc)});
  }
  return c;
}

}  // namespace softrdma::monitor
