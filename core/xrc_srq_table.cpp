// core::XrcSrqTable (core/xrc_srq_table.h). A reader counts itself on the slot before it reads
// the slot's SRQ, and unpublish() clears the SRQ before it reads the count (all sequentially
// consistent): either the reader sees no SRQ, or unpublish() sees its hold and waits for it.
#include "core/xrc_srq_table.h"

#include <thread>

#include "core/srq.h"

namespace softrdma::core {

XrcSrqTable::XrcSrqTable(std::uint32_t slots)
    : slots_(std::make_unique<Slot[]>(slots)), size_(slots) {}

XrcSrqTable::Hold& XrcSrqTable::Hold::operator=(Hold&& o) noexcept {
  if (this != &o) {
    reset();
    slot_ = o.slot_;
    srq_ = o.srq_;
    o.slot_ = nullptr;
    o.srq_ = nullptr;
  }
  return *this;
}

void XrcSrqTable::Hold::reset() {
  if (slot_) slot_->holds.fetch_sub(1);
  slot_ = nullptr;
  srq_ = nullptr;
}

XrcSrqTable::Hold XrcSrqTable::find(std::uint32_t srqn) const {
  Hold h;
  if (srqn == 0) return h;
  Slot& s = slot(srqn);
  s.holds.fetch_add(1);
  h.slot_ = &s;
  Srq* srq = s.srq.load();
  if (srq && srq->srqn == srqn) {
    h.srq_ = srq;
  } else {
    h.reset();  // another number sharing the slot, or none
  }
  return h;
}

std::uint32_t XrcSrqTable::free_number(std::uint32_t from) const {
  std::uint32_t n = from;
  for (std::uint32_t tries = 0; tries <= size_; ++tries, ++n) {
    if (n == 0) ++n;
    if (!slot(n).srq.load()) return n;
  }
  return 0;
}

void XrcSrqTable::publish(Srq* srq) {
  slot(srq->srqn).srq.store(srq);
}

void XrcSrqTable::unpublish(const Srq* srq) {
  Slot& s = slot(srq->srqn);
  if (s.srq.load() != srq) return;
  s.srq.store(nullptr);
  // A hold lasts one packet of a progress pass: yield until the pass is past it.
  while (s.holds.load() != 0) std::this_thread::yield();
}

}  // namespace softrdma::core
