// `softrdma lint`: reads a capture and checks every RoCEv2 packet and every iWARP
// stream in it. Exit status: 0 no error (warnings allowed unless strict), 1 errors (or, with
// strict, warnings), 2 unreadable capture.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lint/report.h"

namespace softrdma::lint {

struct Options {
  std::vector<std::uint16_t> roce_ports{4791};
  bool strict = false;  // warnings fail the capture too (exit status 1)
};

// Fills `report`; on a file that cannot be read (or is damaged part-way) sets
// `error` and returns 2, keeping what was checked before the damage.
int run(const std::string& path, const Options& opts, Report& report, std::string& error);

}  // namespace softrdma::lint

namespace softrdma::pcap {
class Reader;
class PcapngReader;
}  // namespace softrdma::pcap

namespace softrdma::lint {

// The same over an open capture. With `annotations` (the same file read by our
// pcapng reader, in step), frames softrdma's tracer marks as discarded by the
// receiver (drop=…) are not judged: lint is about what the endpoints sent.
int run(pcap::Reader& reader, const Options& opts, Report& report, std::string& error,
        pcap::PcapngReader* annotations = nullptr);

}  // namespace softrdma::lint
