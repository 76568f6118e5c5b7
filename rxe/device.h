// A RoCEv2 device over one netdev: attributes, the GID table, the verbs objects
// (PD, MR, CQ, SRQ, QP, AH) and the progress thread that runs every QP's
// requester, responder and completer. The thread sleeps in epoll when idle.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "core/cq.h"
#include "core/mr.h"
#include "core/objects.h"
#include "core/srq.h"
#include "core/types.h"
#include "netdev/netdev.h"
#include "rxe/cc.h"
#include "rxe/directory.h"
#include "rxe/qp.h"
#include "rxe/ud_hold.h"
#include "rxe/uses_core.h"
#include "rxe/xrc_relay.h"

namespace softrdma::rxe {

struct DeviceSnapshot;

struct AsyncEvent {
  AsyncEventType type;
  Qp* qp = nullptr;
  Cq* cq = nullptr;
  Srq* srq = nullptr;
  std::uint32_t port = 0;
};

struct DeviceCounters {
  std::uint64_t rx_unknown_qp = 0, rx_malformed = 0, rx_packets = 0, tx_packets = 0;
};

// The verbs objects and their rules are core::Objects'; the device answers for its QPs.
class Device : public core::Objects {
 public:
  // Starts the progress thread. `cc`: congestion control (docs/congestion.md), DCQCN by default.
  explicit Device(std::unique_ptr<netdev::Netdev> nd, std::string name = "softroce0",
                  const CcConfig& cc = {});
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  const std::string& name() const { return name_; }
  PortAttr port_attr() const;
  const std::vector<Gid>& gids() const { return gids_; }
  // The port's P_Key table (default: 0xFFFF alone), set before any QP is made; each entry has
  // the full-membership bit (0x8000) or not (limited), IBTA 10.9.
  bool set_pkeys(const std::vector<std::uint16_t>& table);
  const std::vector<std::uint16_t>& pkeys() const { return pkeys_; }
  // The index of the first entry `pkey` matches; -1 when none does.
  int pkey_index_of(std::uint16_t pkey) const;
  netdev::Netdev& netdev() { return *netdev_; }
  std::uint64_t node_guid() const { return node_guid_; }

  // The unacknowledged packets an RC QP with this path MTU may have out during a pass: the
  // device's kSendBudgetBytes shared by the QPs with send work (between 2 and 2048 each), so
  // that many QPs together do not overrun a receiving ring or socket buffer and collapse into
  // go-back-N retransmissions (ib_write_bw -q 128 on one host did, without). Progress pass only.
  std::uint32_t window_for(std::uint32_t mtu) const;
  static constexpr std::uint64_t kSendBudgetBytes = std::uint64_t{16} << 20;
  // `qpn` 0 allocates a number (0x11 and up); otherwise that number is taken if free
  // (1: the GSI QP that connection management uses), else EBUSY.
  // XRC QPs (core::Objects::admit_xrc_qp): an initiator takes `pd` and `send_cq`, a target
  // only `xrcd`.
  Qp* create_qp(Pd* pd, QpType type, Cq* send_cq, Cq* recv_cq, Srq* srq, QpCap& cap,
                bool sq_sig_all, int* err, std::uint32_t qpn = 0, Xrcd* xrcd = nullptr);
  int destroy_qp(Qp* qp);
  // The answers the QP numbered `qpn` owes leave now (an ACK waiting for a reply,
  // rxe/ack_hold.h, or one a pass under way queued after placing the request): the QP is
  // leaving RTS or going away, and the peer's request must not go unacknowledged. Only then
  // takes the progress lock (waiting at most 2 ms for it), unless this thread's pass holds it
  // (a CQ callback); never with the QP's lock.
  void send_waiting_ack(std::uint32_t qpn);
  // The completions of the QP numbered `qpn` that its application has not polled yet: those in
  // its CQs and those a pass still holds (0 when there is no such QP). The CM uses it to deliver
  // a peer's disconnect after the completions that came before it (docs/rdma-cm.md).
  std::size_t unread_completions(std::uint32_t qpn);
  // UD multicast (ibv_attach_mcast): `qp` receives every datagram sent to the group `gid` with
  // destination QPN 0xFFFFFF. The device joins the group through its netdev on the first attach
  // and leaves it on the last detach; destroying a QP detaches it. Returns 0 or an errno value:
  // EINVAL (not a UD QP of this device, or not a multicast GID; detach: not attached), ENOMEM
  // (beyond max_mcast_grp or max_mcast_qp_attach), or the netdev's error for the join (e.g.
  // EOPNOTSUPP, ENODEV, ENETUNREACH). Attaching an attached QP again returns 0.
  int attach_mcast(Qp* qp, const Gid& gid);
  int detach_mcast(Qp* qp, const Gid& gid);
  // QPs attached to `gid` (tests, diagnostics).
  std::size_t mcast_attached(const Gid& gid) const;

