#include "wire/inet_sum.h"

#include <cstring>

namespace softrdma::wire {
namespace {

// Folds a 64-bit one's-complement accumulator to 16 bits.
std::uint16_t fold(std::uint64_t s) {
  s = (s & 0xFFFFFFFFu) + (s >> 32);
  s = (s & 0xFFFFFFFFu) + (s >> 32);
  s = (s & 0xFFFFu) + (s >> 16);
  s = (s & 0xFFFFu) + (s >> 16);
  return static_cast<std::uint16_t>(s);
}

}  // namespace

std::uint16_t ones_sum_host(const void* p, std::size_t len) {
  const auto* b = static_cast<const std::uint8_t*>(p);
  // Four accumulators of 32-bit halves: each add is at most 2^32, so 2^31 adds cannot carry
  // out of 64 bits, far beyond any frame.
  std::uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  while (len >= 32) {
    std::uint64_t w[4];
    std::memcpy(w, b, sizeof w);
    s0 += (w[0] & 0xFFFFFFFFu) + (w[0] >> 32);
    s1 += (w[1] & 0xFFFFFFFFu) + (w[1] >> 32);
    s2 += (w[2] & 0xFFFFFFFFu) + (w[2] >> 32);
    s3 += (w[3] & 0xFFFFFFFFu) + (w[3] >> 32);
    b += 32;
    len -= 32;
  }
  std::uint64_t s = s0 + s1 + s2 + s3;  // each below 2^61: no carry out
  while (len >= 4) {
    std::uint32_t w;
    std::memcpy(&w, b, sizeof w);
    s += w;
    b += 4;
    len -= 4;
  }
  if (len >= 2) {
    std::uint16_t w;
    std::memcpy(&w, b, sizeof w);
    s += w;
    b += 2;
    len -= 2;
  }
  if (len) {
    std::uint16_t w = 0;
    std::memcpy(&w, b, 1);  // the odd byte first in its word, as it sits in memory
    s += w;
  }
  return fold(s);
}

}  // namespace softrdma::wire
