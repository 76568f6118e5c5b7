#include "netdev/faults.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "netdev/spec_text.h"

namespace softrdma::netdev {

using spec::parse_number;
using spec::trim;

bool parse_faults(const std::string& spec, FaultConfig& out, std::string& error) {
  out = FaultConfig{};
  std::string_view rest = trim(spec);
  if (rest.empty()) return true;
  std::vector<std::string> seen;
  while (true) {
    const std::size_t comma = rest.find(',');
    const std::string_view item = trim(rest.substr(0, comma));
    const std::size_t eq = item.find('=');
    if (item.empty() || eq == std::string_view::npos) {
      error =
          "fault spec \"" + spec + "\": expected key=value, found \"" + std::string(item) + "\"";
      return false;
    }
    const std::string key(trim(item.substr(0, eq)));
    const std::string_view value = trim(item.substr(eq + 1));
    if (std::find(seen.begin(), seen.end(), key) != seen.end()) {
      error = "fault spec: \"" + key + "\" given twice";
      return false;
    }
    seen.push_back(key);
    double* prob = key == "drop"        ? &out.drop
                   : key == "duplicate" ? &out.duplicate
                   : key == "reorder"   ? &out.reorder
                   : key == "corrupt"   ? &out.corrupt
                   : key == "delay"     ? &out.delay
                                        : nullptr;
    if (prob) {
      if (!parse_number(value, *prob) || !(*prob >= 0.0 && *prob <= 1.0)) {
        error = "fault spec: " + key + "=" + std::string(value) +
                ": expected a probability between 0 and 1";
        return false;
      }
    } else if (key == "delay_ms") {
      if (!parse_number(value, out.delay_ms) || out.delay_ms > 60000) {
        error = "fault spec: delay_ms=" + std::string(value) +
                ": expected whole milliseconds from 0 to 60000";
        return false;
      }
    } else if (key == "seed") {
      if (!parse_number(value, out.seed)) {
        error = "fault spec: seed=" + std::string(value) + ": expected an unsigned 64-bit integer";
        return false;
      }
      out.seeded = true;
    } else {
      error = "fault spec: unknown key \"" + key +
              "\" (known: drop, duplicate, reorder, corrupt, delay, delay_ms, seed)";
      return false;
    }
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  return true;
}

std::string to_string(const FaultConfig& cfg) {
  std::string s;
  auto add = [&s](const char* key, auto v) {
    std::array<char, 32> buf{};
    auto [ptr, ec] = std::to_chars(buf.data(), buf.data() + buf.size(), v);
    (void)ec;
    if (!s.empty()) s += ',';
    s += key;
    s += '=';
    s.append(buf.data(), ptr);
  };
  if (cfg.drop > 0) add("drop", cfg.drop);
  if (cfg.duplicate > 0) add("duplicate", cfg.duplicate);
  if (cfg.reorder > 0) add("reorder", cfg.reorder);
  if (cfg.corrupt > 0) add("corrupt", cfg.corrupt);
  if (cfg.delay > 0) add("delay", cfg.delay);
  if (cfg.delay > 0 || cfg.delay_ms != 1) add("delay_ms", cfg.delay_ms);
  if (cfg.seeded) add("seed", cfg.seed);
  return s;
}

FaultInjector::FaultInjector(const FaultConfig& cfg, AtomicCounters& counters)
    : cfg_(cfg), counters_(counters), rng_(cfg.seeded ? cfg.seed : std::random_device{}()) {}

FaultInjector::Held FaultInjector::copy_of(const Packet& p, Clock::time_point due) {
  Held h;
  h.meta = p;
  h.bytes.assign(p.data, p.data + p.len);
  h.meta.data = nullptr;
  h.meta.cap = p.len;
  h.due = due;
  return h;
}

void FaultInjector::release_reordered(std::vector<Packet>& out) {
  while (!reordered_.empty()) {
    releasing_.push_back(std::move(reordered_.front()));
    reordered_.pop_front();
    Held& h = releasing_.back();
    h.meta.data = h.bytes.data();  // the heap buffer stays put when `releasing_` grows
    out.push_back(h.meta);
  }
}

void FaultInjector::release_due(Clock::time_point now, std::vector<Packet>& out) {
  for (std::deque<Held>* q : {&delayed_, &reordered_}) {
    while (!q->empty() && q->front().due <= now) {
      releasing_.push_back(std::move(q->front()));
      q->pop_front();
      Held& h = releasing_.back();
      h.meta.data = h.bytes.data();
      out.push_back(h.meta);
    }
  }
}

void FaultInjector::emit_out(const Emit& emit, std::vector<Packet>& out) {
  if (!out.empty()) emit(std::span<const Packet>(out));
  out.clear();
  releasing_.clear();
  scratch_.clear();
}

void FaultInjector::process(std::span<Packet* const> pkts, const Emit& emit,
                            Clock::time_point now) {
  std::lock_guard lock(mu_);
  std::vector<Packet> out;
  out.reserve(pkts.size() + reordered_.size() + 4);
  release_due(now, out);
  std::uniform_real_distribution<double> uni(0.0, 1.0);
  for (Packet* p : pkts) {
    // Always draw five numbers, so one packet's fate does not shift the next one's.
    std::array<double, 5> u;
    for (double& x : u) x = uni(rng_);
    if (u[0] < cfg_.drop) {
      bump(counters_.fault_dropped);
      if (observer_) observer_(FaultEvent::kDrop, *p);
      continue;
    }
    Packet cur = *p;
    if (u[1] < cfg_.corrupt && cur.len > 0) {
      if (observer_) observer_(FaultEvent::kCorrupt, *p);
      scratch_.push_back(copy_of(cur, now));
      std::vector<std::uint8_t>& b = scratch_.back().bytes;
      // 1–3 distinct bits, never in BTH byte 4 (masked by the ICRC, so a flip there would
      // go unnoticed).
      const std::size_t nbits = b.size() * 8;
      const int flips = std::uniform_int_distribution<int>(1, 3)(rng_);
      std::array<std::size_t, 3> chosen{};
      for (int i = 0; i < flips; ++i) {
        std::size_t bit;
        do {
          bit = std::uniform_int_distribution<std::size_t>(0, nbits - 1)(rng_);
        } while ((bit / 8 == 4 && b.size() > 4) ||
                 std::find(chosen.begin(), chosen.begin() + i, bit) != chosen.begin() + i);
        chosen[i] = bit;
        b[bit / 8] ^= static_cast<std::uint8_t>(1u << (bit % 8));
      }
      cur.data = b.data();
      bump(counters_.fault_corrupted);
    }
    int copies = 1;
    if (u[2] < cfg_.duplicate) {
      copies = 2;
      bump(counters_.fault_duplicated);
      if (observer_) observer_(FaultEvent::kDuplicate, *p);
    }
    if (u[3] < cfg_.delay) {
      if (observer_) observer_(FaultEvent::kDelay, *p);
      for (int i = 0; i < copies; ++i) {
        delayed_.push_back(copy_of(cur, now + std::chrono::milliseconds(cfg_.delay_ms)));
      }
      bump(counters_.fault_delayed);
    } else if (u[4] < cfg_.reorder) {
      if (observer_) observer_(FaultEvent::kReorder, *p);
      for (int i = 0; i < copies; ++i) reordered_.push_back(copy_of(cur, now + kReorderHoldMax));
      bump(counters_.fault_reordered);
    } else {
      for (int i = 0; i < copies; ++i) out.push_back(cur);
      release_reordered(out);
    }
  }
  emit_out(emit, out);
}

void FaultInjector::service(const Emit& emit, Clock::time_point now) {
  std::lock_guard lock(mu_);
  if (delayed_.empty() && reordered_.empty()) return;
  std::vector<Packet> out;
  release_due(now, out);
  emit_out(emit, out);
}

void FaultInjector::flush(const Emit& emit) {
  std::lock_guard lock(mu_);
  std::vector<Packet> out;
  release_due(Clock::time_point::max(), out);
  emit_out(emit, out);
}

int FaultInjector::next_timeout_ms(Clock::time_point now) const {
  std::lock_guard lock(mu_);
  bool any = false;
  Clock::time_point due{};
  for (const std::deque<Held>* q : {&delayed_, &reordered_}) {
    if (q->empty()) continue;
    if (!any || q->front().due < due) due = q->front().due;
    any = true;
  }
  if (!any) return -1;
  if (due <= now) return 0;
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(due - now).count();
  return static_cast<int>((us + 999) / 1000);  // round up: never wake before it is due
}

void FaultInjector::set_observer(FaultObserver observer) {
  std::lock_guard lock(mu_);
  observer_ = std::move(observer);
}

std::size_t FaultInjector::held() const {
  std::lock_guard lock(mu_);
  return delayed_.size() + reordered_.size();
}

std::size_t emit_batch(FaultInjector* faults, std::span<Packet* const> all, std::size_t accepted,
                       AtomicCounters& counters, const FaultInjector::Emit& emit) {
  if (accepted < all.size()) bump(counters.tx_errors, all.size() - accepted);
  if (accepted == 0) return 0;
  const std::span<Packet* const> pkts = all.first(accepted);
  if (faults) {
    faults->process(pkts, emit);
    return accepted;
  }
  constexpr std::size_t kRun = 64;
  std::array<Packet, kRun> run;
  for (std::size_t i = 0; i < pkts.size(); i += kRun) {
    const std::size_t m = std::min(kRun, pkts.size() - i);
    for (std::size_t j = 0; j < m; ++j) run[j] = *pkts[i + j];
    emit(std::span<const Packet>(run.data(), m));
  }
  return accepted;
}

std::size_t emit_batch(FaultInjector* faults, std::span<Packet* const> all, std::size_t accepted,
                       AtomicCounters& counters, const FaultInjector::Emit& emit,
                       const std::function<void(std::span<Packet* const>)>& direct) {
  if (faults) return emit_batch(faults, all, accepted, counters, emit);
  if (accepted < all.size()) bump(counters.tx_errors, all.size() - accepted);
  if (accepted > 0) direct(all.first(accepted));
  return accepted;
}

}  // namespace softrdma::netdev
