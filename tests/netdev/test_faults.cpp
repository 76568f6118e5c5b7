#include <gtest/gtest.h>

#include "netdev/faults.h"

namespace softrdma::netdev {
namespace {

TEST(ParseFaults, EmptyMeansNone) {
  FaultConfig c;
  std::string err;
  ASSERT_TRUE(parse_faults("", c, err));
  EXPECT_FALSE(c.any());
  EXPECT_FALSE(c.seeded);
  ASSERT_TRUE(parse_faults("  ", c, err));
  EXPECT_FALSE(c.any());
}

TEST(ParseFaults, AllKeys) {
  FaultConfig c;
  std::string err;
  ASSERT_TRUE(parse_faults(
      "drop=0.05,reorder=0.02,corrupt=0.001,duplicate=0.01,delay=0.1,delay_ms=5,seed=7", c, err))
      << err;
  EXPECT_DOUBLE_EQ(c.drop, 0.05);
  EXPECT_DOUBLE_EQ(c.reorder, 0.02);
  EXPECT_DOUBLE_EQ(c.corrupt, 0.001);
  EXPECT_DOUBLE_EQ(c.duplicate, 0.01);
  EXPECT_DOUBLE_EQ(c.delay, 0.1);
  EXPECT_EQ(c.delay_ms, 5u);
  EXPECT_EQ(c.seed, 7u);
  EXPECT_TRUE(c.seeded);
  EXPECT_TRUE(c.any());
  FaultConfig back;
  ASSERT_TRUE(parse_faults(to_string(c), back, err)) << to_string(c);
  EXPECT_EQ(back.drop, c.drop);
  EXPECT_EQ(back.delay_ms, c.delay_ms);
  EXPECT_EQ(back.seed, c.seed);
}

TEST(ParseFaults, EdgesAndSpaces) {
  FaultConfig c;
  std::string err;
  ASSERT_TRUE(parse_faults("drop=0, corrupt=1 ,seed=18446744073709551615", c, err)) << err;
  EXPECT_EQ(c.drop, 0.0);
  EXPECT_EQ(c.corrupt, 1.0);
  EXPECT_EQ(c.seed, 18446744073709551615ull);
}

TEST(ParseFaults, Rejects) {
  const char* bad[][2] = {
      {"drop=1.5", "drop"},           {"drop=-0.1", "drop"},
      {"drop=abc", "drop"},           {"drop=", "drop"},
      {"drop=nan", "drop"},           {"drop=0.1x", "drop"},
      {"lose=0.1", "unknown key"},    {"drop", "key=value"},
      {"drop=0.1,", "key=value"},     {"delay_ms=-1", "delay_ms"},
      {"delay_ms=1.5", "delay_ms"},   {"seed=-3", "seed"},
      {"drop=0.1,drop=0.2", "twice"}, {"seed=99999999999999999999", "seed"},
  };
  for (auto& [spec, why] : bad) {
    FaultConfig c;
    std::string err;
    EXPECT_FALSE(parse_faults(spec, c, err)) << spec;
    EXPECT_NE(err.find(why), std::string::npos) << spec << " -> " << err;
  }
}

}  // namespace
}  // namespace softrdma::netdev
