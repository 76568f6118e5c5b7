#include "pcap/reader.h"

#include <pcap/pcap.h>

#include <cstdio>

namespace softrdma::pcap {

std::unique_ptr<Reader> Reader::open(const std::string& path, std::string& error) {
  char errbuf[PCAP_ERRBUF_SIZE] = {};
  ::pcap* p = pcap_open_offline_with_tstamp_precision(path.c_str(), PCAP_TSTAMP_PRECISION_NANO,
                                                      errbuf);
  if (!p) {
    error = errbuf[0] ? errbuf : "cannot open capture";
    return nullptr;
  }
  return std::unique_ptr<Reader>(new Reader(p));
}

std::unique_ptr<Reader> Reader::open_memory(wire::Bytes capture, std::string& error) {
  if (capture.empty()) {
    error = "empty capture";
    return nullptr;
  }
  std::FILE* f = fmemopen(const_cast<std::uint8_t*>(capture.data()), capture.size(), "rb");
  if (!f) {
    error = "fmemopen failed";
    return nullptr;
  }
  char errbuf[PCAP_ERRBUF_SIZE] = {};
  ::pcap* p = pcap_fopen_offline_with_tstamp_precision(f, PCAP_TSTAMP_PRECISION_NANO, errbuf);
  if (!p) {
    std::fclose(f);
    error = errbuf[0] ? errbuf : "cannot read capture";
    return nullptr;
  }
  return std::unique_ptr<Reader>(new Reader(p));  // pcap_close closes f
}

namespace {
// pcap_datalink gives a DLT_ value, wire/ speaks the file's LINKTYPE_ values; they differ for
// raw IP only: LINKTYPE_RAW (101) comes back as DLT_RAW (12 on Linux, 14 on OpenBSD).
int linktype_of(::pcap* p) {
  const int dlt = pcap_datalink(p);
  return dlt == DLT_RAW ? 101 : dlt;
}
}  // namespace

Reader::Reader(::pcap* p) : p_(p), linktype_(linktype_of(p)) {}

Reader::~Reader() { pcap_close(p_); }

int Reader::next(Frame& f) {
  struct pcap_pkthdr* hdr = nullptr;
  const u_char* data = nullptr;
  const int rc = pcap_next_ex(p_, &hdr, &data);
  if (rc == 1) {
    f.ts_sec = hdr->ts.tv_sec;
    f.ts_nsec = hdr->ts.tv_usec;  // nanoseconds: the handle was opened with nano precision
    f.caplen = hdr->caplen;
    f.len = hdr->len;
    f.data = wire::Bytes(data, hdr->caplen);
    return 1;
  }
  if (rc == PCAP_ERROR_BREAK) return 0;
  error_ = pcap_geterr(p_);
  return -1;
}

}  // namespace softrdma::pcap
