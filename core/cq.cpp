#include "core/cq.h"

#include <chrono>

namespace softrdma::core {

Cq::Cq(std::uint32_t cqe) : ring_(cqe ? cqe : 1) {}

bool Cq::push(const Wc& wc, bool solicited) {
  bool fire = false, overflow = false;
  {
    std::lock_guard lock(mutex_);
    if (error_) return false;
    if (count_ == ring_.size()) {
      error_ = true;
      overflow = true;
    } else {
      Wc& slot = ring_[(head_ + count_) % ring_.size()];
      slot = wc;
      if (timestamps_) {
        slot.timestamp_ns =
            static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
      }
      ++count_;
      if (arm_ == Arm::kNext ||
          (arm_ == Arm::kSolicited && (solicited || wc.status != WcStatus::kSuccess))) {
        arm_ = Arm::kNone;
        fire = true;
      }
    }
  }
  if (overflow) {
    if (overflow_) overflow_();
    return false;
  }
  if (fire && notify_) notify_();
  return true;
}

int Cq::poll(std::span<Wc> out) {
  std::lock_guard lock(mutex_);
  if (error_ && count_ == 0) return -1;
  std::size_t n = 0;
  std::uint64_t now = 0;
  while (n < out.size() && count_ > 0) {
    const Wc& wc = out[n++] = ring_[head_];
    head_ = (head_ + 1) % ring_.size();
    --count_;
    if (wc.post_ns) {
      if (!now) now = steady_ns();
      latency_.add(now > wc.post_ns ? now - wc.post_ns : 0);
    }
  }
  return static_cast<int>(n);
}

void Cq::req_notify(bool solicited_only) {
  std::lock_guard lock(mutex_);
  // Solicited-only never weakens a pending "next completion" request.
  if (solicited_only && arm_ == Arm::kNext) return;
  arm_ = solicited_only ? Arm::kSolicited : Arm::kNext;
}

bool Cq::resize(std::uint32_t cqe) {
  std::lock_guard lock(mutex_);
  if (cqe == 0 || cqe < count_) return false;
  std::vector<Wc> ring(cqe);
  for (std::size_t i = 0; i < count_; ++i) ring[i] = ring_[(head_ + i) % ring_.size()];
  ring_ = std::move(ring);
  head_ = 0;
  return true;
}

void Cq::remove_qp(std::uint32_t qpn) {
  std::lock_guard lock(mutex_);
  std::size_t kept = 0;
  for (std::size_t i = 0; i < count_; ++i) {
    const Wc& wc = ring_[(head_ + i) % ring_.size()];
    if (wc.qp_num != qpn) ring_[(head_ + kept++) % ring_.size()] = wc;
  }
  count_ = kept;
}

std::size_t Cq::count_qp(std::uint32_t qpn) const {
  std::lock_guard lock(mutex_);
  std::size_t n = 0;
  for (std::size_t i = 0; i < count_; ++i) n += ring_[(head_ + i) % ring_.size()].qp_num == qpn;
  return n;
}

void Cq::latency(std::uint64_t& samples, std::uint64_t& p50_ns, std::uint64_t& p99_ns) const {
  std::lock_guard lock(mutex_);
  samples = latency_.count();
  p50_ns = latency_.quantile(0.5);
  p99_ns = latency_.quantile(0.99);
}

std::size_t Cq::count() const {
  std::lock_guard lock(mutex_);
  return count_;
}

}  // namespace softrdma::core
