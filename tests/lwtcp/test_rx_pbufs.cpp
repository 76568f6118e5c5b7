// lwtcp::rx_pbuf: a received frame's copy in a pbuf of softrdma's, its block reused once lwIP
// frees it; a small one in a PBUF_RAM pbuf; refused beyond 64 KiB.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "lwip/pbuf.h"
#include "lwtcp/lwip_loader.h"
#include "lwtcp/rx_pbufs.h"

namespace softrdma::lwtcp {
namespace {

std::vector<std::uint8_t> frame_of(std::size_t len, std::uint8_t seed) {
  std::vector<std::uint8_t> f(len);
  for (std::size_t i = 0; i < len; ++i) f[i] = static_cast<std::uint8_t>(seed + i * 13);
  return f;
}

class RxPbufs : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string error;
    if (!load_lwip(error)) GTEST_SKIP() << error;
  }
};

TEST_F(RxPbufs, HoldsTheFrameAndItsBlockIsReused) {
  const auto f = frame_of(5000, 3);
  pbuf* p = rx_pbuf(f.data(), f.size());
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->len, 5000);
  EXPECT_EQ(p->tot_len, 5000);
  EXPECT_EQ(p->next, nullptr);
  EXPECT_EQ(std::vector<std::uint8_t>(static_cast<std::uint8_t*>(p->payload),
                                      static_cast<std::uint8_t*>(p->payload) + 5000),
            f);
  const void* block = p->payload;
  const std::size_t kept = rx_pbufs_kept();
  pbuf_free(p);
  EXPECT_EQ(rx_pbufs_kept(), kept + 1);
  // The same size class (up to 8 KiB) takes the freed block again, holding the new frame.
  const auto g = frame_of(8000, 77);
  pbuf* q = rx_pbuf(g.data(), g.size());
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->payload, block);
  EXPECT_EQ(rx_pbufs_kept(), kept);
  EXPECT_EQ(std::vector<std::uint8_t>(static_cast<std::uint8_t*>(q->payload),
                                      static_cast<std::uint8_t*>(q->payload) + 8000),
            g);
  pbuf_free(q);
}

TEST_F(RxPbufs, ASmallFrameTakesAPbufOfItsOwn) {
  const auto f = frame_of(kRxPbufSmall, 5);
  pbuf* p = rx_pbuf(f.data(), f.size());
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->tot_len, kRxPbufSmall);
  EXPECT_EQ(std::vector<std::uint8_t>(static_cast<std::uint8_t*>(p->payload),
                                      static_cast<std::uint8_t*>(p->payload) + kRxPbufSmall),
            f);
  const std::size_t kept = rx_pbufs_kept();
  pbuf_free(p);
  EXPECT_EQ(rx_pbufs_kept(), kept);  // malloc's, not the pool's
}

TEST_F(RxPbufs, LargestFrameAndBeyond) {
  const auto f = frame_of(0xFFFF, 9);
  pbuf* p = rx_pbuf(f.data(), f.size());
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->tot_len, 0xFFFF);
  EXPECT_EQ(static_cast<std::uint8_t*>(p->payload)[0xFFFE], f[0xFFFE]);
  pbuf_free(p);
  const auto big = frame_of(0x10000, 1);
  EXPECT_EQ(rx_pbuf(big.data(), big.size()), nullptr);
  EXPECT_EQ(rx_pbuf(f.data(), 0), nullptr);
}

}  // namespace
}  // namespace softrdma::lwtcp
