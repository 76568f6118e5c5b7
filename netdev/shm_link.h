// The host-local path of the udp backend: a device sends to another softrdma device of this host
// (same network namespace) through a shared-memory ring instead of the kernel's UDP stack. The
// datagrams are the same bytes, ICRC included; only the kernel is left out.
//
// Set-up: every device listens on the abstract unix socket "softrdma-shm/<port>/<address>". A
// sender with datagrams for that address and port connects and hands over a ring (ShmRing, a
// sealed memfd) and a bell (an eventfd it writes when the receiver sleeps). Until the receiver
// has mapped the ring, and again whenever the path breaks (either side gone, a broken ring), the
// datagrams take the kernel's path; a destination nobody listens for is tried again each second.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "netdev/netdev.h"
#include "netdev/placement.h"
#include "netdev/shm_ring.h"

namespace softrdma::netdev {

class ShmLinks {
 public:
  // Listens for senders to addr:port and adds its fds to `epfd` (the backend's wait fd).
  // nullptr with `error` set when the socket cannot be set up (e.g. the name is taken).
  static std::unique_ptr<ShmLinks> open(const IpAddr& addr, std::uint16_t port, int epfd,
                                        AtomicCounters& counters, std::string& error);
  ~ShmLinks();  // inbound rings are closed (their senders go back to the kernel's path)
  ShmLinks(const ShmLinks&) = delete;
  ShmLinks& operator=(const ShmLinks&) = delete;

  // --- send side: one Batch at a time (it holds the send lock); any thread.
  class Batch {
   public:
    explicit Batch(ShmLinks* links);  // links may be null: takes nothing
    ~Batch();                         // makes the datagrams visible, rings sleeping receivers
    Batch(const Batch&) = delete;
    Batch& operator=(const Batch&) = delete;
    // Whether p's destination is reached through a ring now.
    bool takes(const Packet& p);
    // Puts p in its destination's ring; false when it goes the kernel's way instead. While the
    // ring is full, p waits in a copy behind the others held for that destination (tx_held),
    // and they go out, in order, as the receiver makes room: at the next send or flush_held().
    // Only when kMaxHeld bytes already wait for it, and none of them leaves within 10 ms, is
    // p dropped (counted in tx_dropped), as a full wire would drop it.
    bool send(const Packet& p, bool icrc_filled);

   private:
    ShmLinks* links_;
    std::unique_lock<std::mutex> lock_;
  };

  // Pushes what waits for full rings into the rings that have room now; any thread (takes the
  // send lock). True when datagrams are still held: call again in about kHeldRetry.
  bool flush_held();
  bool holding() const { return holding_.load(std::memory_order_relaxed); }
  static constexpr std::size_t kMaxHeld = std::size_t{32} << 20;  // bytes per destination
  static constexpr auto kHeldRetry = std::chrono::milliseconds(1);

  // --- receive side: one thread at a time (the backend's receiving thread).
  // The kernel socket path that the rings share a receive batch with.
  class SocketPath {
   public:
    virtual ~SocketPath() = default;
    // Reads what the socket holds into pkts[n...] while the batch has room.
    virtual void read(std::span<Packet* const> pkts, std::size_t& n) = 0;
    // Datagrams read from the socket but not yet handed over: the rings wait behind them.
    virtual bool backlog() const = 0;
    // Checks a ring's datagram and copies it into `out`; false when it is dropped (counted).
    // icrc_filled: false when the sender left the ICRC out.
    virtual bool deliver(const Packet& view, bool icrc_filled, Packet& out) = 0;
  };
  // Fills pkts[n...] from the rings, in turn, while the batch has room and `socket` has no
  // backlog, and accepts new senders when idle. Keeps each sender's order across its switch from
  // the kernel's path to a ring: a ring just attached, or whose first datagram just came, may
  // have its sender's last kernel datagrams still queued in the socket or on their way into it
  // (the kernel may defer loopback delivery to a softirq). While settling, the socket is read
  // before the rings on every batch, until it is found empty kSettle after the last such event
  // (a UC message that loses its order is dropped whole: perftest then waits forever for it).
  void receive(std::span<Packet* const> pkts, std::size_t& n, SocketPath& socket);
  bool settling() const { return settling_; }
  static constexpr auto kSettle = std::chrono::milliseconds(10);
  // Before the receiving thread blocks on the wait fd: accepts new senders, silences the bells
  // that rang and asks every sender for a wake-up (unless !wake_me). False (do not block) when
  // datagrams are waiting.
  bool prepare_sleep(bool wake_me = true);

