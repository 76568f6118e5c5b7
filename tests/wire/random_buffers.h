// Test helper for the "random bytes never crash" tests: `count` buffers of random bytes, each
// shorter than `max_len`, from a generator seeded with `seed`. `parse(i, buf, rng)` may make
// buffer i plausible first (with more of rng), parses it, checks what parsed and says whether
// anything did. Returns how many did.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

template <class Parse>
int parsed_random_buffers(unsigned seed, int count, std::size_t max_len, Parse parse) {
  std::mt19937 rng(seed);
  int ok = 0;
  for (int i = 0; i < count; ++i) {
    std::vector<std::uint8_t> buf(rng() % max_len);
    for (auto& b : buf) b = static_cast<std::uint8_t>(rng());
    if (parse(i, buf, rng)) ++ok;
  }
  return ok;
}
