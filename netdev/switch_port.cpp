#include "netdev/switch_port.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstring>

#include "netdev/pause_frame.h"

namespace softrdma::netdev {

namespace {

// Ethernet, IPv4 and UDP in front of each datagram on the port's wire.
constexpr std::uint32_t kFrameOverhead = 14 + 20 + 8;
// Datagrams taken from the backend per recv_batch, at most.
constexpr std::size_t kTakeBatch = 64, kTakeMax = 256;
// Datagrams found waiting are taken to have arrived over at most this long.
constexpr auto kMaxSpread = std::chrono::milliseconds(5);
// The queue holds, beyond the port's buffer, what drained but waits to be received: up to this
// long of the drain rate.
constexpr double kLateSeconds = 0.02;
constexpr std::uint64_t kMaxBuffer = std::uint64_t{64} << 20;
// PFC: senders heard from within this long feed the port and are paused with it; while the port
// stays above XON a paused one that still sends (its frames were in flight, or its pause ran
// out) is paused again at most this often, and one that is silent this often (its pause frame
// may have been lost); at most this many senders are remembered.
constexpr auto kFeeding = std::chrono::milliseconds(10);
constexpr auto kRefresh = std::chrono::microseconds(100);
constexpr auto kRefreshSilent = std::chrono::milliseconds(1);
constexpr std::size_t kMaxSources = 64, kMaxControl = 8;
// Pause frames leave with DSCP 48, as CNPs do.
constexpr std::uint8_t kControlTrafficClass = 48 << 2;

// "10G", "1.5M", "800" with powers of `base`.
bool number(const std::string& v, double base, double& out) {
  if (v.empty()) return false;
  double mult = 1;
  std::string digits = v;
  switch (v.back()) {
    case 'K':
    case 'k':
      mult = base;
      break;
    case 'M':
    case 'm':
      mult = base * base;
      break;
    case 'G':
    case 'g':
      mult = base * base * base;
      break;
    default:
      break;
  }
  if (mult != 1) digits.pop_back();
  double x = 0;
  auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), x);
  if (ec != std::errc{} || p != digits.data() + digits.size() || !std::isfinite(x) || x < 0) {
    return false;
  }
  out = x * mult;
  return true;
}

}  // namespace

bool parse_switch(const std::string& spec, SwitchConfig& out, std::string& error) {
  out = SwitchConfig{};
  const std::string expected =
      " (expected rate=RATE,buffer=BYTES,ecn=KMIN:KMAX:PMAX, e.g. rate=10G,buffer=1M,"
      "ecn=40K:400K:0.1)";
  bool rate = false, buffer = false, ecn = false;
  std::size_t pos = 0;
  while (pos <= spec.size()) {
    const std::size_t next = std::min(spec.find(',', pos), spec.size());
    const std::string item = spec.substr(pos, next - pos);
    pos = next + 1;
    const auto eq = item.find('=');
    const std::string key = item.substr(0, eq),
                      v = eq == std::string::npos ? "" : item.substr(eq + 1);
    double x = 0;
    if (key == "rate" && number(v, 1000, x) && x >= 1e3) {
      out.rate_bps = x;
      rate = true;
    } else if (key == "buffer" && number(v, 1024, x) && x >= double(kMaxDatagram) &&
               x <= double(kMaxBuffer)) {
      out.buffer = static_cast<std::uint64_t>(x);
      buffer = true;
    } else if (key == "ecn") {
      const auto c1 = v.find(':'), c2 = v.find(':', c1 == std::string::npos ? c1 : c1 + 1);
      double kmin = 0, kmax = 0, pmax = 0;
      if (c1 == std::string::npos || c2 == std::string::npos ||
          !number(v.substr(0, c1), 1024, kmin) ||
          !number(v.substr(c1 + 1, c2 - c1 - 1), 1024, kmax) ||
          !number(v.substr(c2 + 1), 1, pmax) || kmin > kmax || pmax > 1) {
        error = "bad ecn '" + v + "' (expected KMIN:KMAX:PMAX, KMIN <= KMAX bytes, 0 <= PMAX <= 1)";
        return false;
      }
      out.kmin = static_cast<std::uint64_t>(kmin);
      out.kmax = static_cast<std::uint64_t>(kmax);
      out.pmax = pmax;
      ecn = true;
    } else if (key == "seed" && number(v, 1, x)) {
      out.seed = static_cast<std::uint64_t>(x);
    } else if (key == "pfc") {
      const auto c = v.find(':');
      double xoff = 0, xon = 0;
      if (c == std::string::npos || !number(v.substr(0, c), 1024, xoff) ||
          !number(v.substr(c + 1), 1024, xon) || xoff < 1 || xon > xoff) {
        error = "bad pfc '" + v + "' (expected XOFF:XON, bytes of queue, 0 < XOFF, XON <= XOFF)";
        return false;
      }
      out.pfc = true;
      out.xoff = static_cast<std::uint64_t>(xoff);
      out.xon = static_cast<std::uint64_t>(xon);
    } else {
      error = "bad item '" + item + "' in '" + spec + "'" + expected;
      if (key == "rate") error = "bad rate '" + v + "' (bits/s, at least 1K: 10G, 800M)";
      if (key == "buffer") {
        error = "bad buffer '" + v + "' (bytes, one datagram (9216) to 64M: 512K, 2M)";
      }
      return false;
    }
  }
  if (!rate || !buffer || !ecn) {
    error = std::string("missing ") +
            (!rate     ? "rate"
             : !buffer ? "buffer"
                       : "ecn") +
            " in '" + spec + "'" + expected;
    return false;
  }
  if (out.kmax > out.buffer) {
    error = "ecn KMAX " + std::to_string(out.kmax) + " is beyond the buffer (" +
            std::to_string(out.buffer) + " bytes)";
    return false;
  }
  if (out.pfc && out.xoff > out.buffer) {
    error = "pfc XOFF " + std::to_string(out.xoff) + " is beyond the buffer (" +
            std::to_string(out.buffer) + " bytes)";
    return false;
  }
  return true;
}

