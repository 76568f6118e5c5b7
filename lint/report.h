// Collects lint violations and counters, and prints them as text or JSON (one line, through
// nlohmann-json: any bytes in a file name or a finding come out as valid JSON).
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "lint/rules.h"

namespace softrdma::lint {

struct Violation {
  std::uint64_t frame = 0;               // 1-based frame number in the capture
  std::string flow;                      // e.g. "10.0.0.1:50000 > 10.0.0.2:4791 qp 0x000011"
  std::string rule;                      // stable rule name, e.g. "roce.icrc", "mpa.crc"
  Severity severity = Severity::kError;  // the rule's, from kRules
  std::string expected;
  std::string found;
};

struct Counters {
  std::uint64_t packets = 0;       // frames read from the file
  std::uint64_t roce_packets = 0;  // UDP datagrams to a RoCEv2 port
  std::uint64_t iwarp_fpdus = 0;   // FPDUs found in MPA streams
  std::uint64_t mpa_frames = 0;    // MPA request/reply frames
  std::uint64_t skipped = 0;       // frames that are neither (ARP, other ports, …)
  std::uint64_t excused = 0;       // frames a softrdma trace marks as dropped: not judged
};

class Report {
 public:
  // One violation of `rule`; its severity comes from the rule table (lint/rules.h).
  void add(std::uint64_t frame, std::string flow, Rule rule, std::string expected,
           std::string found);
  Counters& counters() { return counters_; }
  const Counters& counters() const { return counters_; }
  const std::vector<Violation>& violations() const { return violations_; }
  std::size_t errors() const { return errors_; }
  std::size_t warnings() const { return violations_.size() - errors_; }
  // Whether the capture fails lint: any error, or with `strict` any violation at all.
  bool failed(bool strict) const { return errors_ > 0 || (strict && !violations_.empty()); }
  // Sorts violations by frame number (stable), as printed.
  void sort();
  void print_text(std::ostream& os, const std::string& file) const;
  void print_json(std::ostream& os, const std::string& file) const;

 private:
  std::vector<Violation> violations_;
  std::size_t errors_ = 0;
  Counters counters_;
};

std::string hex(std::uint64_t v, int width = 0);
// The JSON line `softrdma lint --json` prints when it cannot read `file` at all.
void print_json_error(std::ostream& os, const std::string& file, const std::string& error);

}  // namespace softrdma::lint
