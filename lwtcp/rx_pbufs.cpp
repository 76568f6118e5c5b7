#include "lwtcp/rx_pbufs.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <mutex>
#include <new>
#include <vector>

#include "lwip/pbuf.h"

namespace softrdma::lwtcp {

namespace {

constexpr std::size_t kMinShift = 12;  // 4 KiB
constexpr std::size_t kClasses = 5;    // 4, 8, 16, 32, 64 KiB
constexpr std::size_t kKeep = 32;      // freed blocks a class keeps

struct Block {
  pbuf_custom pc;  // first: lwIP hands the pbuf back as this
  std::uint8_t cls;
  // The frame's bytes follow, up to the class's size.
  std::uint8_t* data() { return reinterpret_cast<std::uint8_t*>(this + 1); }
};

std::size_t class_of(std::size_t len) {
  std::size_t c = 0;
  while ((std::size_t{1} << (kMinShift + c)) < len) ++c;
  return c;
}

struct Pool {
  std::mutex mu;
  std::array<std::vector<Block*>, kClasses> free;
  Pool() {
    for (auto& f : free) f.reserve(kKeep);
  }
};

Pool& pool() {
  static Pool* p = new Pool;  // never destroyed: lwIP may free a pbuf at any time
  return *p;
}

void give_back(pbuf* p) {
  auto* b = reinterpret_cast<Block*>(p);
  Pool& pl = pool();
  {
    std::lock_guard lock(pl.mu);
    auto& f = pl.free[b->cls];
    if (f.size() < kKeep) {
      f.push_back(b);
      return;
    }
  }
  ::operator delete(b);
}

}  // namespace

pbuf* rx_pbuf(const std::uint8_t* frame, std::size_t len) {
  if (len > 0xFFFF || len == 0) return nullptr;
  if (len <= kRxPbufSmall) {
    pbuf* p = pbuf_alloc(PBUF_RAW, static_cast<u16_t>(len), PBUF_RAM);
    if (p) pbuf_take(p, frame, static_cast<u16_t>(len));
    return p;
  }
  const std::size_t cls = class_of(len);
  if (cls >= kClasses) return nullptr;
  Block* b = nullptr;
  Pool& pl = pool();
  {
    std::lock_guard lock(pl.mu);
    auto& f = pl.free[cls];
    if (!f.empty()) {
      b = f.back();
      f.pop_back();
    }
  }
  const std::size_t cap = std::size_t{1} << (kMinShift + cls);
  if (!b) {
    b = static_cast<Block*>(::operator new(sizeof(Block) + cap, std::nothrow));
    if (!b) return nullptr;
    b->cls = static_cast<std::uint8_t>(cls);
  }
  std::memcpy(b->data(), frame, len);
  b->pc.custom_free_function = give_back;
  pbuf* p = pbuf_alloced_custom(PBUF_RAW, static_cast<u16_t>(len), PBUF_REF, &b->pc, b->data(),
                                static_cast<u16_t>(std::min<std::size_t>(cap, 0xFFFF)));
  if (!p) give_back(&b->pc.pbuf);
  return p;
}

std::size_t rx_pbufs_kept() {
  Pool& pl = pool();
  std::lock_guard lock(pl.mu);
  std::size_t n = 0;
  for (const auto& f : pl.free) n += f.size();
  return n;
}

}  // namespace softrdma::lwtcp
