// The packet I/O interface every backend implements: send and receive batches of
// RoCEv2 datagrams (UDP payloads, BTH first, ICRC last) with their addressing.
// Backends own framing below the BTH: they fill the ICRC on send and verify it on
// receive (a bad ICRC is a counted drop), because only they know the IP/UDP
// headers actually used on the wire.
#pragma once

#include <array>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace softrdma::netdev {

class Placement;

// An IP address; IPv4 is held as IPv4-mapped IPv6 (::ffff:a.b.c.d), as in a RoCE v2 GID.
struct IpAddr {
  std::array<std::uint8_t, 16> bytes{};
  static IpAddr v4(std::uint32_t host_order);
  static IpAddr v6(const std::array<std::uint8_t, 16>& b) { return IpAddr{b}; }
  // Parses "a.b.c.d" or an IPv6 literal; false on a bad string.
  static bool parse(const std::string& s, IpAddr& out);
  bool is_v4() const;
  std::uint32_t v4_host() const;  // meaningful when is_v4()
  std::string str() const;
  auto operator<=>(const IpAddr&) const = default;
};

// The kernel interface that holds `a` (getifaddrs); "lo" for any address of 127.0.0.0/8 or
// ::1, which the loopback interface answers for; empty when no interface holds it.
std::string interface_of(const IpAddr& a);

// True for an IP multicast group: IPv4 224.0.0.0/4 (IPv4-mapped) or IPv6 ff00::/8.
inline bool is_multicast(const IpAddr& a) {
  if (a.is_v4()) return (a.v4_host() >> 28) == 0xE;
  return a.bytes[0] == 0xFF;
}

inline constexpr std::uint16_t kRoceV2Port = 4791;
// Largest datagram a backend carries: 4096-byte MTU payload + headers, with room
// for 9000-byte jumbo frames.
inline constexpr std::size_t kMaxDatagram = 9216;

// One datagram. `data` points at a caller-owned buffer of `cap` bytes; `len` bytes
// are used: BTH … payload, pad, and the 4 ICRC bytes (filled by the backend on send).
struct Packet {
  IpAddr src;
  IpAddr dst;
  std::uint16_t src_port = 0xC000;
  std::uint16_t dst_port = kRoceV2Port;
  std::uint8_t traffic_class = 0;
  std::uint8_t hop_limit = 64;
  // IPv4 ID and DF bit. Received: what the datagram carried, as far as the backend knows (a raw
  // backend reads them, the udp backend learns them from the ICRC). Sent: send_batch sets them
  // to what goes on the wire, whatever the caller left in them (ID 0 with DF, or for the udp
  // backend's UDP GSO segments, the IDs the kernel will number them with); the ICRC is computed
  // for them and tracing writes them.
  std::uint16_t ipv4_id = 0;
  bool ipv4_df = true;
  void reset_ipv4_id() {
    ipv4_id = 0;
    ipv4_df = true;
  }
  std::uint8_t* data = nullptr;
  std::uint32_t len = 0;
  std::uint32_t cap = 0;
  // Set by the transport on a packet it sends again (a retransmission); only tracing reads it.
  bool retrans = false;
  void set_retransmission(bool on = true) { retrans = on; }
  // The sender wrote the payload into the receiver's memory itself (direct placement, host-local
  // rings only; see netdev/placement.h): the receiver checks the datagram but does not copy it
  // again.
  bool placed = false;
  // Received through a host-local ring (the udp backend's; netdev/shm_link.h), not the network.
  bool host_local = false;
};

