#include "rxe/dcqcn.h"

#include <algorithm>
#include <cmath>

namespace softrdma::rxe {

namespace {
// Timer steps applied at once after a long pause; beyond, the timer restarts from now.
constexpr unsigned kMaxCatchUp = 4096;
}  // namespace

Dcqcn::Dcqcn(const DcqcnParams& p)
    : p_(p), rate_(p.line_rate_bps), target_(p.line_rate_bps), alpha_(p.initial_alpha) {}

bool Dcqcn::on_cnp(Time now) {
  advance(now);
  if (cut_ && now - last_cut_ < p_.rate_reduce_period) return false;
  target_ = rate_;
  const double factor = std::max(1.0 - alpha_ / 2, p_.min_dec_factor);
  rate_ = std::max(rate_ * factor, p_.min_rate_bps);
  alpha_ = (1 - p_.g) * alpha_ + p_.g;
  timer_stage_ = byte_stage_ = 0;
  bytes_ = 0;
  last_cut_ = now;
  cut_ = true;
  next_alpha_ = now + p_.alpha_period;
  next_timer_ = now + p_.timer_period;
  return true;
}

void Dcqcn::on_sent(std::uint64_t bytes, Time now) {
  if (!limited()) return;
  advance(now);
  bytes_ += bytes;
  while (bytes_ >= p_.byte_counter && limited()) {
    bytes_ -= p_.byte_counter;
    ++byte_stage_;
    increase();
  }
}

void Dcqcn::advance(Time now) {
  if (!cut_) return;
  if (now >= next_alpha_) {
    const auto n = (now - next_alpha_) / p_.alpha_period + 1;
    alpha_ *= std::pow(1 - p_.g, static_cast<double>(n));
    next_alpha_ += n * p_.alpha_period;
  }
  unsigned steps = 0;
  while (limited() && now >= next_timer_ && steps++ < kMaxCatchUp) {
    ++timer_stage_;
    increase();
    next_timer_ += p_.timer_period;
  }
  if (now >= next_timer_) next_timer_ = now + p_.timer_period;
}

void Dcqcn::increase() {
  const unsigned f = p_.fast_recovery_steps;
  if (std::max(timer_stage_, byte_stage_) < f) {
    // Fast recovery: halfway back to the rate before the cut.
  } else if (std::min(timer_stage_, byte_stage_) > f) {
    target_ += p_.hai_rate_bps;  // hyper increase
  } else {
    target_ += p_.ai_rate_bps;  // additive increase
  }
  target_ = std::min(target_, p_.line_rate_bps);
  rate_ = (target_ + rate_) / 2;
  // Halving never quite arrives: within 1/1024 of the line the QP is no longer limited.
  if (rate_ >= p_.line_rate_bps * (1 - 1.0 / 1024)) rate_ = p_.line_rate_bps;
}

double Pacer::depth(double rate_bps) const {
  return std::max(static_cast<double>(burst_bytes_),
                  rate_bps * static_cast<double>(burst_time_.count()) / 8e9);
}

double Pacer::level(Time now, double rate_bps) const {
  const auto since = static_cast<double>(std::chrono::nanoseconds(now - last_).count());
  return std::min(depth(rate_bps), tokens_ + since * rate_bps / 8e9);
}

Pacer::Time Pacer::next_send(double rate_bps) const {
  if (tokens_ >= 0) return last_;
  return last_ +
         std::chrono::nanoseconds(static_cast<std::int64_t>(std::ceil(-tokens_ * 8e9 / rate_bps)));
}

void Pacer::sent(std::uint32_t bytes, double rate_bps, Time now) {
  tokens_ = level(now, rate_bps) - bytes;
  last_ = now;
}

}  // namespace softrdma::rxe
