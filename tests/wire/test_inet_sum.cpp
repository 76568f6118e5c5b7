// wire::ones_sum_host and checksum_add (the Internet checksum's sum, eight bytes at a time)
// against the RFC 1071 definition: big-endian 16-bit words, a trailing byte padded with zero.
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <random>
#include <vector>

#include "wire/inet_sum.h"
#include "wire/net.h"

namespace softrdma::wire {
namespace {

std::uint16_t reference(const std::uint8_t* p, std::size_t len) {
  std::uint64_t s = 0;
  for (std::size_t i = 0; i + 1 < len; i += 2) s += std::uint32_t{p[i]} << 8 | p[i + 1];
  if (len & 1) s += std::uint32_t{p[len - 1]} << 8;
  while (s >> 16) s = (s & 0xFFFF) + (s >> 16);
  return static_cast<std::uint16_t>(s);
}

std::uint16_t big_endian(std::uint16_t host_sum) {
  return std::endian::native == std::endian::little
             ? static_cast<std::uint16_t>(host_sum << 8 | host_sum >> 8)
             : host_sum;
}

TEST(InetSum, Rfc1071Example) {
  const std::uint8_t d[] = {0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7};
  EXPECT_EQ(big_endian(ones_sum_host(d, sizeof d)), 0xddf2);
  EXPECT_EQ(checksum_fold(checksum_add(0, Bytes(d))), static_cast<std::uint16_t>(~0xddf2));
}

TEST(InetSum, EveryLengthAndAlignmentAgreesWithTheDefinition) {
  std::mt19937 rng(7);
  std::vector<std::uint8_t> buf(70000);
  for (auto& b : buf) b = static_cast<std::uint8_t>(rng());
  for (std::size_t len = 0; len <= 300; ++len) {
    for (std::size_t off = 0; off < 8; ++off) {
      ASSERT_EQ(big_endian(ones_sum_host(buf.data() + off, len)), reference(buf.data() + off, len))
          << "length " << len << " offset " << off;
    }
  }
  for (const std::size_t len : {1459u, 1460u, 9000u, 65535u, 69990u}) {
    EXPECT_EQ(big_endian(ones_sum_host(buf.data() + 3, len)), reference(buf.data() + 3, len));
  }
}

TEST(InetSum, CarriesOfAllOnesFoldAsTheDefinitionDoes) {
  std::vector<std::uint8_t> ones(65535, 0xFF);
  EXPECT_EQ(big_endian(ones_sum_host(ones.data(), ones.size())),
            reference(ones.data(), ones.size()));
  std::vector<std::uint8_t> zeros(100, 0);
  EXPECT_EQ(ones_sum_host(zeros.data(), zeros.size()), 0);
  EXPECT_EQ(ones_sum_host(nullptr, 0), 0);
}

}  // namespace
}  // namespace softrdma::wire
