// lwtcp's choice of a local port for a connection bound to port 0 (lwtcp/ephemeral_port.h).
#include <gtest/gtest.h>

#include <cerrno>
#include <set>

#include "lwtcp/ephemeral_port.h"

namespace softrdma::lwtcp {
namespace {

TEST(DynamicPort, TheDrawPicksTheFirstPortTriedAnywhereInTheRange) {
  int err = -1;
  std::set<std::uint16_t> tried;
  auto take = [&](std::uint16_t p) {
    tried.insert(p);
    return 0;
  };
  EXPECT_EQ(bind_dynamic_port(0, take, err), 0xC000);
  EXPECT_EQ(err, 0);
  // lwIP's own draw of 0xFFFF wrapped to port 0: here it is a port like any other.
  EXPECT_EQ(bind_dynamic_port(0x3FFF, take, err), 0xFFFF);
  EXPECT_EQ(bind_dynamic_port(0x4000, take, err), 0xC000);
  EXPECT_EQ(bind_dynamic_port(0xFFFFFFFF, take, err), 0xFFFF);
  EXPECT_EQ(tried.size(), 2u);
}

TEST(DynamicPort, PortsInUseAreSkippedAcrossTheEndOfTheRange) {
  const std::set<std::uint16_t> used = {0xFFFE, 0xFFFF, 0xC000, 0xC001};
  int err = -1;
  int calls = 0;
  auto bind = [&](std::uint16_t p) {
    ++calls;
    return used.count(p) ? EADDRINUSE : 0;
  };
  EXPECT_EQ(bind_dynamic_port(0x3FFE, bind, err), 0xC002);
  EXPECT_EQ(err, 0);
  EXPECT_EQ(calls, 5);
}

TEST(DynamicPort, AllInUseOrAnotherErrorBindsNothing) {
  int err = 0;
  int calls = 0;
  EXPECT_EQ(bind_dynamic_port(
                7,
                [&](std::uint16_t) {
                  ++calls;
                  return EADDRINUSE;
                },
                err),
            0);
  EXPECT_EQ(err, EADDRINUSE);
  EXPECT_EQ(calls, static_cast<int>(kDynamicPorts));  // each port once
  calls = 0;
  EXPECT_EQ(bind_dynamic_port(
                7,
                [&](std::uint16_t) {
                  ++calls;
                  return ENOMEM;
                },
                err),
            0);
  EXPECT_EQ(err, ENOMEM);
  EXPECT_EQ(calls, 1);
}

}  // namespace
}  // namespace softrdma::lwtcp