SwitchPortNetdev::SwitchPortNetdev(std::unique_ptr<Netdev> inner, const SwitchConfig& cfg)
    : ForwardingNetdev(std::move(inner)), cfg_(cfg), rng_(cfg.seed) {
  const auto late = static_cast<std::uint64_t>(cfg_.rate_bps / 8 * kLateSeconds);
  const std::uint64_t bytes = std::min(cfg_.buffer + late, 2 * kMaxBuffer) + 2 * kMaxDatagram;
  store_.resize(bytes);
  slots_.resize(std::min<std::uint64_t>(bytes / 64 + 64, 1u << 18));
  rx_bufs_.assign(kTakeMax, std::vector<std::uint8_t>(kMaxDatagram));
  rx_pkts_.resize(kTakeMax);
  for (std::size_t i = 0; i < kTakeMax; ++i) {
    rx_pkts_[i].data = rx_bufs_[i].data();
    rx_pkts_[i].cap = static_cast<std::uint32_t>(rx_bufs_[i].size());
    rx_ptrs_.push_back(&rx_pkts_[i]);
  }
  ctrl_bufs_.assign(kMaxControl, std::vector<std::uint8_t>(kPauseFrameLen));
  ctrl_.resize(kMaxControl);
  pause_buf_.resize(kPauseFrameLen);
  sources_.reserve(kMaxSources);
}

std::uint64_t SwitchPortNetdev::backlog(Clock::time_point now) const {
  if (last_leave_ <= now) return 0;
  const double ns = static_cast<double>((last_leave_ - now).count());
  return static_cast<std::uint64_t>(std::llround(ns * cfg_.rate_bps / 8e9));
}

std::uint8_t* SwitchPortNetdev::alloc(std::uint32_t len) {
  if (count_ == 0) store_head_ = store_tail_ = 0;
  std::size_t off;
  if (count_ == 0 || store_tail_ > store_head_) {
    if (store_tail_ + len <= store_.size()) {
      off = store_tail_;
    } else if (len < store_head_) {
      off = 0;  // skip the end: a datagram never wraps
    } else {
      return nullptr;
    }
  } else if (store_tail_ + len < store_head_) {
    off = store_tail_;
  } else {
    return nullptr;
  }
  store_tail_ = off + len;
  return store_.data() + off;
}

