// gso_run_end: which consecutive datagrams leave as one UDP GSO message.
#include <gtest/gtest.h>

#include <array>
#include <vector>

#include "netdev/gso_run.h"

namespace softrdma::netdev {
namespace {

struct Batch {
  std::vector<Packet> pkts;
  std::vector<Packet*> ptrs;
  explicit Batch(std::vector<std::uint32_t> lens) {
    for (std::uint32_t len : lens) {
      Packet p;
      p.dst = IpAddr::v4(0x0A000002);
      p.len = len;
      pkts.push_back(p);
    }
    for (Packet& p : pkts) ptrs.push_back(&p);
  }
  std::size_t end(std::size_t i, std::size_t segs = 64, std::size_t bytes = 65000) {
    return gso_run_end(ptrs, i, segs, bytes);
  }
};

TEST(GsoRun, EqualSizesThenAShorterLast) {
  Batch b({1000, 1000, 1000, 400, 1000});
  EXPECT_EQ(b.end(0), 4u);  // the shorter one ends the run
  EXPECT_EQ(b.end(3), 4u);  // a run of one
  EXPECT_EQ(b.end(4), 5u);
}

TEST(GsoRun, ALongerDatagramStartsAnotherRun) {
  Batch b({400, 1000, 1000});
  EXPECT_EQ(b.end(0), 1u);
  EXPECT_EQ(b.end(1), 3u);
}

TEST(GsoRun, EndsAtAnotherDestinationPortOrClass) {
  Batch b({500, 500, 500, 500, 500, 500, 500});
  b.pkts[1].dst = IpAddr::v4(0x0A000003);
  b.pkts[3].src_port = b.pkts[4].src_port = 0xC001;
  b.pkts[5].traffic_class = 2;
  EXPECT_EQ(b.end(0), 1u);
  EXPECT_EQ(b.end(1), 2u);
  EXPECT_EQ(b.end(2), 3u);
  EXPECT_EQ(b.end(3), 5u);
  EXPECT_EQ(b.end(5), 6u);
  b.pkts[6].hop_limit = 1;
  EXPECT_EQ(b.end(6), 7u);
  b.pkts[4].dst_port = 4792;
  EXPECT_EQ(b.end(3), 4u);
}

TEST(GsoRun, HeldToTheSegmentAndByteLimits) {
  Batch b(std::vector<std::uint32_t>(100, 1000));
  EXPECT_EQ(b.end(0), 64u);
  EXPECT_EQ(b.end(64), 100u);
  EXPECT_EQ(b.end(0, 64, 10000), 10u);  // ten of 1000 bytes, not eleven
  EXPECT_EQ(b.end(0, 3), 3u);
  Batch big({70000});
  EXPECT_EQ(big.end(0), 1u);  // alone, even above the byte limit
}

}  // namespace
}  // namespace softrdma::netdev