  const CcConfig& cc() const { return cc_; }
  // The chunks of held UD datagrams its QPs may still grow into (rxe/ud_hold.h).
  std::atomic<std::int64_t>* ud_hold_budget() { return &ud_hold_chunks_left_; }
  // PFC (docs/congestion.md): until when a switch port's pause holds back this device's
  // requests of priority `prio` (0..7; the past when it does not), and, for a QP that stopped
  // for it, a wake-up when the port resumes it earlier. Progress pass.
  Clock::time_point paused_until(std::uint8_t prio) const {
    return Clock::time_point(
        Clock::duration(paused_until_ns_[prio & 7].load(std::memory_order_relaxed)));
  }
  void wait_for_resume(std::uint32_t qpn) { pause_waiters_.push_back(qpn); }

  void set_async_handler(std::function<void(const AsyncEvent&)> fn);
  DeviceCounters counters() const;
  // Named counters for the whole device, like rxe's hw_counters: the QP counters
  // summed over live and destroyed QPs, plus the device's and the netdev's.
  std::vector<std::pair<std::string, std::uint64_t>> hw_counters() const;
  // The objects as they are now (rxe/snapshot.h), for monitoring; never on the packet path.
  DeviceSnapshot snapshot() const;
  // From now on stamp each send WR at post time, so that CQs measure post-to-poll latency
  // (CqInfo); off until someone watches: a clock read per WR.
  void sample_latency(bool on) { sample_latency_.store(on, std::memory_order_relaxed); }
  bool sampling_latency() const { return sample_latency_.load(std::memory_order_relaxed); }

  // Direct placement (docs/sharing-a-host.md): shares a directory of the QPs and MRs open to
  // RDMA WRITE with the host-local senders, and places this device's own RDMA WRITEs into
  // peers that share theirs. Call before creating objects. False when the netdev has no such
  // path (only the udp backend's rings have one).
  bool enable_direct_placement();
  Directory* directory() { return dir_.get(); }  // null when off
  // Writes n bytes at offset `off` of an RDMA WRITE message [msg_va, msg_va+msg_len) through
  // `rkey` straight into the memory of dst's process, when dst's directory says the packet will
  // be accepted. True when placed: the packet is then sent with Packet::placed.
  bool place_write(const netdev::IpAddr& dst, std::uint32_t dest_qpn, QpType type,
                   std::uint32_t src_qpn, const netdev::IpAddr& src, std::uint32_t rkey,
                   std::uint64_t msg_va, std::uint64_t msg_len, std::uint64_t off,
                   const std::uint8_t* data, std::uint32_t n, std::uint16_t pkey);
  bool placing() const { return dir_ != nullptr; }

  // --- for QPs (progress thread)
  // A TX buffer to fill; committed packets leave at the end of the progress step.
  netdev::Packet* tx_packet();
  void tx_commit();
  void tx_send_now() { tx_flush(); }  // sends what is committed so far (not a packet in hand)
  void kick(Qp* qp);                  // the QP has send work (any thread)
  // Receives were posted to a UD QP holding datagrams (rxe/ud_hold.h): they take them now, or
  // in the pass under way (any thread, without the QP's lock).
  void receives_posted(Qp* qp);
  // Runs one step of protocol progress on the calling thread if no other thread
  // is doing so (never blocks). Applications that poll their CQs call it, so a
  // busy-polling program needs no context switch to make progress. False when another
  // thread was in a pass (nothing ran).
  bool poll_progress();

  // XRC across processes (rxe/xrc_relay.h): this device's relay channel, null until a domain
  // keyed by a file was opened.
  XrcRelay* relay() const { return relay_ptr_.load(std::memory_order_acquire); }

