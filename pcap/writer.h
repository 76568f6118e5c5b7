// Writes frames to a classic pcap file (nanosecond timestamps) through libpcap.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "wire/bytes.h"

struct pcap;
struct pcap_dumper;

namespace softrdma::pcap {

class Writer {
 public:
  // linktype: a LINKTYPE_* value (1 = Ethernet). nullptr and `error` on failure.
  static std::unique_ptr<Writer> open(const std::string& path, int linktype, std::string& error);
  ~Writer();
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;
  void write(std::int64_t ts_sec, std::int64_t ts_nsec, wire::Bytes frame);
  void flush();

 private:
  Writer(::pcap* p, ::pcap_dumper* d) : p_(p), d_(d) {}
  ::pcap* p_;
  ::pcap_dumper* d_;
};

}  // namespace softrdma::pcap
