// Completion queue: a bounded ring of work completions with solicited / next
// completion notification. Overflow puts the CQ in error and raises CQ_ERR.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <span>
#include <vector>

#include "core/latency.h"
#include "core/types.h"

namespace softrdma::core {

class Cq {
 public:
  void* user = nullptr;   // the upper layer's handle for this object (events)
  std::uint32_t cqn = 0;  // the device's number for it (monitoring)
  explicit Cq(std::uint32_t cqe);
  std::uint32_t cqe() const { return static_cast<std::uint32_t>(ring_.size()); }
  // Called (outside the CQ lock) when an armed notification fires.
  void set_notify(std::function<void()> fn) { notify_ = std::move(fn); }
  // Stamp each completion with the steady clock (ibv_create_cq_ex's completion
  // timestamps); off by default: reading the clock per completion is not free.
  void set_timestamps(bool on) { timestamps_ = on; }
  // Called once when the CQ overflows.
  void set_overflow(std::function<void()> fn) { overflow_ = std::move(fn); }
  // Adds a completion; false when the CQ is full (the completion is lost and the
  // CQ enters the error state, as on hardware).
  bool push(const Wc& wc, bool solicited);
  // Removes up to out.size() completions, oldest first. -1 once the CQ is in error.
  int poll(std::span<Wc> out);
  // Arms notification for the next (or next solicited) completion.
  void req_notify(bool solicited_only);
  // Changes the size; false (EINVAL) when more completions are queued than fit.
  bool resize(std::uint32_t cqe);
  std::size_t count() const;
  // Post-to-poll latency of the send completions polled that carried a post time (the device
  // samples it once it is watched, Device::sample_latency): samples, p50 and p99 in ns.
  void latency(std::uint64_t& samples, std::uint64_t& p50_ns, std::uint64_t& p99_ns) const;
  // Drops the completions of QP `qpn` still queued, keeping the others in order: a QP moved to
  // RESET leaves nothing behind (its flush errors included), as a real device cleans its CQs.
  void remove_qp(std::uint32_t qpn);
  // The completions of QP `qpn` still queued (not yet polled).
  std::size_t count_qp(std::uint32_t qpn) const;

 private:
  enum class Arm : std::uint8_t { kNone, kNext, kSolicited };
  mutable std::mutex mutex_;
  std::vector<Wc> ring_;
  std::size_t head_ = 0, count_ = 0;
  Arm arm_ = Arm::kNone;
  bool error_ = false;
  bool timestamps_ = false;
  LatencyHistogram latency_;
  std::function<void()> notify_;
  std::function<void()> overflow_;
};

}  // namespace softrdma::core
