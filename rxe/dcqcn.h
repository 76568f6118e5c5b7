// DCQCN's reaction point (Zhu et al., SIGCOMM 2015, as mlx5 runs it): one QP's sending rate, cut
// on each CNP and raised again by a timer and a byte counter. Pure state: the caller passes the
// time (a fake clock in tests), so every step is reproducible. See docs/congestion.md.
#pragma once

#include <chrono>
#include <cstdint>

namespace softrdma::rxe {

// The parameters, named after mlx5's (rpg_*, dce_tcp_g, rate_reduce_monitor_period). The defaults
// are the mlx5-like set of HPCC's model, with DOCA's floor and decrease limit and the DCQCN
// paper's byte counter.
struct DcqcnParams {
  double line_rate_bps = 100e9;  // where a QP starts and what it never exceeds (the port: 4X EDR)
  double min_rate_bps = 1e6;     // rpg_min_rate: no CNP takes a QP below this
  double g = 1.0 / 16;           // alpha's gain (dce_tcp_g)
  double initial_alpha = 1.0;    // alpha before the first CNP
  double min_dec_factor = 0.5;   // rpg_min_dec_fac: one CNP cuts the rate at most to this share
  std::chrono::nanoseconds rate_reduce_period{4'000};  // CNPs sooner after a cut are ignored
  std::chrono::nanoseconds alpha_period{55'000};       // alpha decays once per period without CNP
  std::chrono::nanoseconds timer_period{1'500'000};    // the rate-increase timer (T)
  std::uint64_t byte_counter = 10'000'000;             // the rate-increase byte counter (B)
  unsigned fast_recovery_steps = 5;                    // F
  double ai_rate_bps = 5e6;                            // additive increase of the target (R_AI)
  double hai_rate_bps = 50e6;                          // hyper increase of the target (R_HAI)
};

class Dcqcn {
 public:
  using Time = std::chrono::steady_clock::time_point;
  explicit Dcqcn(const DcqcnParams& p = {});

  // A CNP arrived for this QP. True when it cut the rate (rp_cnp_handled); false when it came
  // within rate_reduce_period of the last cut and was ignored (rp_cnp_ignored).
  bool on_cnp(Time now);
  // `bytes` left the QP: the byte counter's increase steps.
  void on_sent(std::uint64_t bytes, Time now);
  // Applies the timers (alpha decay, rate-increase timer) that fell due up to `now`.
  void advance(Time now);

  double rate_bps() const { return rate_; }
  double target_bps() const { return target_; }
  double alpha() const { return alpha_; }
  // Below line rate: the QP is paced.
  bool limited() const { return rate_ < p_.line_rate_bps; }
  const DcqcnParams& params() const { return p_; }
  // Increase steps since the last cut, by the timer and by the byte counter.
  unsigned timer_stage() const { return timer_stage_; }
  unsigned byte_stage() const { return byte_stage_; }

 private:
  // One increase step (timer or byte counter): fast recovery, additive or hyper increase.
  void increase();

  DcqcnParams p_;
  double rate_, target_, alpha_;
  unsigned timer_stage_ = 0, byte_stage_ = 0;
  std::uint64_t bytes_ = 0;  // since the last byte-counter step
  Time last_cut_{};          // the last CNP that cut the rate
  bool cut_ = false;         // a CNP has cut the rate
  Time next_alpha_{}, next_timer_{};
};

// A token-bucket pacer: the bucket fills at the QP's current rate up to its depth, a packet may
// leave while it is not empty and takes its length out (so the debt is at most one packet). The
// depth is bytes, not time: credit a QP saved at a low rate never becomes a wait at a higher one.
// No allocation, no lock: one per QP.
class Pacer {
 public:
  using Time = Dcqcn::Time;
  // May a packet go at `now`, paced at `rate_bps`?
  bool may_send(Time now, double rate_bps) const { return level(now, rate_bps) >= 0; }
  // When the next packet may go at that rate.
  Time next_send(double rate_bps) const;
  void sent(std::uint32_t bytes, double rate_bps, Time now);
  // The bucket's depth: `bytes`, or what the rate sends in `at_least` if that is more.
  void set_burst(std::uint32_t bytes, std::chrono::nanoseconds at_least) {
    burst_bytes_ = bytes;
    burst_time_ = at_least;
  }

 private:
  double depth(double rate_bps) const;
  double level(Time now, double rate_bps) const;  // bytes in the bucket at `now`

  double tokens_ = 0;  // at last_ (negative: owed)
  Time last_{};        // the epoch: the bucket starts full
  // A sleeping sender wakes up tens of microseconds late on a loaded host; a 16 KiB bucket lets
  // it catch up, where one of 20 µs lost the difference (docs/congestion.md).
  std::uint32_t burst_bytes_ = 16 * 1024;
  std::chrono::nanoseconds burst_time_{20'000};
};

}  // namespace softrdma::rxe
