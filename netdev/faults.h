// Fault injection on the send side of a backend: drop, duplicate, reorder, corrupt and delay
// datagrams with given probabilities, deterministically for a seed; every fault is counted.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "netdev/netdev.h"

namespace softrdma::netdev {

struct FaultConfig {
  double drop = 0, duplicate = 0, reorder = 0, corrupt = 0, delay = 0;  // probabilities
  unsigned delay_ms = 1;
  std::uint64_t seed = 0;
  bool seeded = false;  // false: seeded from std::random_device
  bool any() const { return drop > 0 || duplicate > 0 || reorder > 0 || corrupt > 0 || delay > 0; }
};

// Parses "drop=0.05,reorder=0.02,corrupt=0.001,duplicate=0.01,delay=0.1,delay_ms=5,seed=7".
// Keys may appear in any order; "" means no faults. On a bad key, number or range returns
// false with `error` saying which; `out` is then unspecified.
bool parse_faults(const std::string& spec, FaultConfig& out, std::string& error);
// The spec string parse_faults would read back into `cfg`.
std::string to_string(const FaultConfig& cfg);

// Decides the fate of each datagram about to leave a device. Thread-safe: one internal lock,
// held while `emit` runs, so emitted packets leave in the decided order.
//
// For each packet (its ICRC already filled), in this order: drop; corrupt (a private copy with
// 1–3 random bits flipped); duplicate (sent twice); then either delay (held for delay_ms) or
// reorder (held until the next packet that goes out now has gone, or ~1 ms at most).
class FaultInjector {
 public:
  using Clock = std::chrono::steady_clock;
  // Called with packets to put on the wire now. Their data is valid only during the call.
  using Emit = std::function<void(std::span<const Packet>)>;

  FaultInjector(const FaultConfig& cfg, AtomicCounters& counters);
  const FaultConfig& config() const { return cfg_; }

  // Runs `pkts` through the faults and emits what leaves now (held packets that have become
  // due first, then this batch).
  void process(std::span<Packet* const> pkts, const Emit& emit,
               Clock::time_point now = Clock::now());
  // Emits held packets that are due.
  void service(const Emit& emit, Clock::time_point now = Clock::now());
  // Milliseconds until a held packet is due (0 if one is due now), or -1 when none is held.
  int next_timeout_ms(Clock::time_point now = Clock::now()) const;
  // Emits every held packet now, due or not (on close).
  void flush(const Emit& emit);
  std::size_t held() const;
  // Told of every fault as it is decided (see FaultObserver), with the packet passed to
  // process(). Called with the injector's lock held: it must not call back into the injector.
  void set_observer(FaultObserver observer);

  static constexpr std::chrono::milliseconds kReorderHoldMax{1};

 private:
  struct Held {
    Packet meta;  // addressing and length; data points into `bytes` when emitted
    std::vector<std::uint8_t> bytes;
    Clock::time_point due;
  };
  Held copy_of(const Packet& p, Clock::time_point due);
  void release_due(Clock::time_point now, std::vector<Packet>& out);
  void release_reordered(std::vector<Packet>& out);
  void emit_out(const Emit& emit, std::vector<Packet>& out);

  FaultConfig cfg_;
  AtomicCounters& counters_;
  mutable std::mutex mu_;
  std::mt19937_64 rng_;
  std::deque<Held> delayed_;    // due times never decrease (delay_ms is fixed)
  std::deque<Held> reordered_;  // go out right after the next packet sent now
  // Packets released in the current emit; kept alive until emit returns.
  std::vector<Held> releasing_;
  std::deque<Held> scratch_;  // corrupted copies for the current batch
  FaultObserver observer_;
};

// The shared tail of every backend's send_batch: the first `accepted` packets (checked,
// stamped, ICRC filled) go through `faults` when there is one, else straight to `emit` in
// contiguous runs of at most 64; the refused rest is counted in tx_errors. Returns `accepted`.
std::size_t emit_batch(FaultInjector* faults, std::span<Packet* const> pkts, std::size_t accepted,
                       AtomicCounters& counters, const FaultInjector::Emit& emit);
// The same, except that without `faults` the accepted packets go to `direct` whole, as the
// caller's pointers (no copies): a backend that fills ICRCs and IPv4 IDs as packets leave (for
// the ID its UDP GSO segment gets) sends them there.
std::size_t emit_batch(FaultInjector* faults, std::span<Packet* const> pkts, std::size_t accepted,
                       AtomicCounters& counters, const FaultInjector::Emit& emit,
                       const std::function<void(std::span<Packet* const>)>& direct);

}  // namespace softrdma::netdev
