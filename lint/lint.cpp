#include "lint/lint.h"

#include <algorithm>

#include "lint/flow.h"
#include "lint/iwarp_check.h"
#include "lint/roce_check.h"
#include "lint/roce_flow.h"
#include "pcap/pcapng_reader.h"
#include "pcap/reader.h"
#include "wire/frame.h"
#include "wire/net.h"
#include "wire/roce_headers.h"

namespace softrdma::lint {

int run(const std::string& path, const Options& opts, Report& report, std::string& error) {
  auto reader = pcap::Reader::open(path, error);
  if (!reader) return 2;
  std::unique_ptr<pcap::PcapngReader> annotations;
  if (pcap::PcapngReader::looks_like_pcapng(path)) {
    std::string ignored;
    annotations = pcap::PcapngReader::open(path, ignored);  // optional: lint works without
  }
  return run(*reader, opts, report, error, annotations.get());
}

namespace {

// True when softrdma's tracer says the receiver discarded this frame (drop=…): it is
// not what the peer sent (a corrupted copy, say). A send the fault injector dropped
// (fault=drop) is still what the endpoint did, and is judged.
bool marked_dropped(const std::string& comment) {
  return comment.rfind("softrdma: ", 0) == 0 && comment.find(" drop=") != std::string::npos;
}

}  // namespace

int run(pcap::Reader& reader_ref, const Options& opts, Report& report, std::string& error,
        pcap::PcapngReader* annotations) {
  pcap::Reader* reader = &reader_ref;
  if (!wire::link_type_supported(reader->linktype())) {
    error = "unsupported link type " + std::to_string(reader->linktype()) +
            " (Ethernet, Linux cooked SLL/SLL2 and raw IP are supported)";
    return 2;
  }
  IwarpChecker iwarp(report);
  RoceFlowChecker roce_flows(report);
  pcap::Frame f;
  std::uint64_t frame_no = 0;
  int rc = 0;
  pcap::PcapngRecord record;
  while ((rc = reader->next(f)) == 1) {
    ++frame_no;
    ++report.counters().packets;
    if (annotations) {
      // The two readers walk the same packets; stop using annotations if they part.
      if (annotations->next(record) != 1 || record.data.size() != f.caplen) {
        annotations = nullptr;
      } else if (marked_dropped(record.comment)) {
        ++report.counters().excused;
        continue;
      }
    }
    auto v = wire::parse_frame(f.data, reader->linktype());
    if (!v) {
      ++report.counters().skipped;
      continue;
    }
    if (v->is_ipv6 == false && wire::ipv4_header_checksum(v->ip_header) != 0 && f.caplen == f.len) {
      report.add(frame_no, flow_string(*v), "ip.checksum", "a valid IPv4 header checksum",
                 hex(v->ipv4.checksum, 4));
    }
    if (v->udp) {
      const auto& ports = opts.roce_ports;
      if (std::find(ports.begin(), ports.end(), v->udp->dst_port) == ports.end()) {
        ++report.counters().skipped;
        continue;
      }
      ++report.counters().roce_packets;
      if (f.caplen < f.len) continue;  // cut by the snap length: nothing to judge
      check_roce(frame_no, *v, report);
      if (auto pkt = wire::parse_roce(v->payload)) roce_flows.on_packet(frame_no, *v, *pkt);
    } else if (v->tcp) {
      iwarp.on_tcp_segment(frame_no, *v);
    }
  }
  iwarp.finish();
  roce_flows.finish();
  report.sort();
  if (rc < 0) {
    error = "capture damaged after frame " + std::to_string(frame_no) + ": " + reader->error();
    return 2;
  }
  return report.failed(opts.strict) ? 1 : 0;
}

}  // namespace softrdma::lint
