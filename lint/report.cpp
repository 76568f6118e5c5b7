#include "lint/report.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

namespace softrdma::lint {

std::string hex(std::uint64_t v, int width) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%0*llx", width, static_cast<unsigned long long>(v));
  return buf;
}

void Report::add(std::uint64_t frame, std::string flow, Rule rule, std::string expected,
                 std::string found) {
  const Severity severity = rule.severity();
  if (severity == Severity::kError) ++errors_;
  violations_.push_back({frame, std::move(flow), std::string(rule.name()), severity,
                         std::move(expected), std::move(found)});
}

void Report::sort() {
  std::stable_sort(violations_.begin(), violations_.end(),
                   [](const Violation& a, const Violation& b) { return a.frame < b.frame; });
}

void Report::print_text(std::ostream& os, const std::string& file) const {
  for (const auto& v : violations_) {
    os << "frame " << v.frame << ": " << v.flow << ": " << to_string(v.severity) << ": " << v.rule
       << ": expected " << v.expected << ", found " << v.found << '\n';
  }
  os << file << ": " << counters_.packets << " packets read, " << counters_.roce_packets
     << " RoCEv2 packets, " << counters_.iwarp_fpdus << " iWARP FPDUs, " << violations_.size()
     << " violations (" << errors() << " errors, " << warnings() << " warnings)";
  if (counters_.excused) os << " (" << counters_.excused << " frames marked dropped, not judged)";
  os << '\n';
}

namespace {

using Json = nlohmann::ordered_json;  // keys in the order written

// One line of JSON; bytes that are not UTF-8 (a file name can hold any) become U+FFFD.
void print_line(std::ostream& os, const Json& doc) {
  os << doc.dump(-1, ' ', false, Json::error_handler_t::replace) << '\n';
}

}  // namespace

void Report::print_json(std::ostream& os, const std::string& file) const {
  Json doc = {{"file", file},
              {"packets", counters_.packets},
              {"roce_packets", counters_.roce_packets},
              {"iwarp_fpdus", counters_.iwarp_fpdus},
              {"mpa_frames", counters_.mpa_frames},
              {"excused", counters_.excused},
              {"violation_count", violations_.size()},
              {"error_count", errors()},
              {"warning_count", warnings()},
              {"violations", Json::array()}};
  for (const auto& v : violations_) {
    doc["violations"].push_back({{"frame", v.frame},
                                 {"flow", v.flow},
                                 {"rule", v.rule},
                                 {"severity", to_string(v.severity)},
                                 {"expected", v.expected},
                                 {"found", v.found}});
  }
  print_line(os, doc);
}

void print_json_error(std::ostream& os, const std::string& file, const std::string& error) {
  print_line(os, Json{{"file", file}, {"error", error}});
}

}  // namespace softrdma::lint
