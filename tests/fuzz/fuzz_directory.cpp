// Fuzz target: the direct-placement directory (rxe/directory.h) as a sender reads it. The input
// publishes and withdraws QP and MR entries through the owner's API, asks DirectoryView whether
// WRITEs would be accepted, and may tamper with the shared bytes as a hostile or torn peer would.
// Until it tampers, every answer must match a model of what was published (and the host address
// must be the entry's address plus the offset); after that, the reader must only stay in bounds.
#include <sys/mman.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>

#include "rxe/directory.h"
#include "tests/fuzz/reader.h"

namespace {
using namespace softrdma;
using namespace softrdma::rxe;

// The layout rxe/directory.cpp uses (a 64-byte header, then 4096 QP and 16384 MR slots of 40
// bytes, the key the second 32-bit word): only to aim the tampering at live slots.
constexpr std::size_t kHeader = 64, kSlot = 40, kQpSlots = 4096, kMrSlots = 16384;
constexpr std::size_t kBytes = kHeader + (kQpSlots + kMrSlots) * kSlot;

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "fuzz_directory: %s\n", what);
  std::abort();
}

struct Shared {
  std::unique_ptr<Directory> dir;
  std::uint8_t* rw = nullptr;        // the owner's bytes, to tamper with
  const std::uint8_t* ro = nullptr;  // what a sender maps
  std::size_t len = 0;
  void open() {
    std::string error;
    dir = Directory::create(error);
    if (!dir) fail(error.c_str());
    len = kBytes;
    rw = static_cast<std::uint8_t*>(
        mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, dir->fd(), 0));
    ro = static_cast<const std::uint8_t*>(mmap(nullptr, len, PROT_READ, MAP_SHARED, dir->fd(), 0));
    if (rw == MAP_FAILED || ro == MAP_FAILED) fail("mmap of the directory failed");
  }
  void close() {
    munmap(rw, len);
    munmap(const_cast<std::uint8_t*>(ro), len);
    dir.reset();
  }
};

netdev::IpAddr peer_of(std::uint8_t i) {
  return netdev::IpAddr::v4(0x7F010000u + (i & 3));
}
QpType type_of(std::uint8_t i) {
  return i & 1 ? QpType::kUc : QpType::kRc;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static Shared s;
  if (!s.dir) s.open();
  fuzz::Reader r{data, size};
  std::map<std::uint32_t, DirQp> qps;
  std::map<std::uint32_t, DirMr> mrs;
  bool tampered = false;
  for (int ops = 0; !r.empty() && ops < 256; ++ops) {
    const std::uint8_t op = r.u8();
    const std::uint32_t key = 1 + r.u8() % 32;  // few keys, so that queries find them
    switch (op % 6) {
      case 0: {  // publish a QP
        DirQp q;
        const std::uint8_t f = r.u8();
        q.pd = f >> 4;
        q.type = type_of(f);
        q.remote_write = f & 2;
        q.dest_qpn = 0x100 + r.u8() % 4;
        q.peer = peer_of(f >> 2);
        s.dir->set_qp(key, q);
        qps[key] = q;
        break;
      }
      case 1:
        s.dir->remove_qp(key);
        qps.erase(key);
        break;
      case 2: {  // publish an MR
        DirMr m;
        m.rkey = key;
        m.pd = r.u8() % 4;
        m.iova = r.u64();
        m.length = r.u64() >> (r.u8() % 64);
        m.addr = r.u64();
        s.dir->set_mr(m);
        mrs[key] = m;
        break;
      }
      case 3:
        s.dir->remove_mr(key);
        mrs.erase(key);
        break;
      case 4: {  // a word of a live slot (or of the header) overwritten by a hostile peer
        const bool mr_table = r.u8() & 1;
        const std::size_t base = kHeader + (mr_table ? kQpSlots * kSlot : 0);
        const std::size_t slots = mr_table ? kMrSlots : kQpSlots;
        std::size_t at = r.u8() % 16 * 4;  // the header, unless a slot holds the key
        for (std::size_t i = 0; i < slots; ++i) {
          std::uint32_t k;
          std::memcpy(&k, s.rw + base + i * kSlot + 4, 4);
          if (k == key) {
            at = base + i * kSlot + r.u8() % (kSlot / 4) * 4;
            break;
          }
        }
        const std::uint32_t v = r.u32();
        std::memcpy(s.rw + at, &v, 4);
        tampered = true;
        break;
      }
      default: {  // would this WRITE be accepted?
        const std::uint8_t f = r.u8();
        const std::uint32_t rkey = 1 + r.u8() % 32, src_qpn = 0x100 + r.u8() % 4;
        const netdev::IpAddr src = peer_of(f >> 2);
        const QpType type = type_of(f);
        std::uint64_t va = r.u64(), len = r.u64() >> (r.u8() % 64);
        if (auto m = mrs.find(rkey); m != mrs.end() && (f & 2)) va = m->second.iova + (va >> 40);
        std::uint64_t host = 0;
        const bool yes = DirectoryView(std::span(s.ro, s.len))
                             .writable(key, type, src_qpn, src, rkey, va, len, host);
        if (tampered) break;
        const auto q = qps.find(key);
        const auto m = mrs.find(rkey);
        const bool expect = q != qps.end() && m != mrs.end() && q->second.type == type &&
                            q->second.remote_write && q->second.dest_qpn == src_qpn &&
                            q->second.peer == src && q->second.pd == m->second.pd &&
                            va >= m->second.iova && len <= m->second.length &&
                            va - m->second.iova <= m->second.length - len;
        if (yes != expect) fail("the directory's answer differs from what was published");
        if (yes && host != m->second.addr + (va - m->second.iova)) fail("wrong host address");
      }
    }
  }
  if (tampered) {  // start the next input from a directory of the owner's making
    s.close();
    s.open();
  } else {
    for (const auto& [k, q] : qps) s.dir->remove_qp(k);
    for (const auto& [k, m] : mrs) s.dir->remove_mr(k);
  }
  return 0;
}
