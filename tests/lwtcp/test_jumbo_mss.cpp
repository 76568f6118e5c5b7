// lwtcp's jumbo MSS: the MSS option of the SYNs lwIP sends rewritten with the TCP checksum still
// right, the offers of arriving SYNs read and kept by connection (bounded), and the link MSS of
// an MTU.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "lwtcp/jumbo_mss.h"
#include "syn_frame.h"

namespace softrdma::lwtcp {
namespace {

using namespace test;

// MSS 1460 after a NOP (its value at option offsets 3 and 4: an odd start), window scale,
// SACK permitted, NOPs.
const std::vector<std::uint8_t> kOddMss = {1, 2, 4, 5, 0xB4, 3, 3, 1, 4, 2, 1, 1};

TEST(JumboMss, LinkMssOfAnMtu) {
  EXPECT_EQ(link_mss(1500, true), 1460);
  EXPECT_EQ(link_mss(1500, false), 1440);
  EXPECT_EQ(link_mss(9000, true), 8960);
  EXPECT_EQ(link_mss(9000, false), 8940);
  EXPECT_EQ(link_mss(30, true), 0);
  EXPECT_EQ(link_mss(100000, true), 0xFFFF);
}

TEST(JumboMss, TheOfferOfASynIsRewrittenWithItsChecksum) {
  for (const auto flags :
       {wire::kTcpSyn, static_cast<std::uint8_t>(wire::kTcpSyn | wire::kTcpAck)}) {
    const Frame before = syn(kOddMss, flags);
    ASSERT_TRUE(checksum_good(before));
    EXPECT_EQ(syn_mss(before.data(), size32(before)), 1460);
    Frame f = before;
    ASSERT_TRUE(offer_mss(f.data(), size32(f), 8960));
    EXPECT_EQ(syn_mss(f.data(), size32(f)), 8960);
    EXPECT_EQ(wire::load16(f.data() + kTcpAt + 23), 8960);
    EXPECT_TRUE(checksum_good(f));
    for (std::size_t i = 0; i < f.size(); ++i) {
      if (i == kTcpAt + 23 || i == kTcpAt + 24 || i == kTcpAt + 16 || i == kTcpAt + 17) continue;
      EXPECT_EQ(before[i], f[i]) << "byte " << i;
    }
  }
  // At an even start too.
  Frame even = syn({2, 4, 5, 0xB4});
  ASSERT_TRUE(offer_mss(even.data(), size32(even), 0x2300));
  EXPECT_EQ(syn_mss(even.data(), size32(even)), 0x2300);
  EXPECT_TRUE(checksum_good(even));
}

TEST(JumboMss, OtherFramesAndBadOptionListsHaveNoOffer) {
  const std::vector<std::vector<std::uint8_t>> lists = {
      {3, 3, 1, 1},                 // no MSS option
      {2, 0, 2, 4, 5, 0xB4, 0, 0},  // a zero option length before it
      {0, 0, 0, 0, 2, 4, 5, 0xB4},  // the list ends before it
      {1, 1, 1, 1, 1, 1, 2, 4},     // an option that runs past the header
      {2, 3, 5, 1},                 // MSS of the wrong length
  };
  for (const auto& options : lists) {
    Frame f = syn(options);
    const Frame before = f;
    EXPECT_EQ(syn_mss(f.data(), size32(f)), 0);
    EXPECT_FALSE(offer_mss(f.data(), size32(f), 8960));
    EXPECT_EQ(f, before);
  }
  Frame ack = syn({2, 4, 5, 0xB4}, wire::kTcpAck);  // not a SYN
  EXPECT_EQ(syn_mss(ack.data(), size32(ack)), 0);
  EXPECT_FALSE(offer_mss(ack.data(), size32(ack), 8960));
  Frame cut = syn({2, 4, 5, 0xB4});  // the frame ends inside the option
  EXPECT_EQ(syn_mss(cut.data(), size32(cut) - 2), 0);
  Frame arp(60, 0);
  arp[12] = 0x08;
  arp[13] = 0x06;
  EXPECT_EQ(syn_mss(arp.data(), size32(arp)), 0);
}

std::uint16_t take(PeerMss& peers, const netdev::IpAddr& peer, std::uint16_t peer_port,
                   std::uint16_t port) {
  return peers.take(PeerKey{peer, peer_port, port});
}

TEST(JumboMss, AFramesPeerIsItsDestinationWhenSentAndItsSourceWhenReceived) {
  const Frame f = syn({2, 4, 5, 0xB4});
  const PeerKey received = peer_key(f.data(), kTcpAt, false);
  EXPECT_EQ(received, (PeerKey{netdev::IpAddr::v4(kSrc), kSrcPort, kDstPort}));
  const PeerKey sent = peer_key(f.data(), kTcpAt, true);
  EXPECT_EQ(sent, (PeerKey{netdev::IpAddr::v4(kDst), kDstPort, kSrcPort}));
}

TEST(JumboMss, PeersOffersAreKeptByConnectionAndTakenOnce) {
  PeerMss peers;
  const netdev::IpAddr src = netdev::IpAddr::v4(kSrc);
  Frame a = syn(kOddMss);
  ASSERT_TRUE(offer_mss(a.data(), size32(a), 8960));
  peers.note(a.data(), size32(a));
  const Frame b = syn({2, 4, 0x23, 0x00}, wire::kTcpSyn | wire::kTcpAck, kSrcPort + 1);
  peers.note(b.data(), size32(b));
  const Frame data = syn({}, wire::kTcpAck, kSrcPort + 2);  // no SYN: nothing noted
  peers.note(data.data(), size32(data));

  EXPECT_EQ(take(peers, src, kSrcPort + 2, kDstPort), 0);
  EXPECT_EQ(take(peers, src, kSrcPort, kDstPort + 1), 0);                   // another port of ours
  EXPECT_EQ(take(peers, netdev::IpAddr::v4(kDst), kSrcPort, kDstPort), 0);  // another peer
  EXPECT_EQ(take(peers, src, kSrcPort, kDstPort), 8960);
  EXPECT_EQ(take(peers, src, kSrcPort, kDstPort), 0);  // taken
  EXPECT_EQ(take(peers, src, kSrcPort + 1, kDstPort), 0x2300);
}

TEST(JumboMss, AFloodOfSynsPushesOutTheOldestOffersOnly) {
  PeerMss peers;
  const netdev::IpAddr src = netdev::IpAddr::v4(kSrc);
  const Frame first = syn({2, 4, 0x23, 0x00});
  peers.note(first.data(), size32(first));
  peers.note(first.data(), size32(first));  // sent again: still one entry
  for (std::uint16_t i = 1; i < PeerMss::kEntries; ++i) {
    const Frame f =
        syn({2, 4, 0x23, 0x00}, wire::kTcpSyn, static_cast<std::uint16_t>(kSrcPort + i));
    peers.note(f.data(), size32(f));
  }
  EXPECT_EQ(take(peers, src, kSrcPort, kDstPort), 0x2300);  // the table held it and 63 more
  peers.note(first.data(), size32(first));
  for (std::uint16_t i = 0; i < 2 * PeerMss::kEntries; ++i) {
    const Frame f =
        syn({2, 4, 0x10, 0x00}, wire::kTcpSyn, static_cast<std::uint16_t>(kSrcPort + 1000 + i));
    peers.note(f.data(), size32(f));
  }
  EXPECT_EQ(take(peers, src, kSrcPort, kDstPort), 0);  // pushed out: lwIP's own MSS stays
  EXPECT_EQ(take(peers, src,
                 static_cast<std::uint16_t>(kSrcPort + 1000 + 2 * PeerMss::kEntries - 1), kDstPort),
            0x1000);
}

}  // namespace
}  // namespace softrdma::lwtcp
