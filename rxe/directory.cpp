#include "rxe/directory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "core/mr.h"
#include "rxe/uses_core.h"

namespace softrdma::rxe {

namespace {

constexpr std::uint64_t kMagic = 0x3176726944727253ull;  // "SrDirv1"
constexpr std::uint32_t kVersion = 1;
constexpr std::uint32_t kQpSlots = 4096;  // powers of two
constexpr std::uint32_t kMrSlots = 16384;
constexpr std::uint32_t kProbe = 32;            // open addressing: slots tried per key
constexpr std::uint32_t kEmpty = 0;             // never a QPN of an RC/UC QP, nor an rkey
constexpr std::uint32_t kRemoved = 0xFFFFFFFF;  // never a QPN (24 bits), nor an rkey

struct Header {
  std::uint64_t magic;
  std::uint32_t version;
  std::uint32_t qp_slots;
  std::uint32_t mr_slots;
  std::uint32_t reserved[11];
};
static_assert(sizeof(Header) == 64);

// Slots are seqlocked: seq is odd while the owner writes one.
struct QpSlot {
  std::atomic<std::uint32_t> seq, key, pd, flags, dest_qpn, reserved;
  std::atomic<std::uint64_t> peer[2];
};
struct MrSlot {
  std::atomic<std::uint32_t> seq, key, pd, reserved;
  std::atomic<std::uint64_t> iova, length, addr;
};
static_assert(sizeof(QpSlot) == 40 && sizeof(MrSlot) == 40);
static_assert(std::atomic<std::uint64_t>::is_always_lock_free);  // address-free across processes

constexpr std::uint32_t kFlagRemoteWrite = 1u << 8;  // low byte: QpType; high 16 bits: P_Key

constexpr std::size_t kQpOffset = sizeof(Header);
constexpr std::size_t kMrOffset = kQpOffset + std::size_t{kQpSlots} * sizeof(QpSlot);
constexpr std::size_t kBytes = kMrOffset + std::size_t{kMrSlots} * sizeof(MrSlot);

QpSlot* qp_table(void* base) {
  return reinterpret_cast<QpSlot*>(static_cast<std::uint8_t*>(base) + kQpOffset);
}
MrSlot* mr_table(void* base) {
  return reinterpret_cast<MrSlot*>(static_cast<std::uint8_t*>(base) + kMrOffset);
}
const QpSlot* qp_table(const std::uint8_t* base) {
  return reinterpret_cast<const QpSlot*>(base + kQpOffset);
}
const MrSlot* mr_table(const std::uint8_t* base) {
  return reinterpret_cast<const MrSlot*>(base + kMrOffset);
}

std::uint32_t home(std::uint32_t key, std::uint32_t slots) {
  return (key * 0x9E3779B1u) & (slots - 1);
}

std::uint64_t half(const netdev::IpAddr& a, int i) {
  std::uint64_t v;
  std::memcpy(&v, a.bytes.data() + 8 * i, 8);
  return v;
}

// The owner's side of the seqlock.
template <class Slot, class Fill>
void write_slot(Slot& s, Fill fill) {
  const std::uint32_t seq = s.seq.load(std::memory_order_relaxed);
  s.seq.store(seq + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  fill(s);
  s.seq.store(seq + 2, std::memory_order_release);
}

// Finds key's slot, or (insert) the first free one on its path. nullptr when neither.
template <class Slot>
Slot* owner_find(Slot* table, std::uint32_t slots, std::uint32_t key, bool insert) {
  Slot* free = nullptr;
  for (std::uint32_t i = 0; i < kProbe; ++i) {
    Slot& s = table[(home(key, slots) + i) & (slots - 1)];
    const std::uint32_t k = s.key.load(std::memory_order_relaxed);
    if (k == key) return &s;
    if (k == kRemoved && !free) free = &s;
    if (k == kEmpty) return insert ? (free ? free : &s) : nullptr;
  }
  return insert ? free : nullptr;
}

// Publishes (or changes) key's entry; a changed one waits out the windows open on it. An entry
// that finds no free slot on its path is not published.
template <class Slot, class Fill>
void put(Slot* table, std::uint32_t slots, std::uint32_t key, const std::function<void()>& quiesce,
         Fill fill) {
  if (key == kEmpty || key == kRemoved) return;
  Slot* s = owner_find(table, slots, key, true);
  if (!s) return;
  const bool existed = s->key.load(std::memory_order_relaxed) == key;
  write_slot(*s, [&](Slot& x) {
    x.key.store(key, std::memory_order_relaxed);
    fill(x);
  });
  if (existed && quiesce) quiesce();
}

// Withdraws key's entry, then waits out the windows open on it.
template <class Slot>
void withdraw(Slot* table, std::uint32_t slots, std::uint32_t key,
              const std::function<void()>& quiesce) {
  if (key == kEmpty || key == kRemoved) return;
  Slot* s = owner_find(table, slots, key, false);
  if (!s) return;
  write_slot(*s, [](Slot& x) { x.key.store(kRemoved, std::memory_order_relaxed); });
  if (quiesce) quiesce();
}

// The reader's side: copies key's slot out through the seqlock. False when absent or torn.
template <class Slot, class Copy>
bool reader_find(const Slot* table, std::uint32_t slots, std::uint32_t key, Copy copy) {
  for (std::uint32_t i = 0; i < kProbe; ++i) {
    const Slot& s = table[(home(key, slots) + i) & (slots - 1)];
    const std::uint32_t k = s.key.load(std::memory_order_relaxed);
    if (k == kEmpty) return false;
    if (k != key) continue;
    const std::uint32_t seq = s.seq.load(std::memory_order_acquire);
    if (seq & 1) return false;
    const bool same_key = s.key.load(std::memory_order_relaxed) == key;
    copy(s);
    std::atomic_thread_fence(std::memory_order_acquire);
    return same_key && s.seq.load(std::memory_order_relaxed) == seq;
  }
  return false;
}

}  // namespace

std::unique_ptr<Directory> Directory::create(std::string& error) {
  std::unique_ptr<Directory> d(new Directory());
  auto fail = [&](const char* what) {
    error = std::string("placement directory: ") + what + ": " + std::strerror(errno);
    return nullptr;
  };
  d->fd_ = memfd_create("softrdma-directory", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (d->fd_ < 0) return fail("memfd_create");
  if (ftruncate(d->fd_, static_cast<off_t>(kBytes)) != 0) return fail("ftruncate");
  if (fcntl(d->fd_, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    return fail("F_ADD_SEALS");
  }
  void* m = mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_SHARED, d->fd_, 0);
  if (m == MAP_FAILED) return fail("mmap");
  d->map_ = m;
  d->len_ = kBytes;
  auto* h = static_cast<Header*>(m);  // the rest is zero: every slot empty
  h->version = kVersion;
  h->qp_slots = kQpSlots;
  h->mr_slots = kMrSlots;
  std::atomic_thread_fence(std::memory_order_release);
  h->magic = kMagic;
  return d;
}

Directory::~Directory() {
  if (map_) munmap(map_, len_);
  if (fd_ >= 0) close(fd_);
}

void Directory::set_qp(std::uint32_t qpn, const DirQp& q) {
  std::lock_guard lock(mu_);
  put(qp_table(map_), kQpSlots, qpn, quiesce_, [&](QpSlot& x) {
    x.pd.store(q.pd, std::memory_order_relaxed);
    x.flags.store(static_cast<std::uint32_t>(q.type) | (q.remote_write ? kFlagRemoteWrite : 0) |
                      std::uint32_t{q.pkey} << 16,
                  std::memory_order_relaxed);
    x.dest_qpn.store(q.dest_qpn, std::memory_order_relaxed);
    x.peer[0].store(half(q.peer, 0), std::memory_order_relaxed);
    x.peer[1].store(half(q.peer, 1), std::memory_order_relaxed);
  });
}

void Directory::remove_qp(std::uint32_t qpn) {
  std::lock_guard lock(mu_);
  withdraw(qp_table(map_), kQpSlots, qpn, quiesce_);
}

void Directory::set_mr(const DirMr& m) {
  std::lock_guard lock(mu_);
  put(mr_table(map_), kMrSlots, m.rkey, quiesce_, [&](MrSlot& x) {
    x.pd.store(m.pd, std::memory_order_relaxed);
    x.iova.store(m.iova, std::memory_order_relaxed);
    x.length.store(m.length, std::memory_order_relaxed);
    x.addr.store(m.addr, std::memory_order_relaxed);
  });
}

void Directory::remove_mr(std::uint32_t rkey) {
  std::lock_guard lock(mu_);
  withdraw(mr_table(map_), kMrSlots, rkey, quiesce_);
}

DirectoryView::DirectoryView(std::span<const std::uint8_t> bytes) : bytes_(bytes) {
  Header h;
  if (bytes_.size() < kBytes) {
    bytes_ = {};
    return;
  }
  std::memcpy(&h, bytes_.data(), sizeof h);
  if (h.magic != kMagic || h.version != kVersion || h.qp_slots != kQpSlots ||
      h.mr_slots != kMrSlots) {
    bytes_ = {};
  }
}

bool DirectoryView::writable(std::uint32_t qpn, QpType type, std::uint32_t src_qpn,
                             const netdev::IpAddr& src, std::uint32_t rkey, std::uint64_t msg_va,
                             std::uint64_t msg_len, std::uint64_t& host, std::uint16_t pkey) const {
  if (bytes_.empty() || qpn == kEmpty || qpn == kRemoved || rkey == kEmpty || rkey == kRemoved) {
    return false;
  }
  const QpSlot* qps = qp_table(bytes_.data());
  const MrSlot* mrs = mr_table(bytes_.data());
  std::uint32_t qp_pd = 0, flags = 0, dest = 0;
  std::uint64_t peer[2] = {};
  if (!reader_find(qps, kQpSlots, qpn, [&](const QpSlot& s) {
        qp_pd = s.pd.load(std::memory_order_relaxed);
        flags = s.flags.load(std::memory_order_relaxed);
        dest = s.dest_qpn.load(std::memory_order_relaxed);
        peer[0] = s.peer[0].load(std::memory_order_relaxed);
        peer[1] = s.peer[1].load(std::memory_order_relaxed);
      })) {
    return false;
  }
  if ((flags & 0xFF) != static_cast<std::uint32_t>(type) || !(flags & kFlagRemoteWrite) ||
      !pkey_match(pkey, static_cast<std::uint16_t>(flags >> 16)) || dest != src_qpn ||
      peer[0] != half(src, 0) || peer[1] != half(src, 1)) {
    return false;
  }
  std::uint32_t mr_pd = 0;
  std::uint64_t iova = 0, length = 0, addr = 0;
  if (!reader_find(mrs, kMrSlots, rkey, [&](const MrSlot& s) {
        mr_pd = s.pd.load(std::memory_order_relaxed);
        iova = s.iova.load(std::memory_order_relaxed);
        length = s.length.load(std::memory_order_relaxed);
        addr = s.addr.load(std::memory_order_relaxed);
      })) {
    return false;
  }
  if (mr_pd != qp_pd || !in_range(msg_va, msg_len, iova, length)) {
    return false;
  }
  host = addr + (msg_va - iova);
  return true;
}

}  // namespace softrdma::rxe
