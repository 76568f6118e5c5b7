// Reads pcap and pcapng captures through libpcap, one frame at a time. Errors
// (missing file, not a capture, truncated record) come back as messages.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "wire/bytes.h"

struct pcap;

namespace softrdma::pcap {

struct Frame {
  std::int64_t ts_sec = 0;
  std::int64_t ts_nsec = 0;
  std::uint32_t caplen = 0;  // bytes present
  std::uint32_t len = 0;     // bytes on the wire
  wire::Bytes data;          // valid until the next call to next()
};

class Reader {
 public:
  // Opens `path`; on failure returns nullptr and sets `error`.
  static std::unique_ptr<Reader> open(const std::string& path, std::string& error);
  // Reads a capture held in memory (the bytes must outlive the Reader).
  static std::unique_ptr<Reader> open_memory(wire::Bytes capture, std::string& error);
  ~Reader();
  Reader(const Reader&) = delete;
  Reader& operator=(const Reader&) = delete;

  int linktype() const { return linktype_; }  // the file's LINKTYPE_ value (wire::LinkType)
  // 1: a frame was read; 0: end of file; -1: the file is damaged (see error()).
  int next(Frame& f);
  const std::string& error() const { return error_; }

 private:
  explicit Reader(::pcap* p);
  ::pcap* p_;
  int linktype_;
  std::string error_;
};

}  // namespace softrdma::pcap