  void async_event(const AsyncEvent& ev);
  // Inside a progress pass, receive completions (and UC/UD send completions) wait until
  // the pass has sent what it owes (ACKs above all, or the datagram itself): as on a NIC,
  // the packet leaves before the application can see the completion — and so before it
  // can exit. Outside a pass they go out at once. A completion held for a QP that is
  // destroyed before the pass ends is dropped: none of a QP's appears after destroy_qp.
  void complete_recv(const Qp& qp, Cq* cq, const Wc& wc, bool solicited);
  // The local IP address for a source GID index (falls back to the first address).
  netdev::IpAddr source_address(std::uint8_t sgid_index) const;
  bool gid_to_ip(const Gid& gid, netdev::IpAddr& out) const;

 private:
  bool qp_uses(const Pd* pd, const Cq* cq, const Srq* srq) const override;
  bool qp_uses_xrcd(const Xrcd* xrcd) const override;
  bool ah_reachable(const AhAttr& attr) const override;
  void object_event(AsyncEventType type, Cq* cq, Srq* srq) override;
  // The receive completions a pass still holds for the XRC SRQ are handed to its CQ now, and
  // the proxies that delivered into it for other devices are destroyed.
  void xrc_srq_unpublished(const Srq* srq) override;
  std::uint64_t xrc_channel() override;  // opens the relay on first use
  // A pass's part of the relay: answers to this device's targets, and requests its proxies run
  // for other devices' targets. Caller holds progress_mutex_, not qps_mutex_.
  void relay_step(XrcRelay& relay);
  void relay_answered(const RelayAnswer& a);
  void relay_request(XrcRelay& relay, const RelayRequest& r, const std::uint8_t* packet,
                     std::size_t len);
  // The proxy for (device, target QP, SRQ), made and brought up as needed: its QPN, 0 if none
  // could be made.
  std::uint32_t proxy_for(const RelayRequest& r, Xrcd* xrcd);
  void progress_loop();
  // One pass: receive, run QPs with send work, fire timers, transmit. Returns
  // the next timer deadline. Caller holds progress_mutex_.
  Clock::time_point step();
  struct HeldWc {
    std::uint64_t qp_serial;  // Qp::serial_ of the QP it belongs to
    const Srq* xrc_srq;       // the XRC SRQ whose WQE it completes (else null)
    Cq* cq;
    Wc wc;
    bool solicited;
  };
  // Receive completions of the current pass (under held_mutex_). release_held_wcs hands them
  // to their CQs one at a time holding release_mutex_; destroy_qp takes release_mutex_, then
  // drops the QP's entries, so it never waits for a pass (a pass can take long, and the
  // progress thread runs them back to back), only for a hand-out under way (CQ pushes).
  std::mutex held_mutex_, release_mutex_;
  std::deque<HeldWc> held_wcs_;
  void release_held_wcs();
  void drop_held_wcs(std::uint64_t qp_serial);
  void signal_kick();      // wakes the progress thread
  void rx_step();          // what the backend holds, up to kRxBatchesPerPass batches
  std::size_t rx_batch();  // one batch; how many datagrams it had
  // A PFC frame from a switch port: pause or resume priorities (rxe/pfc.cpp). Caller holds
  // qps_mutex_ (shared).
  void rx_pause(const netdev::Packet& raw);
  // Hands a multicast datagram to every QP attached to its group. Caller holds qps_mutex_.
  void rx_multicast(const wire::RocePacket& pkt, const netdev::Packet& raw);
  // Removes `qpn` from every group, leaving groups no QP is attached to any more.
  void detach_all_mcast(std::uint32_t qpn);
  void tx_flush();

  std::string name_;
  std::unique_ptr<netdev::Netdev> netdev_;
  std::unique_ptr<Directory> dir_;  // before the objects that publish into it
  std::atomic<std::uint64_t> placement_refused_{0};
  std::vector<Gid> gids_;
  std::vector<std::uint16_t> pkeys_{0xFFFF};
  std::uint64_t node_guid_ = 0;

  mutable std::shared_mutex qps_mutex_;
  // 64 MiB of held UD datagrams in all (declared before the QPs, which give theirs back).
  std::atomic<std::int64_t> ud_hold_chunks_left_{(std::int64_t{64} << 20) / UdHold::kChunkBytes};
  QpCounters retired_;  // counters of destroyed QPs (under qps_mutex_)
  std::unordered_map<std::uint32_t, std::unique_ptr<Qp>> qps_;
  std::uint32_t next_qpn_ = 0x11;
  std::uint64_t next_qp_serial_ = 1;  // never reused, unlike QPNs (under qps_mutex_)

