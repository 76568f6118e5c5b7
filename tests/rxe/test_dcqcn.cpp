// DCQCN's reaction point and the pacer against hand-computed steps, on a fake clock; the --cc
// spec's defaults.
#include <gtest/gtest.h>

#include <cmath>

#include "rxe/cc.h"
#include "rxe/dcqcn.h"

namespace softrdma::rxe {
namespace {

using namespace std::chrono_literals;
using Time = Dcqcn::Time;
const Time t0 = Time{} + 1s;  // any origin

TEST(Dcqcn, StartsAtLineRateUnlimited) {
  Dcqcn d;
  EXPECT_EQ(d.rate_bps(), 100e9);
  EXPECT_FALSE(d.limited());
  d.advance(t0 + 1s);
  EXPECT_EQ(d.rate_bps(), 100e9);
}

TEST(Dcqcn, EachCnpHalvesTheRateWhileAlphaIsOne) {
  Dcqcn d;
  // alpha starts at 1 and (1-g)*1+g stays 1: each cut is to 1-1/2 of the rate.
  for (int n = 1; n <= 5; ++n) {
    EXPECT_TRUE(d.on_cnp(t0 + n * 10us));
    EXPECT_DOUBLE_EQ(d.rate_bps(), 100e9 / std::pow(2, n)) << n;
    EXPECT_DOUBLE_EQ(d.alpha(), 1.0);
  }
  EXPECT_DOUBLE_EQ(d.target_bps(), 100e9 / 16);  // the rate before the last cut
  EXPECT_TRUE(d.limited());
}

TEST(Dcqcn, CnpsWithinTheRateReducePeriodAreIgnored) {
  Dcqcn d;
  EXPECT_TRUE(d.on_cnp(t0));
  EXPECT_FALSE(d.on_cnp(t0 + 1us));
  EXPECT_FALSE(d.on_cnp(t0 + 3999ns));
  EXPECT_DOUBLE_EQ(d.rate_bps(), 50e9);
  EXPECT_TRUE(d.on_cnp(t0 + 4us));
  EXPECT_DOUBLE_EQ(d.rate_bps(), 25e9);
}

TEST(Dcqcn, AlphaDecaysOncePerAlphaPeriodAndSetsTheNextCut) {
  Dcqcn d;
  d.on_cnp(t0);           // rate 50 Gb/s, alpha 1
  d.advance(t0 + 550us);  // 10 alpha periods
  const double a = std::pow(15.0 / 16, 10);
  EXPECT_NEAR(d.alpha(), a, 1e-12);
  // No timer step yet (1.5 ms): the rate is still 50 Gb/s.
  EXPECT_DOUBLE_EQ(d.rate_bps(), 50e9);
  EXPECT_TRUE(d.on_cnp(t0 + 550us));
  EXPECT_NEAR(d.rate_bps(), 50e9 * (1 - a / 2), 1);
  EXPECT_NEAR(d.alpha(), (1 - 1.0 / 16) * a + 1.0 / 16, 1e-12);
}

TEST(Dcqcn, TimerRecoversFastThenAdditivelyBackToLineRate) {
  Dcqcn d;
  d.on_cnp(t0);  // rate 50, target 100 (Gb/s)
  const double expect[] = {
      75,      87.5,     93.75,     96.875,       // fast recovery, 4 steps (T < F = 5)
      98.4375, 99.21875, 99.609375, 99.8046875};  // additive (target capped)
  for (int i = 0; i < 8; ++i) {
    d.advance(t0 + (i + 1) * 1500us - 1ns);
    EXPECT_EQ(d.timer_stage(), static_cast<unsigned>(i)) << i;
    d.advance(t0 + (i + 1) * 1500us);
    EXPECT_EQ(d.timer_stage(), static_cast<unsigned>(i + 1));
    EXPECT_DOUBLE_EQ(d.rate_bps(), expect[i] * 1e9) << "step " << i + 1;
    EXPECT_TRUE(d.limited());
  }
  // The 9th step reaches 100 * (1 - 1/1024): snapped to the line rate, no longer paced.
  d.advance(t0 + 9 * 1500us);
  EXPECT_EQ(d.rate_bps(), 100e9);
  EXPECT_FALSE(d.limited());
}

TEST(Dcqcn, AdditiveThenHyperIncreaseRaiseTheTarget) {
  DcqcnParams p;
  p.line_rate_bps = 10e9;
  Dcqcn d(p);
  for (int n = 0; n < 10; ++n) d.on_cnp(t0 + n * 5us);  // down to 10G / 1024
  const double target = d.target_bps();
  EXPECT_DOUBLE_EQ(target, 10e9 / 512);
  // Steps are fast recovery while both counters are below F = 5, additive from then on, and
  // hyper once both are above F.
  const Time t = t0 + 45us;  // the last cut: the timer runs from here
  d.advance(t + 4 * 1500us);
  d.on_sent(4 * p.byte_counter, t + 4 * 1500us);
  EXPECT_EQ(d.timer_stage(), 4u);
  EXPECT_EQ(d.byte_stage(), 4u);
  EXPECT_DOUBLE_EQ(d.target_bps(), target);  // 8 fast-recovery steps
  d.advance(t + 5 * 1500us);                 // T = 5: additive
  EXPECT_DOUBLE_EQ(d.target_bps(), target + 5e6);
  d.on_sent(p.byte_counter, t + 5 * 1500us);  // BC = 5: additive
  EXPECT_DOUBLE_EQ(d.target_bps(), target + 10e6);
  d.advance(t + 6 * 1500us);  // T = 6, BC = 5: additive
  EXPECT_DOUBLE_EQ(d.target_bps(), target + 15e6);
  d.on_sent(p.byte_counter, t + 6 * 1500us);  // both > 5: hyper
  EXPECT_DOUBLE_EQ(d.target_bps(), target + 65e6);
}

TEST(Dcqcn, ACnpFloodStopsAtTheFloorAndTheRateRecoversAfterIt) {
  Dcqcn d;
  Time t = t0;
  for (int n = 0; n < 100'000; ++n, t += 5us) {
    d.on_cnp(t);
    ASSERT_GE(d.rate_bps(), 1e6);
  }
  EXPECT_DOUBLE_EQ(d.rate_bps(), 1e6);
  // Fast recovery from the floor: halfway to the target (the floor too) changes nothing, but the
  // additive and hyper steps raise it again; the pacer keeps letting packets out meanwhile.
  Pacer pacer;
  int sent = 0;
  for (Time now = t; now < t + 1s; now += 100us) {
    d.advance(now);
    while (pacer.may_send(now, d.rate_bps())) {
      pacer.sent(1024, d.rate_bps(), now);
      ++sent;
    }
  }
  EXPECT_GT(d.rate_bps(), 1e6);
  EXPECT_GT(sent, 100);  // at 1 Mb/s alone a second holds 122 packets of 1 KiB
}

TEST(Pacer, LetsABurstThroughThenOnePacketPerInterval) {
  Pacer p;
  p.set_burst(10'000, 0ns);
  const double rate = 8e9;  // 1 byte per ns
  int n = 0;
  while (p.may_send(t0, rate)) {
    p.sent(1000, rate, t0);
    ++n;
  }
  EXPECT_EQ(n, 11);  // 10,000 bytes in the bucket, and the packet that empties it owes 1,000
  EXPECT_EQ(p.next_send(rate), t0 + 1us);
  EXPECT_FALSE(p.may_send(t0 + 999ns, rate));
  EXPECT_TRUE(p.may_send(t0 + 1us, rate));
  // Idle time refills no more than the bucket.
  n = 0;
  while (p.may_send(t0 + 1s, rate)) {
    p.sent(1000, rate, t0 + 1s);
    ++n;
  }
  EXPECT_EQ(n, 11);
}

TEST(Pacer, TheBucketIsAtLeastItsTimeAtTheRate) {
  Pacer p;
  p.set_burst(1000, 10us);
  const double rate = 8e9;  // 10 µs: 10,000 bytes
  int n = 0;
  while (p.may_send(t0, rate)) {
    p.sent(1000, rate, t0);
    ++n;
  }
  EXPECT_EQ(n, 11);
}

TEST(Pacer, CreditTakenAtALowRateIsNoWaitAtAHigherOne) {
  // A QP cut to 1 Mb/s empties its 64 KiB bucket; DCQCN then raises it to 1 Gb/s. It owes at
  // most one packet, at the new rate: 8 µs, not the half second the bucket took at 1 Mb/s (a
  // bucket kept as time at the old rate stalled RC QPs past their retry count).
  Pacer p;
  p.set_burst(64 * 1024, 20us);
  int n = 0;
  while (p.may_send(t0, 1e6)) {
    p.sent(1000, 1e6, t0);
    ++n;
  }
  EXPECT_EQ(n, 66);
  EXPECT_GT(p.next_send(1e6), t0 + 1ms);
  EXPECT_LE(p.next_send(1e9), t0 + 8us);
  EXPECT_TRUE(p.may_send(t0 + 8us, 1e9));
}

TEST(CcSpec, BacklogMarkingIsOnByDefaultAndOffOnRequest) {
  CcConfig c;
  std::string error;
  ASSERT_TRUE(parse_cc("", c, error)) << error;
  EXPECT_TRUE(c.dcqcn);
  EXPECT_TRUE(c.mark_backlog);
  ASSERT_TRUE(parse_cc("dcqcn,line_rate=10G", c, error)) << error;
  EXPECT_TRUE(c.mark_backlog);
  ASSERT_TRUE(parse_cc("dcqcn,backlog=off", c, error)) << error;
  EXPECT_FALSE(c.mark_backlog);
  ASSERT_TRUE(parse_cc("none", c, error)) << error;
  EXPECT_FALSE(c.dcqcn);  // nothing is marked without DCQCN (verbs/engine.cpp)
}

TEST(CcSpec, UdHoldIsTenMillisecondsUnlessSetAndNoneWithoutCc) {
  CcConfig c;
  std::string error;
  ASSERT_TRUE(parse_cc("dcqcn", c, error)) << error;
  EXPECT_EQ(c.ud_hold, std::chrono::milliseconds(50));
  ASSERT_TRUE(parse_cc("dcqcn,ud_hold_us=250", c, error)) << error;
  EXPECT_EQ(c.ud_hold, std::chrono::microseconds(250));
  ASSERT_TRUE(parse_cc("dcqcn,ud_hold_us=0", c, error)) << error;
  EXPECT_EQ(c.ud_hold.count(), 0);
  ASSERT_TRUE(parse_cc("none", c, error)) << error;
  EXPECT_EQ(c.ud_hold.count(), 0);
  EXPECT_FALSE(parse_cc("dcqcn,ud_hold_us=-1", c, error));
  EXPECT_NE(error.find("bad ud_hold_us"), std::string::npos) << error;
  EXPECT_FALSE(parse_cc("dcqcn,ud_hold_us=1000001", c, error));
  EXPECT_FALSE(parse_cc("none,ud_hold_us=5", c, error));
}

}  // namespace
}  // namespace softrdma::rxe