bool SwitchPortNetdev::enqueue(const Packet& p, Clock::time_point now) {
  const std::uint64_t q = backlog(now);
  std::uint8_t* bytes = nullptr;
  if (q + p.len > cfg_.buffer || count_ == slots_.size() || !(bytes = alloc(p.len))) {
    if (cfg_.pfc) {
      pfc_arrival(p, q + p.len, now);  // keeps its sender paused
      return false;
    }
    bump(dropped_);
    if (observer_) observer_(FaultEvent::kRxQueueFull, p);
    return true;
  }
  Slot& s = slots_[(head_ + count_) % slots_.size()];
  ++count_;
  std::memcpy(bytes, p.data, p.len);
  s.meta = p;
  s.meta.data = bytes;
  s.meta.cap = p.len;
  s.end = static_cast<std::size_t>(bytes - store_.data()) + p.len;
  const auto t = std::chrono::nanoseconds(
      static_cast<std::int64_t>((p.len + kFrameOverhead) * 8e9 / cfg_.rate_bps));
  last_leave_ = std::max(last_leave_, now) + t;
  s.leave = last_leave_;
  const std::uint64_t depth = q + p.len;
  if (depth > peak_.load(std::memory_order_relaxed)) peak_.store(depth, std::memory_order_relaxed);
  if (cfg_.pfc) pfc_arrival(p, depth, now);
  return true;
}

SwitchPortNetdev::Source& SwitchPortNetdev::source_of(const Packet& p, Clock::time_point now) {
  Source* oldest = nullptr;
  for (Source& s : sources_) {
    if (s.addr == p.src) {
      s.seen = now;
      return s;
    }
    if (!oldest || s.seen < oldest->seen) oldest = &s;
  }
  if (sources_.size() < kMaxSources) {
    oldest = &sources_.emplace_back();
  } else if (oldest->paused) {
    send_pause(*oldest, false, now);  // forgotten: resume it rather than leave it paused
  }
  // Pause frames leave from the address the sender sent to (one of ours, not a group's).
  const auto ours = addresses();
  const IpAddr from = is_multicast(p.dst) && !ours.empty() ? ours[0] : p.dst;
  *oldest = Source{p.src, from, 0, false, now, {}};
  return *oldest;
}

void SwitchPortNetdev::pfc_arrival(const Packet& p, std::uint64_t depth, Clock::time_point now) {
  Source& s = source_of(p, now);
  s.prios = static_cast<std::uint8_t>(s.prios | (1u << pfc_priority(p.traffic_class)));
  if (!xoff_ && depth >= cfg_.xoff) {
    // Above XOFF: pause every sender feeding the port.
    xoff_ = true;
    for (Source& f : sources_) {
      if (now - f.seen <= kFeeding) send_pause(f, true, now);
    }
  } else if (xoff_ && (!s.paused || now - s.xoff_sent >= kRefresh)) {
    send_pause(s, true, now);  // still sending: in flight, or its pause ran out
  }
}

void SwitchPortNetdev::pfc_drain(Clock::time_point now) {
  if (!xoff_) return;
  const bool resume = held_ == 0 && backlog(now) <= cfg_.xon;
  if (resume) xoff_ = false;
  for (Source& s : sources_) {
    if (!s.paused) continue;
    if (resume) {
      send_pause(s, false, now);
    } else if (now - s.xoff_sent >= kRefreshSilent) {
      send_pause(s, true, now);
    }
  }
}

void SwitchPortNetdev::send_pause(Source& s, bool xoff, Clock::time_point now) {
  PauseFrame f;
  f.enabled = s.prios;
  if (xoff) f.quanta.fill(kMaxQuanta);
  Packet p;
  p.data = pause_buf_.data();
  p.cap = static_cast<std::uint32_t>(pause_buf_.size());
  build_pause(p, f);
  p.src = s.ours;
  p.dst = s.addr;
  p.dst_port = inner().roce_port();
  p.traffic_class = kControlTrafficClass;
  Packet* one = &p;
  if (inner().send_batch(std::span(&one, 1)) == 1) bump(pauses_);
  s.paused = xoff;
  s.xoff_sent = now;
}

void SwitchPortNetdev::keep_control(const Packet& p) {
  if (p.len > kPauseFrameLen) return;  // not a well-formed pause: the device counts it
  const std::size_t i = std::min(ctrl_count_, kMaxControl - 1);  // a later one supersedes
  Packet& c = ctrl_[i];
  c = p;
  c.data = ctrl_bufs_[i].data();
  c.cap = kPauseFrameLen;
  std::memcpy(c.data, p.data, p.len);
  ctrl_count_ = i + 1;
}