// Something that happened to a packet below the caller, reported to a FaultObserver: a fault
// injected on send, or a datagram the receiver dropped before delivering it.
enum class FaultEvent : std::uint8_t {
  kDrop,         // injected: never sent
  kDuplicate,    // injected: sent twice
  kReorder,      // injected: held until the next packet has gone
  kCorrupt,      // injected: bits flipped in a copy that was sent instead
  kDelay,        // injected: held for delay_ms
  kRxIcrc,       // received with a bad ICRC, dropped
  kRxMalformed,  // received too short, too long or unreadable, dropped
  kRxNotOurs,    // received for an address that is not ours, dropped
  kRxQueueFull,  // arrived at a full receive queue, dropped
};
inline bool is_injected(FaultEvent e) {
  return e <= FaultEvent::kDelay;
}
// Injected faults are reported on the sending thread during send_batch, with the very Packet
// the caller passed in (before any corruption). Receive drops are reported with a view of the
// dropped datagram, valid only during the call (kRxQueueFull: on the sender's thread).
using FaultObserver = std::function<void(FaultEvent, const Packet&)>;

// Per-device counters (like rxe's hw_counters, for the packet layer).
struct Counters {
  std::uint64_t tx_packets = 0, tx_bytes = 0, rx_packets = 0, rx_bytes = 0;
  std::uint64_t rx_icrc_errors = 0;  // dropped: bad ICRC
  std::uint64_t rx_malformed = 0;    // dropped: shorter than BTH + ICRC, bad UDP, …
  std::uint64_t rx_not_ours = 0;     // dropped: destination is not one of our addresses
  std::uint64_t tx_errors = 0;       // the OS refused a send
  std::uint64_t tx_dropped = 0;      // sent, but lost below us (no such host, full ring)
  std::uint64_t tx_held = 0;         // waited in the sender for room in a full host-local ring
  std::uint64_t rx_dropped = 0;      // arrived at a full receive queue
  std::uint64_t rx_gso_frames = 0;   // raw backends: frames of several datagrams, cut (UDP GSO)
  std::uint64_t fault_dropped = 0, fault_duplicated = 0, fault_reordered = 0, fault_corrupted = 0,
                fault_delayed = 0;
  // An emulated switch port in front of the receive path (netdev/switch_port.h): datagrams it
  // marked CE, tail-dropped, and its deepest queue (bytes).
  std::uint64_t switch_ce_marked = 0, switch_dropped = 0, switch_queue_peak = 0;
  // Without a switch: datagrams marked CE because the receive path fell behind
  // (netdev/backlog_marker.h).
  std::uint64_t backlog_ce_marked = 0;
  // A lossless switch port (`pfc=`): PFC frames it sent to its senders (pause and resume), and
  // datagrams it left in the backend while full instead of dropping them.
  std::uint64_t tx_pause = 0, switch_held = 0;
};

// The live counters a backend updates (relaxed atomics: several threads send). The sending and
// the receiving side's are on cache lines of their own: a program's thread sends while the
// progress thread receives, and one shared line cost every datagram a cache miss on each side.
struct AtomicCounters {
  alignas(64) std::atomic<std::uint64_t> tx_packets{0}, tx_bytes{0}, tx_errors{0},
      tx_dropped{0}, tx_held{0};
  alignas(64) std::atomic<std::uint64_t> rx_packets{0}, rx_bytes{0}, rx_icrc_errors{0},
      rx_malformed{0}, rx_not_ours{0}, rx_dropped{0}, rx_gso_frames{0};
  alignas(64) std::atomic<std::uint64_t> fault_dropped{0}, fault_duplicated{0}, fault_reordered{0},
      fault_corrupted{0}, fault_delayed{0};
  Counters snapshot() const;
};
inline void bump(std::atomic<std::uint64_t>& c, std::uint64_t n = 1) {
  c.fetch_add(n, std::memory_order_relaxed);
}

// Threads: send_batch may be called from several threads at once; recv_batch,
// service and next_timeout_ms from one thread at a time (the progress thread or
// a polling application thread holding the device's receive lock).
class Netdev {
 public:
  virtual ~Netdev() = default;
  virtual std::string name() const = 0;     // e.g. "mem:10.0.0.1", "udp:127.0.0.1"
  virtual std::string backend() const = 0;  // "mem", "udp", …
  virtual std::uint32_t mtu() const = 0;    // IP MTU of the link (1500, 9000, …)
  virtual std::span<const IpAddr> addresses() const = 0;
  // The UDP port RoCEv2 peers listen on: 4791, or a test's own port.
  virtual std::uint16_t roce_port() const { return kRoceV2Port; }

