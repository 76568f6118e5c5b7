// Writes pcapng files of our own (no libpcap): one section (its shb_userappl "softrdma VERSION",
// the project's version), an IDB per interface, Enhanced Packet Blocks with a comment and
// direction flags, size-based rotation and buffered flushing.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "wire/bytes.h"

namespace softrdma::pcap {

// EPB flags (option epb_flags, pcapng spec): direction in bits 0-1.
inline constexpr std::uint32_t kEpbInbound = 0x1;
inline constexpr std::uint32_t kEpbOutbound = 0x2;
// Snapshot length written in IDBs when frames are not cut short.
inline constexpr std::uint32_t kUnlimitedSnaplen = 262144;

// softrdma's per-packet annotation, carried as the EPB's opt_comment:
//   "softrdma: dir=tx dev=softroce0 qp=0x000011 fault=drop"
// Keys in this order, each only when meaningful: dir (tx|rx), dev, qp (destination QPN),
// fault (drop|duplicate|reorder|corrupt|delay, injected), drop (icrc|malformed|not_ours|
// queue_full, receiver's drop reason), retrans (1).
struct Annotation {
  bool tx = true;
  std::string_view dev;
  std::optional<std::uint32_t> qp;
  std::string_view fault;  // empty: none injected
  std::string_view drop;   // empty: not dropped by the receiver
  bool retrans = false;
};
inline constexpr std::string_view kAnnotationPrefix = "softrdma: ";
// Writes the annotation text into `buf` (never more than `cap` bytes, no terminator needed);
// returns its length.
std::size_t format_annotation(const Annotation& a, char* buf, std::size_t cap);

struct PcapngOptions {
  std::uint64_t rotate_bytes = 0;  // 0: never rotate
  std::chrono::milliseconds flush_interval{100};
  std::size_t flush_packets = 1024;       // flush after this many buffered packets
  std::size_t buffer_bytes = 256 * 1024;  // flush when the buffer holds this much
  // Expand "%p" to the pid, and when another live process already writes to the path, write
  // to PATH with ".PID" inserted before the extension instead (see docs/tracing.md).
  bool per_process_name = true;
};

// Thread-safe. Records are buffered and written by flush(): when the buffer fills, every
// flush_packets packets, when flush_interval has passed at the next write, on destruction and
// at process exit (an atexit handler flushes every live writer).
class PcapngWriter {
 public:
  // Creates the file (see PcapngOptions for the name); nullptr and `error` on failure.
  static std::unique_ptr<PcapngWriter> open(const std::string& path, std::string& error,
                                            PcapngOptions opts = {});
  ~PcapngWriter();
  PcapngWriter(const PcapngWriter&) = delete;
  PcapngWriter& operator=(const PcapngWriter&) = delete;

  // Adds an Interface Description Block (if_name, if_tsresol 9, snaplen) and returns its id.
  // snaplen 0 is written as kUnlimitedSnaplen.
  std::uint32_t add_interface(const std::string& name, std::uint16_t linktype,
                              std::uint32_t snaplen);
  // Appends an EPB: `data` is what was captured (at most the frame), orig_len the frame's
  // length on the wire, ts_ns nanoseconds since the epoch, flags 0 for none, comment empty for
  // none. False once a write to the file has failed (the error() then says why).
  bool write(std::uint32_t iface, std::int64_t ts_ns, wire::Bytes data, std::uint32_t orig_len,
             std::uint32_t flags, std::string_view comment);
  void flush();
  // Flushes every live writer of the process (what the atexit handler does).
  static void flush_all();

  const std::string& path() const { return base_; }  // the first file, after naming rules
  std::vector<std::string> files() const;            // every file written so far, in order
  std::string error() const;
  std::uint64_t packets() const;

  // Nanoseconds since the epoch (CLOCK_REALTIME).
  static std::int64_t now_ns();

 private:
  struct Iface {
    std::string name;
    std::uint16_t linktype;
    std::uint32_t snaplen;
  };
  PcapngWriter() = default;
  bool open_file(const std::string& name, std::string& error);  // truncates, writes SHB + IDBs
  void append_shb();
  void append_idb(const Iface& i);
  void flush_locked();
  void rotate_locked();

  PcapngOptions opts_;
  mutable std::mutex mu_;
  std::string base_;
  int lock_fd_ = -1;  // the first file, kept open and flock()ed for the process's life
  int fd_ = -1;
  std::vector<std::string> files_;
  std::vector<Iface> ifaces_;
  std::vector<std::uint8_t> buf_;
  std::uint64_t file_bytes_ = 0;  // written to, or buffered for, the current file
  std::uint64_t file_packets_ = 0;
  std::uint64_t packets_ = 0;
  std::size_t buffered_packets_ = 0;
  std::chrono::steady_clock::time_point last_flush_;
  std::string error_;
};

// The name with `tag` inserted before the extension of its last component ("a/rc.pcapng",
// "123" -> "a/rc.123.pcapng"; no extension: appended).
std::string insert_before_extension(const std::string& path, const std::string& tag);

}  // namespace softrdma::pcap
