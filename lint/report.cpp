#include "lint/report.h"

#include <algorithm>
#include <cstdio>

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

std::string json_quote(const std::string& s) {
  std::string os = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        os += "\\\"";
        break;
      case '\\':
        os += "\\\\";
        break;
      case '\n':
        os += "\\n";
        break;
      case '\t':
        os += "\\t";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          os += buf;
        } else {
          os += static_cast<char>(c);
        }
    }
  }
  os += '"';
  return os;
}

void Report::print_json(std::ostream& os, const std::string& file) const {
  os << "{\"file\":";
  os << json_quote(file);
  os << ",\"packets\":" << counters_.packets << ",\"roce_packets\":" << counters_.roce_packets
     << ",\"iwarp_fpdus\":" << counters_.iwarp_fpdus << ",\"mpa_frames\":" << counters_.mpa_frames
     << ",\"excused\":" << counters_.excused << ",\"violation_count\":" << violations_.size()
     << ",\"error_count\":" << errors() << ",\"warning_count\":" << warnings()
     << ",\"violations\":[";
  bool first = true;
  for (const auto& v : violations_) {
    os << (first ? "" : ",") << "{\"frame\":" << v.frame << ",\"flow\":";
    os << json_quote(v.flow);
    os << ",\"rule\":";
    os << json_quote(v.rule);
    os << ",\"severity\":\"" << to_string(v.severity) << '"';
    os << ",\"expected\":";
    os << json_quote(v.expected);
    os << ",\"found\":";
    os << json_quote(v.found);
    os << '}';
    first = false;
  }
  os << "]}\n";
}

}  // namespace softrdma::lint
