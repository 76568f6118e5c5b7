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

// A next-send-time pacer: a QP may send while the bucket's time is at most `burst` ahead of now;
// each packet moves it on by its length at the rate. No allocation, no lock: one per QP.
class Pacer {
 public:
  using Time = Dcqcn::Time;
  // May a packet go at `now`? (GCRA: the theoretical send time is at most `burst` ahead.)
  bool may_send(Time now) const { return free_ - burst_ <= now; }
  // When the next packet may go.
  Time next_send() const { return free_ - burst_; }
  void sent(std::uint32_t bytes, double rate_bps, Time now);
  // Bucket depth: what may leave back to back, as time at the rate.
  void set_burst(std::chrono::nanoseconds b) { burst_ = b; }

 private:
  Time free_{};
  std::chrono::nanoseconds burst_{std::chrono::microseconds(20)};
};

}  // namespace softrdma::rxe