  // Multicast groups joined: group GID -> attached QPNs. Lock order: qps_mutex_ -> mcast_mutex_.
  mutable std::shared_mutex mcast_mutex_;
  std::map<Gid, std::vector<std::uint32_t>> mcast_;

  std::mutex progress_mutex_;  // whoever holds it owns active_ and the TX/RX buffers
  std::mutex kick_mutex_;
  std::vector<std::uint32_t> kicked_;
  void queue_kick(const Qp* qp);       // for the next pass to take up (any thread)
  std::vector<std::uint32_t> active_;  // progress thread only
  std::uint32_t senders_ = 1;          // active_'s size as this pass began (at least 1)
  // Armed timers (retransmission, RNR, pacing) in a min-heap by deadline: a pass pops only those
  // due, so neither idle QPs nor QPs waiting on a timer cost it anything. Timers are armed only in
  // passes (sending, receiving), which list the QP. An entry may be stale (the deadline moved
  // later, or the QP is gone: its serial tells); a QP's earliest entry is Qp::timer_listed_at_.
  struct TimerEntry {
    Clock::time_point when;
    std::uint32_t qpn;
    std::uint64_t serial;
    bool operator>(const TimerEntry& o) const { return when > o.when; }
  };
  std::vector<TimerEntry> timers_;  // progress thread only
  // QPs with a timer armed as last listed: changed by passes (holding qps_mutex_ shared) and by
  // destroy_qp (holding it exclusive).
  std::size_t timed_qps_ = 0;
  void list_timers(Qp& qp);  // QP lock held
  void activate(Qp& qp);     // puts it in active_ unless it is there (progress pass)
  std::uint64_t pass_ = 0;   // passes so far (progress pass)

  std::mutex async_mutex_;
  std::function<void(const AsyncEvent&)> async_handler_;

  // TX/RX buffers (progress thread only)
  std::vector<std::vector<std::uint8_t>> tx_bufs_, rx_bufs_;
  std::vector<netdev::Packet> tx_pkts_, rx_pkts_;
  std::vector<netdev::Packet*> tx_ptrs_, rx_ptrs_;
  std::size_t tx_count_ = 0;

  std::atomic<std::uint64_t> rx_unknown_qp_{0}, rx_malformed_{0}, rx_packets_{0}, tx_packets_{0};
  std::atomic<std::uint64_t> rx_bad_pkey_{0};
  std::atomic<std::uint64_t> rx_mcast_dropped_{0};  // to a group not joined, or a bad QPN
  int kick_fd_ = -1;
  std::atomic<bool> kick_signaled_{false};  // the eventfd holds a count to drain
  int epoll_fd_ = -1;                       // the kick fd and the netdev's fd
  // When the sleeping progress thread means to wake (steady-clock ns): a pass on
  // another thread that arms an earlier timer wakes it.
  std::atomic<std::int64_t> planned_wake_ns_{0};
  // Application threads calling poll_progress (steady-clock ns): the last call, and when the
  // current run of calls (no gap longer than kPollGap) began. While a run goes on the progress
  // thread naps instead of contending for the pass: the application does its work.
  std::atomic<std::int64_t> app_poll_last_ns_{0}, app_poll_run_ns_{0};

  const CcConfig cc_;
  std::array<std::atomic<std::int64_t>, 8> paused_until_ns_{};  // steady-clock ns, per priority
  std::vector<std::uint32_t> pause_waiters_;                    // progress pass only
  std::atomic<std::uint64_t> rx_pause_{0}, rx_pause_bad_{0};

  // XRC relay: the channel, and the proxies by (device's pid, channel, target QPN, SRQ number).
  std::mutex relay_mutex_;  // making the channel
  std::unique_ptr<XrcRelay> relay_;
  std::atomic<XrcRelay*> relay_ptr_{nullptr};
  // Until when (steady-clock ns) an application's pass also reads the channel: a message came.
  std::atomic<std::int64_t> relay_busy_until_ns_{0};
  std::mutex proxies_mutex_;
  std::map<std::tuple<std::int32_t, std::uint64_t, std::uint32_t, std::uint32_t>, std::uint32_t>
      proxies_;

  std::atomic<bool> sample_latency_{false};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace softrdma::rxe