  // --- direct placement (netdev::Placement: share_directory, quiesce_peer_writes,
  // open_peer_window).
  bool share_directory(int fd);  // once; takes a duplicate of fd
  void quiesce();                // any thread
  bool open_window(const IpAddr& dst, std::uint16_t port, PeerWindow& w);  // any thread

  std::size_t inbound() const { return in_.size(); }  // rings mapped (receive thread)
  std::size_t outbound_up() const;                    // rings in use to send

 private:
  struct Window;  // a receiver's directory, mapped, and its pid
  // A datagram waiting for room in its ring: its addressing in `meta`, its bytes in `bytes`.
  struct Held {
    Packet meta;
    std::vector<std::uint8_t> bytes;
    bool icrc_filled = false;
  };
  // Held datagrams in order, in slots reused as they leave: it allocates only to grow. (A deque
  // freed and allocated a block every few datagrams, on the sending thread: perftest's -D alarm
  // handler, which allocates, deadlocked on malloc's lock when it came during such a free.)
  class HeldQueue {
   public:
    bool empty() const { return count_ == 0; }
    std::size_t size() const { return count_; }
    Held& front() { return slots_[head_]; }
    void pop_front() {
      head_ = head_ + 1 == slots_.size() ? 0 : head_ + 1;
      --count_;
    }
    void push_back(Held&& h);
    void clear();  // frees the slots (not on the send path)

   private:
    std::vector<Held> slots_;
    std::size_t head_ = 0, count_ = 0;
  };
  struct Out {
    enum class State { kNone, kPending, kUp } state = State::kNone;
    int conn = -1, bell = -1;
    std::shared_ptr<ShmRing> ring;   // shared with open windows
    std::shared_ptr<Window> window;  // null: the receiver shared no directory
    std::chrono::steady_clock::time_point retry_at{}, next_check{};
    bool dirty = false;    // pushed, not yet published
    bool stalled = false;  // stayed full for kFullWait in this batch
    HeldQueue held;        // waiting for room, in order
    std::size_t held_bytes = 0;
    void reset();  // held datagrams are left for ShmLinks::reset to count
  };
  struct In {
    int conn = -1, bell = -1;
    std::shared_ptr<ShmRing> ring;  // also in attached_
    bool closing = false, bell_pending = false;
    bool seen_data = false;  // its first datagram was handed over (after settling)
  };
  struct Key {
    IpAddr addr;
    std::uint16_t port;
    auto operator<=>(const Key&) const = default;
  };
  ShmLinks(AtomicCounters& counters) : counters_(counters) {}
  void recv(std::span<Packet* const> pkts, std::size_t& n, SocketPath& socket);  // the rings only
  Out* route(const Packet& p);  // the link for p's destination, set up or advanced as needed
  void connect(const Key& k, Out& o);
  void reset(Out& o);  // Out::reset, and what was held for it counted as dropped
  void publish_all();
  void mark_dirty(Out& o);
  bool push_held(Out& o);  // true when nothing is held for `o` any more
  bool hold(Out& o, const Packet& p, bool icrc_filled);  // copies p behind o's held datagrams
  // Pushes o's held datagrams until `len` more bytes fit below kMaxHeld, up to kFullWait; false
  // when they do not (o is reset when the receiver went).
  bool wait_below_cap(Out& o, std::size_t len);
  void control();  // accepts senders, reads their rings and bells, notices the ones gone
  void accept_hello(In& in);
  void send_directory(int conn);
  static std::shared_ptr<Window> receive_directory(int conn, std::shared_ptr<ShmRing> ring);
  void drop_in(std::size_t i);

  AtomicCounters& counters_;
  int listen_fd_ = -1, ctl_ep_ = -1, epfd_ = -1;
  // Send side.
  mutable std::mutex send_mu_;
  std::map<Key, Out> out_;
  Key last_key_{};
  Out* last_out_ = nullptr;
  std::vector<Out*> dirty_, stalled_;
  std::vector<std::vector<std::uint8_t>> spare_;  // buffers of held datagrams, for reuse
  std::atomic<bool> holding_{false};              // some Out holds datagrams
  // Receive side.
  std::vector<In> in_;
  std::size_t next_in_ = 0;
  bool settling_ = false;
  std::chrono::steady_clock::time_point settle_until_{};
  std::chrono::steady_clock::time_point next_control_{};
  // Direct placement.
  std::atomic<int> dir_fd_{-1};
  std::mutex attached_mu_;
  std::vector<std::shared_ptr<ShmRing>> attached_;  // inbound rings, for quiesce()
};

}  // namespace softrdma::netdev
