// Receive work queues: the per-QP RQ and the shared SRQ (with its limit event); an XRC SRQ
// belongs to an XRC domain and completes on its own CQ, whichever target QP fed it.
// A RecvWqe keeps its scatter list; the ring reuses slots without allocating.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <vector>

#include "core/types.h"

namespace softrdma::core {

struct Pd;
struct Xrcd;
class Cq;

struct RecvWqe {
  std::uint64_t wr_id = 0;
  std::vector<Sge> sge;
  std::uint64_t total = 0;  // sum of SGE lengths
};

// A bounded FIFO of receive WQEs. Not locked: the owner locks.
class RecvQueue {
 public:
  void init(std::uint32_t max_wr, std::uint32_t max_sge) {
    max_wr_ = max_wr;
    max_sge_ = max_sge;
  }
  // EINVAL-style failures: too many SGEs; ENOMEM: full.
  int post(const RecvWr& wr);
  bool empty() const { return q_.empty(); }
  std::size_t size() const { return q_.size(); }
  RecvWqe& front() { return q_.front(); }
  void pop() { q_.pop_front(); }
  std::uint32_t max_wr() const { return max_wr_; }
  std::uint32_t max_sge() const { return max_sge_; }
  void set_max_wr(std::uint32_t n) { max_wr_ = n; }
  void clear() { q_.clear(); }

 private:
  std::deque<RecvWqe> q_;
  std::uint32_t max_wr_ = 0, max_sge_ = 0;
};

class Srq {
 public:
  void* user = nullptr;    // the upper layer's handle for this object (events)
  std::uint32_t srqn = 0;  // the device's number for it (monitoring)
  Srq(Pd* pd, std::uint32_t max_wr, std::uint32_t max_sge, std::uint32_t limit,
      Xrcd* xrcd = nullptr, Cq* cq = nullptr);
  Pd* pd() const { return pd_; }
  Xrcd* xrcd() const { return xrcd_; }  // XRC SRQs only (else null)
  Cq* cq() const { return cq_; }        // XRC SRQs only (else null)
  // 0, EINVAL (too many SGEs) or ENOMEM (full).
  int post(const RecvWr& wr);
  // Takes the oldest WQE; fires the limit event when the count drops below the limit.
  std::optional<RecvWqe> take();
  // ibv_modify_srq: max_wr (when resize) and/or limit (when arm). 0 or EINVAL.
  int modify(std::optional<std::uint32_t> max_wr, std::optional<std::uint32_t> limit);
  std::uint32_t max_wr() const;
  std::uint32_t limit() const;
  std::uint32_t max_sge() const { return max_sge_; }
  std::size_t posted() const;  // WQEs waiting
  void set_limit_event(std::function<void()> fn) { limit_event_ = std::move(fn); }

 private:
  Pd* pd_;
  Xrcd* const xrcd_;
  Cq* const cq_;
  mutable std::mutex mutex_;
  RecvQueue q_;
  std::uint32_t max_sge_;
  std::uint32_t limit_;  // 0: not armed
  std::function<void()> limit_event_;
};

}  // namespace softrdma::core