  // Sends the packets (fills each ICRC first). Packets are copied or sent before
  // return, so their buffers may be reused. Returns how many were accepted; the
  // rest were refused (counted in tx_errors).
  // Backends stop at the first packet they refuse (shorter than BTH + ICRC, longer than
  // the MTU allows, wrong address family), so the accepted ones are a prefix. They set
  // each accepted packet's src (and src_port, when the asked one could not be used) to
  // what actually went on the wire, since the ICRC covers it.
  virtual std::size_t send_batch(std::span<Packet* const> pkts) = 0;
  // Non-blocking: fills up to pkts.size() packets (each with its own buffer and cap)
  // and returns how many. Packets with a bad ICRC never come out (counted).
  virtual std::size_t recv_batch(std::span<Packet* const> pkts) = 0;
  // Readable (EPOLLIN) when recv_batch may return packets.
  virtual int wait_fd() const = 0;
  // Milliseconds until the backend needs service() again (delayed packets), or -1.
  virtual int next_timeout_ms() const { return -1; }
  // Releases delayed packets that are due. Cheap; call it in every progress loop.
  virtual void service() {}
  // Called by the receiving thread before it blocks on wait_fd(): backends that are not woken by
  // the kernel (shared-memory rings) ask their peers for a wake-up here. False when datagrams
  // arrived meanwhile: receive again instead of blocking. wake_me false, before a short nap that
  // needs no wake-up: only silence what woke the thread before, and ask for nothing.
  virtual bool prepare_sleep(bool wake_me = true) {
    (void)wake_me;
    return true;
  }
  // Tracing asks for it before traffic starts: every datagram send_batch takes and recv_batch
  // returns then carries its real ICRC. Otherwise a backend may leave the ICRC out where nothing
  // can corrupt a datagram (the udp backend's host-local rings), as a NIC offloads it.
  virtual void require_icrc() {}
  // Direct placement (netdev/placement.h), where this backend reaches other processes' memory;
  // nullptr (the default) where it does not.
  virtual Placement* placement() { return nullptr; }
  // Installs (or, with an empty function, removes) the observer of injected faults and receive
  // drops. Set it before traffic starts. Backends without faults or drops ignore it.
  virtual void set_fault_observer(FaultObserver observer) { (void)observer; }
  // Multicast: after join_group, datagrams sent to `group` on roce_port() arrive through
  // recv_batch with Packet.dst == group (their ICRC checked against the group address), and
  // send_batch accepts packets whose dst is a group (any group, joined or not). Joining a joined
  // group, or leaving one not joined, does nothing and returns 0. Returns 0 or an errno value:
  // EINVAL (not a multicast address, or of the other family), ENOBUFS (too many groups), or
  // what the OS said (e.g. ENODEV, EADDRNOTAVAIL when the interface cannot do multicast).
  // Any thread; may run concurrently with recv_batch. The default: EOPNOTSUPP.
  virtual int join_group(const IpAddr& group) {
    (void)group;
    return EOPNOTSUPP;
  }
  virtual int leave_group(const IpAddr& group) {
    (void)group;
    return EOPNOTSUPP;
  }

  // Wrappers (tracing, an MTU override) report their backend's.
  virtual Counters counters() const { return counters_.snapshot(); }

 protected:
  // Copies the checked datagram `view` into `out` (its buffer and cap kept, the rest taken
  // from `view`) and counts it received. `view.len` must fit `out.cap`.
  void hand_over(const Packet& view, Packet& out);

  AtomicCounters counters_;
};

}  // namespace softrdma::netdev
