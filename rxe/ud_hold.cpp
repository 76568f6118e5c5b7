#include "rxe/ud_hold.h"

#include <algorithm>
#include <cstring>

namespace softrdma::rxe {

UdHold::~UdHold() {
  if (budget_ && !chunks_.empty()) {
    budget_->fetch_add(static_cast<std::int64_t>(chunks_.size()), std::memory_order_relaxed);
  }
}

bool UdHold::grow() {
  if (!budget_ || ring_.size() >= kMaxSlots) return false;
  if (budget_->fetch_sub(1, std::memory_order_relaxed) <= 0) {
    budget_->fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  // The held slots first, in order, so that the new ones follow the newest.
  std::rotate(ring_.begin(), ring_.begin() + static_cast<std::ptrdiff_t>(head_), ring_.end());
  head_ = 0;
  auto c = std::make_unique<Chunk>();
  for (std::size_t i = 0; i < kChunkSlots; ++i) {
    c->slots[i].bytes = c->bytes + i * kSlotBytes;
    ring_.push_back(&c->slots[i]);
  }
  chunks_.push_back(std::move(c));
  return true;
}

bool UdHold::hold(const netdev::Packet& raw, Clock::time_point until) {
  if (raw.len > kSlotBytes) return false;
  if (count_ == ring_.size() && !grow()) return false;
  Slot& s = *ring_[(head_ + count_) % ring_.size()];
  s.raw = raw;
  s.raw.data = s.bytes;
  s.raw.cap = kSlotBytes;
  std::memcpy(s.bytes, raw.data, raw.len);
  s.until = until;
  ++count_;
  return true;
}

void UdHold::pop() {
  head_ = (head_ + 1) % ring_.size();
  --count_;
}

std::size_t UdHold::clear() {
  const std::size_t n = count_;
  head_ = count_ = 0;
  return n;
}

}  // namespace softrdma::rxe
