// Datagrams a UD QP received while it had no receive WQE, kept in arrival order until WQEs are
// posted or their deadline passes, instead of being dropped at once (as mlx5's "delay drop"
// keeps packets for a raw packet receive queue out of WQEs). A software device shares the CPU with
// the program it serves: the datagrams that come while that program is off its core are held
// for it rather than lost (docs/congestion.md). Storage grows in chunks of kChunkSlots, up to
// kMaxSlots per QP and as far as a budget of chunks shared by the device allows; it is kept
// until the QP goes. Until its first hold() it is two pointers (every QP has one). Owned by one
// QP, used under its lock.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "netdev/netdev.h"

namespace softrdma::rxe {

class UdHold {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::size_t kChunkSlots = 64;
  static constexpr std::size_t kMaxSlots = 4096;
  // A 4096-byte payload with a BTH, DETH, immediate and ICRC.
  static constexpr std::size_t kSlotBytes = 4096 + 64;
  static constexpr std::size_t kChunkBytes = kChunkSlots * kSlotBytes;
  // Deeper than this, the hold is congestion: a datagram that joins it is answered as a
  // CE-marked one (a queue's KMIN; a shallow hold is a program briefly off its core).
  static constexpr std::size_t kCongestedAbove = kMaxSlots / 4;

  UdHold() = default;
  ~UdHold();  // gives its chunks back to the budget
  UdHold(const UdHold&) = delete;
  UdHold& operator=(const UdHold&) = delete;
  // The device's chunks left to grow into (none without it); set before the first hold().
  void set_budget(std::atomic<std::int64_t>* chunks_left) { budget_ = chunks_left; }

  // Copies `raw` (bytes and addresses) to keep until `until`; false when full or too long.
  bool hold(const netdev::Packet& raw, Clock::time_point until);
  bool empty() const { return size() == 0; }
  std::size_t size() const { return r_ ? r_->count : 0; }
  // The oldest datagram held (its data points into the hold) and its deadline; not empty().
  const netdev::Packet& front() const { return r_->ring[r_->head]->raw; }
  Clock::time_point front_deadline() const { return r_->ring[r_->head]->until; }
  void pop();
  // Empties it; returns how many were held.
  std::size_t clear();

 private:
  struct Slot {
    netdev::Packet raw;
    Clock::time_point until;
    std::uint8_t* bytes = nullptr;
  };
  struct Chunk {
    Slot slots[kChunkSlots];
    std::uint8_t bytes[kChunkBytes];
  };
  struct Ring {
    std::vector<std::unique_ptr<Chunk>> chunks;
    std::vector<Slot*> ring;  // the slots in ring order; count of them from head are held
    std::size_t head = 0, count = 0;
  };
  bool grow();
  std::atomic<std::int64_t>* budget_ = nullptr;
  std::unique_ptr<Ring> r_;  // made by the first hold()
};

}  // namespace softrdma::rxe
