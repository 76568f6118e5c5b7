// Reads pcapng files without libpcap, keeping what libpcap drops: every interface's name and
// time resolution, and each packet's comment and flags (used by `softrdma trace merge`).
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

namespace softrdma::pcap {

struct PcapngInterface {
  std::string name;  // if_name, or empty
  std::uint16_t linktype = 0;
  std::uint32_t snaplen = 0;
};

struct PcapngRecord {
  std::uint32_t iface = 0;  // index into interfaces(), across sections
  std::int64_t ts_ns = 0;   // nanoseconds since the epoch
  std::uint32_t orig_len = 0;
  std::vector<std::uint8_t> data;  // captured bytes
  std::string comment;             // the first opt_comment, or empty
  std::uint32_t flags = 0;         // epb_flags, or 0
};

// Handles either byte order and several sections; EPBs and SPBs become records, other blocks
// are skipped.
class PcapngReader {
 public:
  // nullptr and `error` when the file cannot be opened or does not start with an SHB.
  static std::unique_ptr<PcapngReader> open(const std::string& path, std::string& error);
  // True when the file starts like a pcapng file (an SHB).
  static bool looks_like_pcapng(const std::string& path);
  ~PcapngReader();
  PcapngReader(const PcapngReader&) = delete;
  PcapngReader& operator=(const PcapngReader&) = delete;

  // 1: a record was read; 0: end of file; -1: damaged (see error()).
  int next(PcapngRecord& r);
  // Interfaces seen so far (they grow as IDBs are read).
  const std::vector<PcapngInterface>& interfaces() const { return ifaces_; }
  const std::string& error() const { return error_; }

 private:
  explicit PcapngReader(std::FILE* f) : f_(f) {}
  bool read_block(std::uint32_t& type, std::vector<std::uint8_t>& body);
  std::uint16_t u16(const std::uint8_t* p) const;
  std::uint32_t u32(const std::uint8_t* p) const;

  std::FILE* f_;
  bool swap_ = false;
  std::size_t section_base_ = 0;  // first interface index of the current section
  std::vector<PcapngInterface> ifaces_;
  std::vector<std::uint64_t> units_per_sec_;  // per interface
  std::vector<std::uint8_t> body_;
  std::string error_;
};

}  // namespace softrdma::pcap
