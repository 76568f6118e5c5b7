#include "tools/softrdma/watch_args.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <sstream>

namespace softrdma::tools {

namespace {

bool allows(const std::string& allowed, const std::string& opt) {
  std::istringstream in(allowed);
  std::string w;
  while (in >> w) {
    if (w == opt) return true;
  }
  return false;
}

bool parse_int(const std::string& s, int& out) {
  const char* end = s.data() + s.size();
  auto [p, ec] = std::from_chars(s.data(), end, out);
  return ec == std::errc() && p == end && out > 0;
}

bool parse_seconds(const std::string& s, double& out) {
  try {
    std::size_t used = 0;
    out = std::stod(s, &used);
    return used == s.size() && std::isfinite(out) && out > 0 && out <= 3600;
  } catch (...) {
    return false;
  }
}

}  // namespace

bool parse_watch_args(int argc, char** argv, const std::string& allowed, WatchArgs& out,
                      std::string& error) {
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i], value;
    bool has_value = false;
    if (const auto eq = a.find('='); a.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = a.substr(eq + 1);
      a = a.substr(0, eq);
      has_value = true;
    }
    if (a.empty() || a[0] != '-') {
      out.words.push_back(a);
      continue;
    }
    if (!allows(allowed, a)) {
      error = "unknown option '" + a + "'";
      return false;
    }
    if (a == "--json" || a == "--once") {
      (a == "--json" ? out.json : out.once) = true;
      continue;
    }
    if (!has_value) {
      if (i + 1 >= argc) {
        error = a + " needs a value";
        return false;
      }
      value = argv[++i];
    }
    if (a == "-p") {
      int pid = 0;
      if (!parse_int(value, pid)) {
        error = "bad PID '" + value + "'";
        return false;
      }
      out.pid = pid;
    } else if (a == "-w" || a == "-d") {
      double s = 0;
      if (!parse_seconds(value, s)) {
        error = "bad SECONDS '" + value + "' (more than 0, at most 3600)";
        return false;
      }
      out.seconds = s;
    } else if (a == "--listen") {
      out.listen = value;
    }
  }
  return true;
}

bool print_errors(const char* cmd, const monitor::Collection& c) {
  for (const std::string& e : c.errors) std::fprintf(stderr, "softrdma %s: %s\n", cmd, e.c_str());
  return !c.errors.empty();
}

std::string DeviceRow::key() const {
  return std::to_string(pid) + "/" + (*device)["ifname"].get<std::string>();
}

std::vector<DeviceRow> device_rows(const monitor::Collection& c) {
  std::vector<DeviceRow> rows;
  for (const monitor::Fetched& f : c.reports) {
    for (const nlohmann::json& d : f.doc["devices"]) rows.push_back({f.pid, &f.doc, &d});
  }
  return rows;
}

std::string iso_time(double unix_seconds) {
  const std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

nlohmann::json identity(const DeviceRow& d) {
  const nlohmann::json& dev = *d.device;
  return {{"ifname", dev["ifname"]},
          {"port", dev.value("port", 1)},
          {"pid", d.pid},
          {"comm", (*d.process)["comm"]}};
}

}  // namespace softrdma::tools
