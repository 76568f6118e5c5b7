#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <numeric>

#include "wire/crc.h"

using namespace softrdma::wire;

namespace {
Bytes str(const char* s) {
  return Bytes(reinterpret_cast<const std::uint8_t*>(s), std::strlen(s));
}

// The CRC as MPA sends it: least-significant byte first.
std::array<std::uint8_t, 4> wire_bytes(std::uint32_t crc) {
  std::array<std::uint8_t, 4> b{};
  store32le(b.data(), crc);
  return b;
}
}  // namespace

TEST(Crc, Crc32IeeeCheckValue) {
  EXPECT_EQ(crc32_ieee_refl(0, str("123456789")), 0xCBF43926u);
}

TEST(Crc, Crc32IeeeChains) {
  const std::uint32_t a = crc32_ieee_refl(0, str("1234"));
  EXPECT_EQ(crc32_ieee_refl(a, str("56789")), 0xCBF43926u);
}

TEST(Crc, Crc32cCheckValue) {
  EXPECT_EQ(crc32c(0, str("123456789")), 0xE3069283u);
}

TEST(Crc, Crc32cChains) {
  const std::uint32_t a = crc32c(0, str("12345"));
  EXPECT_EQ(crc32c(a, str("6789")), 0xE3069283u);
}

TEST(Crc, Crc32cRfc3720Vectors) {
  std::array<std::uint8_t, 32> buf{};
  buf.fill(0x00);
  EXPECT_EQ(wire_bytes(crc32c(0, buf)), (std::array<std::uint8_t, 4>{0xaa, 0x36, 0x91, 0x8a}));
  buf.fill(0xff);
  EXPECT_EQ(wire_bytes(crc32c(0, buf)), (std::array<std::uint8_t, 4>{0x43, 0xab, 0xa8, 0x62}));
  std::iota(buf.begin(), buf.end(), std::uint8_t{0});
  EXPECT_EQ(wire_bytes(crc32c(0, buf)), (std::array<std::uint8_t, 4>{0x4e, 0x79, 0xdd, 0x46}));
  for (std::size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<std::uint8_t>(31 - i);
  EXPECT_EQ(wire_bytes(crc32c(0, buf)), (std::array<std::uint8_t, 4>{0x5c, 0xdb, 0x3f, 0x11}));
}
