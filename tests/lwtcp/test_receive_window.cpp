// lwtcp::offer_window_shift: the window scale option of the SYNs lwIP sends, rewritten with the
// TCP checksum still right; every other frame, and a malformed option list, left as it was.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "lwtcp/receive_window.h"
#include "syn_frame.h"

namespace softrdma::lwtcp {
namespace {

using namespace test;

// Byte for byte the same but at `at` (an offset in the frame).
void same_but(const Frame& before, const Frame& after, std::size_t at) {
  ASSERT_EQ(before.size(), after.size());
  for (std::size_t i = 0; i < before.size(); ++i) {
    if (i == at || i == kTcpAt + 16 || i == kTcpAt + 17) continue;
    EXPECT_EQ(before[i], after[i]) << "byte " << i;
  }
}

TEST(ReceiveWindow, TheShiftOfASynIsRewrittenAtAnOddOffset) {
  // MSS 1460, NOP, window scale 1 (its shift byte at option offset 7), SACK permitted, NOP NOP.
  const Frame before = syn({2, 4, 5, 0xB4, 1, 3, 3, 1, 4, 2, 1, 1});
  ASSERT_TRUE(checksum_good(before));
  Frame f = before;
  ASSERT_TRUE(offer_window_shift(f.data(), static_cast<std::uint32_t>(f.size()), 7));
  EXPECT_EQ(f[kTcpAt + 27], 7);
  EXPECT_TRUE(checksum_good(f));
  same_but(before, f, kTcpAt + 27);
}

TEST(ReceiveWindow, TheShiftOfASynAckIsRewrittenAtAnEvenOffset) {
  // Window scale 1 first (its shift byte at option offset 2), NOP, MSS, NOPs.
  const Frame before = syn({3, 3, 1, 1, 2, 4, 5, 0xB4, 1, 1, 1, 1}, wire::kTcpSyn | wire::kTcpAck);
  Frame f = before;
  ASSERT_TRUE(offer_window_shift(f.data(), static_cast<std::uint32_t>(f.size()), 14));
  EXPECT_EQ(f[kTcpAt + 22], 14);
  EXPECT_TRUE(checksum_good(f));
  same_but(before, f, kTcpAt + 22);
  // Again: already offered, nothing moves.
  const Frame once = f;
  EXPECT_TRUE(offer_window_shift(f.data(), static_cast<std::uint32_t>(f.size()), 14));
  EXPECT_EQ(f, once);
}

TEST(ReceiveWindow, OtherFramesAndBadOptionListsAreLeftAlone) {
  const std::vector<std::vector<std::uint8_t>> lists = {
      {2, 4, 5, 0xB4},           // no window scale
      {2, 0, 3, 3, 1, 0, 0, 0},  // a zero option length before it
      {0, 0, 0, 0, 3, 3, 1, 0},  // the list ends before it
      {1, 1, 1, 1, 1, 1, 2, 4},  // an option that runs past the header
      {3, 4, 1, 1},              // window scale of the wrong length
  };
  for (const auto& options : lists) {
    Frame f = syn(options);
    const Frame before = f;
    EXPECT_FALSE(offer_window_shift(f.data(), static_cast<std::uint32_t>(f.size()), 7));
    EXPECT_EQ(f, before);
  }
  Frame ack = syn({1, 3, 3, 1}, wire::kTcpAck);  // not a SYN
  const Frame before = ack;
  EXPECT_FALSE(offer_window_shift(ack.data(), static_cast<std::uint32_t>(ack.size()), 7));
  EXPECT_EQ(ack, before);
  Frame cut = syn({1, 3, 3, 1});  // the frame ends inside the options
  EXPECT_FALSE(offer_window_shift(cut.data(), static_cast<std::uint32_t>(cut.size() - 3), 7));
  Frame arp(60, 0);
  arp[12] = 0x08;
  arp[13] = 0x06;
  EXPECT_FALSE(offer_window_shift(arp.data(), static_cast<std::uint32_t>(arp.size()), 7));
}

}  // namespace
}  // namespace softrdma::lwtcp
