#include "pcap/pcapng_writer.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

namespace softrdma::pcap {

namespace {

constexpr std::uint32_t kShbType = 0x0A0D0D0A;
constexpr std::uint32_t kIdbType = 0x00000001;
constexpr std::uint32_t kEpbType = 0x00000006;
constexpr std::uint32_t kByteOrderMagic = 0x1A2B3C4D;
constexpr std::uint16_t kOptEnd = 0, kOptComment = 1, kShbUserAppl = 4, kIfName = 2, kIfTsresol = 9,
                        kEpbFlags = 2;

std::size_t pad4(std::size_t n) {
  return (n + 3) & ~std::size_t{3};
}

// Host byte order, as the byte-order magic in the SHB announces.
void put16(std::vector<std::uint8_t>& b, std::uint16_t v) {
  const auto* p = reinterpret_cast<const std::uint8_t*>(&v);
  b.insert(b.end(), p, p + 2);
}
void put32(std::vector<std::uint8_t>& b, std::uint32_t v) {
  const auto* p = reinterpret_cast<const std::uint8_t*>(&v);
  b.insert(b.end(), p, p + 4);
}
void put_bytes(std::vector<std::uint8_t>& b, const void* data, std::size_t n) {
  const auto* p = static_cast<const std::uint8_t*>(data);
  b.insert(b.end(), p, p + n);
  b.insert(b.end(), pad4(n) - n, std::uint8_t{0});
}
void put_option(std::vector<std::uint8_t>& b, std::uint16_t code, const void* data, std::size_t n) {
  put16(b, code);
  put16(b, static_cast<std::uint16_t>(n));
  put_bytes(b, data, n);
}
std::size_t option_len(std::size_t n) {
  return 4 + pad4(n);
}

// Live writers, for the atexit flush. Leaked on purpose: it must outlive static destructors.
struct Registry {
  std::mutex mu;
  std::vector<PcapngWriter*> writers;
};
Registry& registry() {
  static Registry* r = new Registry();
  return *r;
}
void flush_at_exit() {
  PcapngWriter::flush_all();
}

std::string expand_pid(const std::string& path) {
  std::string out;
  for (std::size_t i = 0; i < path.size(); ++i) {
    if (path[i] == '%' && i + 1 < path.size() && path[i + 1] == 'p') {
      out += std::to_string(getpid());
      ++i;
    } else {
      out += path[i];
    }
  }
  return out;
}

}  // namespace

std::size_t format_annotation(const Annotation& a, char* buf, std::size_t cap) {
  std::size_t n = 0;
  auto add = [&](std::string_view s) {
    const std::size_t k = std::min(s.size(), cap - n);
    std::memcpy(buf + n, s.data(), k);
    n += k;
  };
  add(kAnnotationPrefix);
  add(a.tx ? "dir=tx" : "dir=rx");
  if (!a.dev.empty()) {
    add(" dev=");
    add(a.dev);
  }
  if (a.qp) {
    char q[16];
    const int k = std::snprintf(q, sizeof q, " qp=0x%06x", *a.qp & 0xFFFFFFu);
    add(std::string_view(q, static_cast<std::size_t>(k)));
  }
  if (!a.fault.empty()) {
    add(" fault=");
    add(a.fault);
  }
  if (!a.drop.empty()) {
    add(" drop=");
    add(a.drop);
  }
  if (a.retrans) add(" retrans=1");
  return n;
}

std::string insert_before_extension(const std::string& path, const std::string& tag) {
  const std::size_t slash = path.rfind('/');
  const std::size_t start = slash == std::string::npos ? 0 : slash + 1;
  const std::size_t dot = path.rfind('.');
  if (dot == std::string::npos || dot <= start) return path + "." + tag;
  return path.substr(0, dot) + "." + tag + path.substr(dot);
}

std::int64_t PcapngWriter::now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return std::int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

std::unique_ptr<PcapngWriter> PcapngWriter::open(const std::string& path, std::string& error,
                                                 PcapngOptions opts) {
  std::unique_ptr<PcapngWriter> w(new PcapngWriter());
  w->opts_ = opts;
  std::string name = opts.per_process_name ? expand_pid(path) : path;
  int fd = ::open(name.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    error = name + ": " + std::strerror(errno);
    return nullptr;
  }
  if (opts.per_process_name && flock(fd, LOCK_EX | LOCK_NB) != 0) {
    // Another process is writing this file: take a name of our own.
    ::close(fd);
    name = insert_before_extension(name, std::to_string(getpid()));
    fd = ::open(name.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
      error = name + ": " + std::strerror(errno);
      return nullptr;
    }
    [[maybe_unused]] int r = flock(fd, LOCK_EX | LOCK_NB);
  }
  if (ftruncate(fd, 0) != 0) {
    error = name + ": " + std::strerror(errno);
    ::close(fd);
    return nullptr;
  }
  w->base_ = name;
  w->lock_fd_ = fd;
  w->fd_ = fd;
  w->files_.push_back(name);
  w->buf_.reserve(opts.buffer_bytes + 16384);
  w->last_flush_ = std::chrono::steady_clock::now();
  w->append_shb();
  w->flush_locked();
  {
    static std::once_flag once;
    std::call_once(once, [] { std::atexit(flush_at_exit); });
    Registry& r = registry();
    std::lock_guard lock(r.mu);
    r.writers.push_back(w.get());
  }
  return w;
}

PcapngWriter::~PcapngWriter() {
  {
    Registry& r = registry();
    std::lock_guard lock(r.mu);
    r.writers.erase(std::remove(r.writers.begin(), r.writers.end(), this), r.writers.end());
  }
  std::lock_guard lock(mu_);
  flush_locked();
  if (fd_ >= 0 && fd_ != lock_fd_) ::close(fd_);
  if (lock_fd_ >= 0) ::close(lock_fd_);
}

void PcapngWriter::flush_all() {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  for (PcapngWriter* w : r.writers) w->flush();
}

void PcapngWriter::append_shb() {
  static constexpr char kAppl[] = "softrdma " SOFTRDMA_VERSION;
  const std::size_t appl = sizeof kAppl - 1;
  const auto total = static_cast<std::uint32_t>(28 + option_len(appl) + 4);
  const std::size_t start = buf_.size();
  put32(buf_, kShbType);
  put32(buf_, total);
  put32(buf_, kByteOrderMagic);
  put16(buf_, 1);           // major
  put16(buf_, 0);           // minor
  put32(buf_, 0xFFFFFFFF);  // section length: unknown
  put32(buf_, 0xFFFFFFFF);
  put_option(buf_, kShbUserAppl, kAppl, appl);
  put32(buf_, kOptEnd);
  put32(buf_, total);
  file_bytes_ += buf_.size() - start;
}

void PcapngWriter::append_idb(const Iface& i) {
  const std::uint8_t tsresol = 9;  // nanoseconds
  const auto total =
      static_cast<std::uint32_t>(16 + option_len(i.name.size()) + option_len(1) + 4 + 4);
  const std::size_t start = buf_.size();
  put32(buf_, kIdbType);
  put32(buf_, total);
  put16(buf_, i.linktype);
  put16(buf_, 0);
  put32(buf_, i.snaplen);
  put_option(buf_, kIfName, i.name.data(), i.name.size());
  put_option(buf_, kIfTsresol, &tsresol, 1);
  put32(buf_, kOptEnd);
  put32(buf_, total);
  file_bytes_ += buf_.size() - start;
}

std::uint32_t PcapngWriter::add_interface(const std::string& name, std::uint16_t linktype,
                                          std::uint32_t snaplen) {
  std::lock_guard lock(mu_);
  ifaces_.push_back(Iface{name, linktype, snaplen ? snaplen : kUnlimitedSnaplen});
  append_idb(ifaces_.back());
  return static_cast<std::uint32_t>(ifaces_.size() - 1);
}

bool PcapngWriter::write(std::uint32_t iface, std::int64_t ts_ns, wire::Bytes data,
                         std::uint32_t orig_len, std::uint32_t flags, std::string_view comment) {
  std::lock_guard lock(mu_);
  if (fd_ < 0 || iface >= ifaces_.size()) return false;
  comment = comment.substr(0, 0xFFFF);
  const std::size_t total = 28 + pad4(data.size()) +
                            (comment.empty() ? 0 : option_len(comment.size())) +
                            (flags ? option_len(4) : 0) + ((flags || !comment.empty()) ? 4 : 0) + 4;
  if (opts_.rotate_bytes && file_packets_ > 0 && file_bytes_ + total > opts_.rotate_bytes) {
    rotate_locked();
    if (fd_ < 0) return false;
  }
  const auto ts = static_cast<std::uint64_t>(ts_ns);
  put32(buf_, kEpbType);
  put32(buf_, static_cast<std::uint32_t>(total));
  put32(buf_, iface);
  put32(buf_, static_cast<std::uint32_t>(ts >> 32));
  put32(buf_, static_cast<std::uint32_t>(ts));
  put32(buf_, static_cast<std::uint32_t>(data.size()));
  put32(buf_, std::max(orig_len, static_cast<std::uint32_t>(data.size())));
  put_bytes(buf_, data.data(), data.size());
  if (!comment.empty()) put_option(buf_, kOptComment, comment.data(), comment.size());
  if (flags) put_option(buf_, kEpbFlags, &flags, 4);
  if (flags || !comment.empty()) put32(buf_, kOptEnd);
  put32(buf_, static_cast<std::uint32_t>(total));
  file_bytes_ += total;
  ++file_packets_;
  ++packets_;
  ++buffered_packets_;
  if (buf_.size() >= opts_.buffer_bytes || buffered_packets_ >= opts_.flush_packets ||
      std::chrono::steady_clock::now() - last_flush_ >= opts_.flush_interval) {
    flush_locked();
  }
  return error_.empty();
}

void PcapngWriter::flush() {
  std::lock_guard lock(mu_);
  flush_locked();
}

void PcapngWriter::flush_locked() {
  std::size_t off = 0;
  while (fd_ >= 0 && off < buf_.size()) {
    const ssize_t n = ::write(fd_, buf_.data() + off, buf_.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (error_.empty()) error_ = files_.back() + ": " + std::strerror(errno);
      break;
    }
    off += static_cast<std::size_t>(n);
  }
  buf_.clear();
  buffered_packets_ = 0;
  last_flush_ = std::chrono::steady_clock::now();
}

void PcapngWriter::rotate_locked() {
  flush_locked();
  if (fd_ != lock_fd_) ::close(fd_);
  fd_ = -1;
  const std::string name = insert_before_extension(base_, std::to_string(files_.size()));
  fd_ = ::open(name.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    if (error_.empty()) error_ = name + ": " + std::strerror(errno);
    return;
  }
  files_.push_back(name);
  file_bytes_ = 0;
  file_packets_ = 0;
  append_shb();
  for (const Iface& i : ifaces_) append_idb(i);
}

std::vector<std::string> PcapngWriter::files() const {
  std::lock_guard lock(mu_);
  return files_;
}

std::string PcapngWriter::error() const {
  std::lock_guard lock(mu_);
  return error_;
}

std::uint64_t PcapngWriter::packets() const {
  std::lock_guard lock(mu_);
  return packets_;
}

}  // namespace softrdma::pcap
