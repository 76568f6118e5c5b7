// rsockets' reading of what the peer sends (cm/rsocket_wire.h): hellos, window announcements
// and credits, above all the hostile ones.
#include <gtest/gtest.h>

#include <limits>

#include "cm/rsocket_wire.h"

namespace softrdma::cm::rs {
namespace {

TEST(RsocketWire, HelloShortOrMissingReadsAsDefaults) {
  const std::uint8_t eight[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  const Hello h = parse_hello(eight, sizeof eight, 32);
  EXPECT_EQ(h.credit_addr, 0u);
  EXPECT_EQ(h.slots, 32u);
  EXPECT_EQ(parse_hello(nullptr, 0, 32).slots, 32u);
}

TEST(RsocketWire, WindowRoundTripsAndCoversOnlyItsRange) {
  std::uint8_t b[kWindowBytes];
  encode_window({4096, 0x10000, 0x55, 1000}, b);
  const auto w = parse_window(b, sizeof b);
  ASSERT_TRUE(w);
  EXPECT_EQ(w->offset, 4096);
  EXPECT_EQ(w->addr, 0x10000u);
  EXPECT_EQ(w->rkey, 0x55u);
  EXPECT_EQ(w->len, 1000u);
  std::uint64_t remote = 0;
  EXPECT_TRUE(window_covers(*w, 4096 + 10, 990, remote));
  EXPECT_EQ(remote, 0x10000u + 10);
  EXPECT_FALSE(window_covers(*w, 4096 + 10, 991, remote));
  EXPECT_FALSE(window_covers(*w, 4095, 1, remote));
  // A count that would wrap the end around is outside (it was let through before).
  EXPECT_FALSE(window_covers(*w, 4096 + 10, std::numeric_limits<std::uint64_t>::max(), remote));
  EXPECT_FALSE(parse_window(b, sizeof b - 1));
}

TEST(RsocketWire, WindowsRiomapCannotMakeAreRefused) {
  std::uint8_t b[kWindowBytes];
  // A negative offset: riowrite's offset - w.offset overflowed (undefined behaviour) before.
  encode_window({std::numeric_limits<std::int64_t>::min(), 0, 1, ~0ull}, b);
  EXPECT_FALSE(parse_window(b, sizeof b));
  encode_window({1, 0, 1, static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())}, b);
  EXPECT_FALSE(parse_window(b, sizeof b));
}

TEST(RsocketWire, BogusCreditWordGrantsNothing) {
  EXPECT_EQ(credits(16, 32, 40), 8u);
  EXPECT_EQ(credits(0, 32, 40), 0u);  // behind what was sent: wrapped to 2^64 - 8 before
  EXPECT_EQ(credits(~0ull, 32, 0), 0u);
}

}  // namespace
}  // namespace softrdma::cm::rs
