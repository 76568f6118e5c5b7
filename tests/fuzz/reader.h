// Fuzz input read front to back as small integers (little-endian), zeros once it runs out.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace softrdma::fuzz {

struct Reader {
  const std::uint8_t* p;
  std::size_t n;
  bool empty() const { return n == 0; }
  std::uint8_t u8() {
    if (n == 0) return 0;
    --n;
    return *p++;
  }
  std::uint16_t u16() { return static_cast<std::uint16_t>(u8() | (u8() << 8)); }
  std::uint32_t u32() { return u16() | (static_cast<std::uint32_t>(u16()) << 16); }
  std::uint64_t u64() { return u32() | (static_cast<std::uint64_t>(u32()) << 32); }
  // Up to `max` bytes.
  std::string bytes(std::size_t max) {
    const std::size_t k = max < n ? max : n;
    std::string s(reinterpret_cast<const char*>(p), k);
    p += k;
    n -= k;
    return s;
  }
};

}  // namespace softrdma::fuzz
