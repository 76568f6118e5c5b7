// An emulated switch egress port in front of a device's receive path (`--switch`,
// SOFTRDMA_SWITCH): datagrams the backend receives queue in a buffer of BYTES drained at RATE;
// ECN-capable ones are marked CE as they leave, with RED probability between KMIN and KMAX of
// the queue behind them (up to PMAX, all above KMAX); a datagram that does not fit is
// tail-dropped and counted. With `pfc=XOFF:XON` the port is lossless instead: above XOFF it
// pauses the senders feeding it (PFC frames, netdev/pause_frame.h) until it drains below XON,
// and a datagram that does not fit stays in the backend. See docs/congestion.md.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "netdev/forwarding.h"

namespace softrdma::netdev {

struct SwitchConfig {
  double rate_bps = 0;               // drain rate
  std::uint64_t buffer = 0;          // queue capacity, bytes
  std::uint64_t kmin = 0, kmax = 0;  // RED marking thresholds, bytes of queue
  double pmax = 0;                   // marking probability at KMAX
  std::uint64_t seed = 1;            // the marking decisions' generator
  bool pfc = false;                  // lossless: pause the senders instead of dropping
  std::uint64_t xoff = 0, xon = 0;   // pause above XOFF bytes of queue, resume below XON
};

// Parses "rate=10G,buffer=512K,ecn=20K:200K:0.01[,seed=N]" (rate in bits/s with K, M or G,
// powers of 1000; sizes in bytes with K, M or G, powers of 1024). False and `error` on a bad
// or missing item, or an impossible one (KMIN > KMAX, KMAX > buffer, PMAX outside 0..1, a
// buffer smaller than one datagram). `,pfc=XOFF:XON` (bytes) makes it lossless; XON above XOFF,
// XOFF of 0 or beyond the buffer are errors.
bool parse_switch(const std::string& spec, SwitchConfig& out, std::string& error);

class SwitchPortNetdev : public ForwardingNetdev {
 public:
  using Clock = std::chrono::steady_clock;
  SwitchPortNetdev(std::unique_ptr<Netdev> inner, const SwitchConfig& cfg);

  // Takes what the backend has into the queue, then returns what has drained by now.
  std::size_t recv_batch(std::span<Packet* const> pkts) override;
  // Until the head of the queue drains (rounded up), or the backend's.
  int next_timeout_ms() const override;
  bool prepare_sleep(bool wake_me) override;
  Counters counters() const override;
  void set_fault_observer(FaultObserver o) override;

  // For tests: the same with an explicit time.
  std::size_t recv_batch_at(std::span<Packet* const> pkts, Clock::time_point now);
  std::uint64_t backlog_bytes(Clock::time_point now) const { return backlog(now); }
  bool pausing() const { return xoff_; }  // pfc: XOFF sent, XON not yet

 private:
  struct Slot {
    Packet meta;              // data points into store_
    Clock::time_point leave;  // when its last bit has drained
    std::size_t end;          // one past its bytes in store_
  };
  // Bytes not yet drained at `now`: the queue a real port would hold.
  std::uint64_t backlog(Clock::time_point now) const;
  std::uint8_t* alloc(std::uint32_t len);
  void take_from_inner(Clock::time_point now);
  // False when it does not fit a lossless port: it stays held (a lossy one drops it).
  bool enqueue(const Packet& p, Clock::time_point now);
  // PFC: a sender feeding the port, and the frames that pause or resume it.
  struct Source {
    IpAddr addr, ours;
    std::uint8_t prios = 0;  // the priorities it sent on
    bool paused = false;
    Clock::time_point seen{}, xoff_sent{};
  };
  Source& source_of(const Packet& p, Clock::time_point now);
  void pfc_arrival(const Packet& p, std::uint64_t depth, Clock::time_point now);
  void pfc_drain(Clock::time_point now);
  void send_pause(Source& s, bool xoff, Clock::time_point now);
  void keep_control(const Packet& p);
  void mark(Packet& p, std::uint64_t queue_behind);

  SwitchConfig cfg_;
  std::mt19937_64 rng_;
  FaultObserver observer_;
  // The queue: descriptors in a ring, bytes in a ring (a datagram never wraps: the tail skips to
  // the start when it would), both allocated once.
  std::vector<Slot> slots_;
  std::size_t head_ = 0, count_ = 0;
  std::vector<std::uint8_t> store_;
  std::size_t store_head_ = 0, store_tail_ = 0;
  Clock::time_point last_leave_{};
  Clock::time_point last_take_{};  // the last look at the backend
  // Scratch for receiving from the backend.
  std::vector<std::vector<std::uint8_t>> rx_bufs_;
  std::vector<Packet> rx_pkts_;
  std::vector<Packet*> rx_ptrs_;
  // Datagrams at the front of rx_ptrs_ taken from the backend but not yet in the queue: a
  // lossless port that was full holds them, and takes nothing more until they fit.
  std::size_t held_ = 0;
  std::vector<Source> sources_;
  bool xoff_ = false;
  // Pause frames received: control frames do not queue behind data (as MAC control on a link).
  std::vector<std::vector<std::uint8_t>> ctrl_bufs_;
  std::vector<Packet> ctrl_;
  std::size_t ctrl_count_ = 0;
  std::vector<std::uint8_t> pause_buf_;
  std::atomic<std::uint64_t> marked_{0}, dropped_{0}, peak_{0}, pauses_{0},
      held_count_{0};  // read by counters()
};

}  // namespace softrdma::netdev
