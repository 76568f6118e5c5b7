#include "pcap/writer.h"

#include <pcap/pcap.h>

namespace softrdma::pcap {

std::unique_ptr<Writer> Writer::open(const std::string& path, int linktype, std::string& error) {
  ::pcap* p = pcap_open_dead_with_tstamp_precision(linktype, 262144, PCAP_TSTAMP_PRECISION_NANO);
  if (!p) {
    error = "pcap_open_dead failed";
    return nullptr;
  }
  ::pcap_dumper* d = pcap_dump_open(p, path.c_str());
  if (!d) {
    error = pcap_geterr(p);
    pcap_close(p);
    return nullptr;
  }
  return std::unique_ptr<Writer>(new Writer(p, d));
}

Writer::~Writer() {
  pcap_dump_close(d_);
  pcap_close(p_);
}

void Writer::write(std::int64_t ts_sec, std::int64_t ts_nsec, wire::Bytes frame) {
  struct pcap_pkthdr hdr = {};
  hdr.ts.tv_sec = static_cast<time_t>(ts_sec);
  hdr.ts.tv_usec = static_cast<suseconds_t>(ts_nsec);
  hdr.caplen = static_cast<bpf_u_int32>(frame.size());
  hdr.len = static_cast<bpf_u_int32>(frame.size());
  pcap_dump(reinterpret_cast<u_char*>(d_), &hdr, frame.data());
}

void Writer::flush() { pcap_dump_flush(d_); }

}  // namespace softrdma::pcap
