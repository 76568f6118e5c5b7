#include "netdev/shm_ring.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>

namespace softrdma::netdev {

namespace {

constexpr std::uint64_t kMagic = 0x676e69526d727253ull;  // "SrmRing" (little-endian)
constexpr std::uint32_t kVersion = 2;
constexpr std::size_t kHeaderBytes = 256;
constexpr std::size_t kAlign = 64;

// One datagram in the ring, at a 64-byte boundary. size 0: the rest of the ring is skipped.
struct Record {
  std::uint32_t size;  // the whole record, header included, a multiple of kAlign
  std::uint32_t len;   // datagram bytes after the header
  std::uint8_t src[16];
  std::uint8_t dst[16];
  std::uint16_t src_port, dst_port;
  std::uint8_t traffic_class, hop_limit;
  std::uint8_t flags;  // kNoIcrc, kPlaced
  std::uint8_t reserved;
};
constexpr std::uint8_t kNoIcrc = 1;  // the sender left the ICRC out
constexpr std::uint8_t kPlaced = 2;  // the sender placed the payload itself (Packet::placed)
static_assert(sizeof(Record) == 48);

std::uint64_t record_size(std::uint32_t len) {
  return (sizeof(Record) + len + kAlign - 1) / kAlign * kAlign;
}

bool valid_size(std::size_t bytes) {
  return bytes >= ShmRing::kMinBytes && bytes <= ShmRing::kMaxBytes && (bytes & (bytes - 1)) == 0;
}

}  // namespace

struct ShmRing::Header {
  std::uint64_t magic;
  std::uint32_t version;
  std::uint32_t reserved;
  std::uint64_t bytes;
  alignas(64) std::atomic<std::uint64_t> tail;  // written by the producer
  alignas(64) std::atomic<std::uint64_t> head;  // written by the consumer
  alignas(64) std::atomic<std::uint32_t> waiting;
  std::atomic<std::uint32_t> attached;
  std::atomic<std::uint32_t> closed;
  std::atomic<std::uint32_t> writers;  // the producer's open write sections
};
static_assert(std::atomic<std::uint64_t>::is_always_lock_free);  // address-free across processes

ShmRing::Header* ShmRing::hdr() const {
  static_assert(sizeof(Header) <= kHeaderBytes);
  return static_cast<Header*>(map_);
}
std::uint8_t* ShmRing::data() const {
  return static_cast<std::uint8_t*>(map_) + kHeaderBytes;
}

std::unique_ptr<ShmRing> ShmRing::create(std::size_t bytes, std::string& error) {
  if (!valid_size(bytes)) {
    error = "shared-memory ring: bad size " + std::to_string(bytes);
    return nullptr;
  }
  std::unique_ptr<ShmRing> r(new ShmRing());
  r->fd_ = memfd_create("softrdma-ring", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  r->map_len_ = kHeaderBytes + bytes;
  auto fail = [&](const char* what) {
    error = std::string("shared-memory ring: ") + what + ": " + std::strerror(errno);
    return nullptr;
  };
  if (r->fd_ < 0) return fail("memfd_create");
  if (ftruncate(r->fd_, static_cast<off_t>(r->map_len_)) != 0) return fail("ftruncate");
  // The consumer refuses a ring that could shrink under it (a read past the end is a SIGBUS).
  if (fcntl(r->fd_, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    return fail("F_ADD_SEALS");
  }
  void* m = mmap(nullptr, r->map_len_, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd_, 0);
  if (m == MAP_FAILED) return fail("mmap");
  r->map_ = m;
  r->bytes_ = bytes;
  Header* h = new (m) Header{};
  h->magic = kMagic;
  h->version = kVersion;
  h->bytes = bytes;
  return r;
}

std::unique_ptr<ShmRing> ShmRing::attach(int fd, std::string& error) {
  std::unique_ptr<ShmRing> r(new ShmRing());
  r->fd_ = fd;
  struct stat st {};
  const int seals = fcntl(fd, F_GET_SEALS);
  if (fstat(fd, &st) != 0 || seals < 0 || !(seals & F_SEAL_SHRINK) || st.st_size < 0 ||
      !valid_size(static_cast<std::size_t>(st.st_size) - kHeaderBytes)) {
    error = "shared-memory ring: not a sealed ring of a valid size";
    return nullptr;
  }
  r->map_len_ = static_cast<std::size_t>(st.st_size);
  void* m = mmap(nullptr, r->map_len_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (m == MAP_FAILED) {
    error = std::string("shared-memory ring: mmap: ") + std::strerror(errno);
    return nullptr;
  }
  r->map_ = m;
  r->bytes_ = r->map_len_ - kHeaderBytes;
  const Header* h = r->hdr();
  if (h->magic != kMagic || h->version != kVersion || h->bytes != r->bytes_) {
    error = "shared-memory ring: bad header";
    return nullptr;
  }
  r->head_ = h->head.load(std::memory_order_acquire);
  r->tail_seen_ = r->head_;
  return r;
}

ShmRing::~ShmRing() {
  if (map_) munmap(map_, map_len_);
  if (fd_ >= 0) ::close(fd_);
}

bool ShmRing::push(const Packet& p, bool icrc_filled) {
  if (p.len > kMaxDatagram) return false;
  const std::uint64_t need = record_size(p.len);
  std::uint64_t pos = tail_ & (bytes_ - 1);
  const std::uint64_t skip = need > bytes_ - pos ? bytes_ - pos : 0;
  if (tail_ + skip + need - head_seen_ > bytes_) {
    head_seen_ = hdr()->head.load(std::memory_order_acquire);
    if (tail_ + skip + need - head_seen_ > bytes_) return false;
  }
  if (skip) {
    const Record wrap{};
    std::memcpy(data() + pos, &wrap, sizeof wrap);
    tail_ += skip;
    pos = 0;
  }
  Record r{};
  r.size = static_cast<std::uint32_t>(need);
  r.len = p.len;
  std::memcpy(r.src, p.src.bytes.data(), 16);
  std::memcpy(r.dst, p.dst.bytes.data(), 16);
  r.src_port = p.src_port;
  r.dst_port = p.dst_port;
  r.traffic_class = p.traffic_class;
  r.hop_limit = p.hop_limit;
  r.flags = static_cast<std::uint8_t>((icrc_filled ? 0 : kNoIcrc) | (p.placed ? kPlaced : 0));
  std::memcpy(data() + pos, &r, sizeof r);
  std::memcpy(data() + pos + sizeof r, p.data, p.len);
  tail_ += need;
  return true;
}

bool ShmRing::publish() {
  Header* h = hdr();
  h->tail.store(tail_, std::memory_order_release);
  // Pairs with arm(): either the consumer sees the new tail, or we see its request.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  return h->waiting.load(std::memory_order_relaxed) != 0 &&
         h->waiting.exchange(0, std::memory_order_acq_rel) != 0;
}

void ShmRing::begin_write() {
  hdr()->writers.fetch_add(1, std::memory_order_seq_cst);
  // Pairs with the consumer's fence in writers(): either it sees this section, or the section
  // sees what the consumer changed before it looked.
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

void ShmRing::end_write() {
  hdr()->writers.fetch_sub(1, std::memory_order_release);
}

std::uint32_t ShmRing::writers() const {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  return hdr()->writers.load(std::memory_order_acquire);
}

bool ShmRing::attached() const {
  return hdr()->attached.load(std::memory_order_acquire) != 0;
}
bool ShmRing::closed() const {
  return hdr()->closed.load(std::memory_order_acquire) != 0;
}
void ShmRing::set_attached() {
  hdr()->attached.store(1, std::memory_order_release);
}
void ShmRing::close() {
  hdr()->closed.store(1, std::memory_order_release);
}

bool ShmRing::peek(Packet& view, bool& icrc_filled) {
  while (!broken_) {
    if (head_ == tail_seen_) {
      tail_seen_ = hdr()->tail.load(std::memory_order_acquire);
      if (tail_seen_ - head_ > bytes_) broken_ = true;  // also catches a tail behind the head
      if (broken_ || head_ == tail_seen_) break;
    }
    const std::uint64_t pos = head_ & (bytes_ - 1);
    Record r;
    std::memcpy(&r, data() + pos, sizeof r);  // read once: the producer is another process
    if (r.size == 0) {
      head_ += bytes_ - pos;
      if (head_ > tail_seen_) broken_ = true;
      continue;
    }
    if (r.size % kAlign != 0 || r.size < record_size(0) || pos + r.size > bytes_ ||
        head_ + r.size > tail_seen_ || r.len > kMaxDatagram || record_size(r.len) != r.size) {
      broken_ = true;
      break;
    }
    std::memcpy(view.src.bytes.data(), r.src, 16);
    std::memcpy(view.dst.bytes.data(), r.dst, 16);
    view.src_port = r.src_port;
    view.dst_port = r.dst_port;
    view.traffic_class = r.traffic_class;
    view.hop_limit = r.hop_limit;
    icrc_filled = !(r.flags & kNoIcrc);
    view.placed = (r.flags & kPlaced) != 0;
    view.host_local = true;
    view.data = data() + pos + sizeof r;
    view.len = r.len;
    view.cap = r.len;
    peeked_ = r.size;
    return true;
  }
  return false;
}

void ShmRing::consume() {
  head_ += peeked_;
  peeked_ = 0;
}

void ShmRing::release() {
  hdr()->head.store(head_, std::memory_order_release);
}

bool ShmRing::arm() {
  Header* h = hdr();
  h->waiting.store(1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  armed_ = true;
  // With datagrams waiting the request stands anyway (withdrawing it would race with a producer
  // taking it): at worst one bell too many.
  return h->tail.load(std::memory_order_acquire) == head_;
}

bool ShmRing::wake_taken() {
  if (!armed_ || hdr()->waiting.load(std::memory_order_acquire) != 0) return false;
  armed_ = false;
  return true;
}

bool ShmRing::empty() const {
  return hdr()->tail.load(std::memory_order_acquire) == head_;
}

}  // namespace softrdma::netdev
