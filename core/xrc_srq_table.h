// The XRC SRQs by number, for the receive path, which looks one up on every XRC request (the
// XRCETH names it): a fixed table of slots read without a lock, and a hold a reader keeps on a
// slot while it uses the SRQ there. unpublish() takes an SRQ out and waits for its slot's holds
// to drop, so once it returns no reader reaches the SRQ and it may be freed.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

namespace softrdma::core {

class Srq;

class XrcSrqTable {
  struct Slot {
    std::atomic<Srq*> srq{nullptr};
    std::atomic<std::uint32_t> holds{0};
  };

 public:
  explicit XrcSrqTable(std::uint32_t slots);

  // A reader's hold on one SRQ: it is not freed while the hold is kept. Keep one only for a
  // bounded time (a packet), never across a wait for the application.
  class Hold {
   public:
    Hold() = default;
    Hold(Hold&& o) noexcept : slot_(o.slot_), srq_(o.srq_) {
      o.slot_ = nullptr;
      o.srq_ = nullptr;
    }
    Hold& operator=(Hold&& o) noexcept;
    Hold(const Hold&) = delete;
    Hold& operator=(const Hold&) = delete;
    ~Hold() { reset(); }
    Srq* get() const { return srq_; }
    void reset();

   private:
    friend class XrcSrqTable;
    Slot* slot_ = nullptr;
    Srq* srq_ = nullptr;
  };

  // The SRQ numbered `srqn`, held; an empty hold when no XRC SRQ has that number. Lock-free.
  Hold find(std::uint32_t srqn) const;
  // The first number from `from` on (0 skipped) whose slot is free, for a new XRC SRQ; 0 when
  // every slot is taken. publish() and unpublish() are serialised by the caller (the objects'
  // lock), and free_number() with them.
  std::uint32_t free_number(std::uint32_t from) const;
  void publish(Srq* srq);  // srq->srqn from free_number()
  // Takes `srq` out; returns once no hold on it is left. Not under a lock a reader may want.
  void unpublish(const Srq* srq);

 private:
  Slot& slot(std::uint32_t srqn) const { return slots_[srqn % size_]; }

  std::unique_ptr<Slot[]> slots_;
  std::uint32_t size_;
};

}  // namespace softrdma::core