void SwitchPortNetdev::mark(Packet& p, std::uint64_t q) {
  // RED on ECN-capable datagrams: none below KMIN, PMAX scaled up to KMAX, all beyond.
  const std::uint8_t ecn = p.traffic_class & 3;
  if (ecn != 1 && ecn != 2) return;
  bool ce = false;
  if (q >= cfg_.kmax) {
    ce = q > cfg_.kmin || cfg_.kmax == 0;
  } else if (q > cfg_.kmin) {
    const double pr = cfg_.pmax * double(q - cfg_.kmin) / double(cfg_.kmax - cfg_.kmin);
    ce = std::uniform_real_distribution<double>(0, 1)(rng_) < pr;
  }
  if (ce) {
    p.traffic_class |= 3;
    bump(marked_);
  }
}

void SwitchPortNetdev::take_from_inner(Clock::time_point now) {
  // What waited in the backend arrived since the last look (the receiving thread may have been
  // off the core meanwhile): spread over that time, not all at once, it builds the queue it
  // would have built on a wire.
  const Clock::time_point since = std::max(last_take_, now - kMaxSpread);
  last_take_ = now;
  // A lossless port holding datagrams takes nothing more until they fit: the rest wait in the
  // backend, as frames wait upstream of a paused link.
  const std::size_t held = held_;
  std::size_t n = held;
  while (held == 0 && n < rx_ptrs_.size()) {
    const std::size_t got = inner().recv_batch(
        std::span(rx_ptrs_.data() + n, std::min(kTakeBatch, rx_ptrs_.size() - n)));
    n += got;
    if (got < kTakeBatch) break;
  }
  const auto taken = static_cast<std::int64_t>(n - held);
  std::size_t i = 0;
  for (; i < n; ++i) {
    const Packet& p = *rx_ptrs_[i];
    if (is_pause(p)) {
      keep_control(p);
      continue;
    }
    const auto at =
        i < held ? now : since + (now - since) * static_cast<std::int64_t>(i - held + 1) / taken;
    if (!enqueue(p, at)) break;
  }
  held_ = n - i;
  if (held_ > 0) {
    bump(held_count_, held_ - (held > i ? held - i : 0));  // newly held
    std::rotate(rx_ptrs_.begin(), rx_ptrs_.begin() + static_cast<std::ptrdiff_t>(i),
                rx_ptrs_.begin() + static_cast<std::ptrdiff_t>(n));
  }
}

std::size_t SwitchPortNetdev::recv_batch(std::span<Packet* const> pkts) {
  return recv_batch_at(pkts, Clock::now());
}

std::size_t SwitchPortNetdev::recv_batch_at(std::span<Packet* const> pkts, Clock::time_point now) {
  take_from_inner(now);
  std::size_t n = 0;
  for (std::size_t c = 0; c < ctrl_count_ && n < pkts.size(); ++c) hand_over(ctrl_[c], *pkts[n++]);
  ctrl_count_ = 0;
  while (n < pkts.size() && count_ > 0 && slots_[head_].leave <= now) {
    const Slot& s = slots_[head_];
    Packet& out = *pkts[n++];
    hand_over(s.meta, out);
    // Marked as it leaves, for the queue behind it: the notification point learns at once.
    mark(out, backlog(s.leave));
    store_head_ = s.end;
    head_ = (head_ + 1) % slots_.size();
    --count_;
  }
  if (cfg_.pfc) pfc_drain(now);
  return n;
}

int SwitchPortNetdev::next_timeout_ms() const {
  int t = inner().next_timeout_ms();
  if (count_ > 0) {
    const auto wait = slots_[head_].leave - Clock::now();
    const int ms =
        wait <= Clock::duration::zero()
            ? 0
            : static_cast<int>(std::chrono::ceil<std::chrono::milliseconds>(wait).count());
    if (t < 0 || ms < t) t = ms;
  }
  return t;
}

bool SwitchPortNetdev::prepare_sleep(bool wake_me) {
  if (count_ > 0 && slots_[head_].leave <= Clock::now()) return false;
  return inner().prepare_sleep(wake_me);
}

Counters SwitchPortNetdev::counters() const {
  Counters c = inner().counters();
  c.switch_ce_marked = marked_.load(std::memory_order_relaxed);
  c.switch_dropped = dropped_.load(std::memory_order_relaxed);
  c.switch_queue_peak = peak_.load(std::memory_order_relaxed);
  c.tx_pause = pauses_.load(std::memory_order_relaxed);
  c.switch_held = held_count_.load(std::memory_order_relaxed);
  return c;
}

void SwitchPortNetdev::set_fault_observer(FaultObserver o) {
  observer_ = o;
  inner().set_fault_observer(std::move(o));
}

}  // namespace softrdma::netdev
