#include "rxe/ud_hold.h"

#include <algorithm>
#include <cstring>

namespace softrdma::rxe {

UdHold::~UdHold() {
  if (budget_ && r_ && !r_->chunks.empty()) {
    budget_->fetch_add(static_cast<std::int64_t>(r_->chunks.size()), std::memory_order_relaxed);
  }
}

bool UdHold::grow() {
  Ring& r = *r_;
  if (r.ring.size() >= kMaxSlots) return false;
  if (budget_->fetch_sub(1, std::memory_order_relaxed) <= 0) {
    budget_->fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  // The held slots first, in order, so that the new ones follow the newest.
  std::rotate(r.ring.begin(), r.ring.begin() + static_cast<std::ptrdiff_t>(r.head), r.ring.end());
  r.head = 0;
  auto c = std::make_unique<Chunk>();
  for (std::size_t i = 0; i < kChunkSlots; ++i) {
    c->slots[i].bytes = c->bytes + i * kSlotBytes;
    r.ring.push_back(&c->slots[i]);
  }
  r.chunks.push_back(std::move(c));
  return true;
}

bool UdHold::hold(const netdev::Packet& raw, Clock::time_point until) {
  if (!budget_ || raw.len > kSlotBytes) return false;
  if (!r_) r_ = std::make_unique<Ring>();
  Ring& r = *r_;
  if (r.count == r.ring.size() && !grow()) return false;
  Slot& s = *r.ring[(r.head + r.count) % r.ring.size()];
  s.raw = raw;
  s.raw.data = s.bytes;
  s.raw.cap = kSlotBytes;
  std::memcpy(s.bytes, raw.data, raw.len);
  s.until = until;
  ++r.count;
  return true;
}

void UdHold::pop() {
  r_->head = (r_->head + 1) % r_->ring.size();
  --r_->count;
}

std::size_t UdHold::clear() {
  if (!r_) return 0;
  const std::size_t n = r_->count;
  r_->head = r_->count = 0;
  return n;
}

}  // namespace softrdma::rxe
