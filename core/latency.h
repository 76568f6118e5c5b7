// A histogram of durations in nanoseconds with four buckets per power of two (each bucket
// within 25% of its values), for percentiles without keeping samples: fixed size, no
// allocation, not locked (the owner locks).
#pragma once

#include <array>
#include <bit>
#include <chrono>
#include <cstdint>

namespace softrdma::core {

// The steady clock in nanoseconds (what post and poll times are stamped with).
inline std::uint64_t steady_ns() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::steady_clock::now().time_since_epoch())
                                        .count());
}

class LatencyHistogram {
 public:
  void add(std::uint64_t ns) {
    ++buckets_[index(ns)];
    ++count_;
  }
  std::uint64_t count() const { return count_; }
  // The upper bound of the bucket holding the q-th quantile (0 < q <= 1); 0 when empty.
  std::uint64_t quantile(double q) const {
    if (count_ == 0) return 0;
    const auto rank = static_cast<std::uint64_t>(q * static_cast<double>(count_) + 0.5);
    std::uint64_t seen = 0;
    for (std::size_t i = 0; i < buckets_.size(); ++i) {
      seen += buckets_[i];
      if (seen >= (rank ? rank : 1)) return upper(i);
    }
    return upper(buckets_.size() - 1);
  }

 private:
  static std::size_t index(std::uint64_t ns) {
    if (ns < 4) return static_cast<std::size_t>(ns);
    const auto e = static_cast<std::size_t>(std::bit_width(ns)) - 1;  // 2^e <= ns < 2^(e+1)
    return e * 4 + static_cast<std::size_t>((ns >> (e - 2)) & 3);
  }
  static std::uint64_t upper(std::size_t i) {
    if (i < 4) return i;
    const std::size_t e = i / 4, sub = i % 4;
    return ((4 + sub + 1) << (e - 2)) - 1;
  }
  std::array<std::uint64_t, 64 * 4> buckets_{};
  std::uint64_t count_ = 0;
};

}  // namespace softrdma::core
