// A queue pair: attributes, the state machine, the send and receive queues with each
// WQE's progress, and the RoCEv2 transport's three engines (RC, UC, UD, and XRC: an initiator
// sends as RC does, a target answers as RC does from the XRC SRQ each request names): requester,
// responder and completer, each with its own state (rxe/*_state.h). All protocol work runs
// on the device's progress thread under the QP's mutex; applications only post WQEs and
// change state.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "core/cq.h"
#include "core/mr.h"
#include "core/srq.h"
#include "core/types.h"
#include "core/xrc_srq_table.h"
#include "rxe/cc.h"
#include "rxe/completer_state.h"
#include "rxe/dcqcn.h"
#include "rxe/requester_state.h"
#include "rxe/responder_state.h"
#include "rxe/uses_core.h"
#include "rxe/xrc_relay.h"
#include "wire/roce_headers.h"

namespace softrdma::rxe {

class Device;
struct QpInfo;
struct InboundRequest;  // rxe/responder.h
enum class RxVerdict : std::uint8_t;
struct RequestPacket;  // rxe/requester.h

struct SendWqe {
  std::uint64_t wr_id = 0;
  WrOpcode opcode = WrOpcode::kSend;
  std::uint32_t flags = 0;
  std::uint32_t imm = 0;
  std::uint32_t invalidate_rkey = 0;
  std::vector<Sge> sge;
  std::array<std::uint8_t, kMaxInline> inline_data{};
  bool is_inline = false;
  std::uint64_t length = 0;
  std::uint64_t remote_addr = 0;
  std::uint32_t rkey = 0;
  std::uint64_t compare_add = 0, swap = 0;
  std::uint8_t flush_type = 0, flush_level = 0;  // FLUSH: the FETH's placement type and level
  MwBind bind;                                   // BIND_MW
  // UD destination
  AhAttr av;
  std::uint32_t remote_qpn = 0, remote_qkey = 0;
  std::uint32_t remote_srqn = 0;  // XRC: the target's XRC SRQ (the XRCETH)

  // Progress
  bool started = false;   // PSNs assigned (first packet built)
  bool all_sent = false;  // every request packet built at least once
  bool done = false;      // ready to complete (acked, or sent for UC/UD, or local)
  WcStatus status = WcStatus::kSuccess;
  std::uint32_t first_psn = 0, last_psn = 0;
  std::uint32_t npkts = 0;
  std::uint64_t sent = 0;        // bytes of the message built so far (next offset)
  std::uint32_t next_psn = 0;    // PSN of the next packet to build for this WQE
  std::uint32_t resp_psn = 0;    // READ: next expected response PSN
  std::uint64_t resp_bytes = 0;  // READ: bytes placed
  bool gap_retried = false;      // a retry for resp_psn is already under way
  std::uint64_t atomic_orig = 0;
  std::uint64_t post_ns = 0;  // steady clock at post_send, when the device samples latency
  // READs, atomics, ATOMIC WRITE and FLUSH: answered by responses, counted in max_rd_atomic.
  bool is_read_or_atomic() const {
    return opcode == WrOpcode::kRdmaRead || opcode == WrOpcode::kAtomicCmpAndSwp ||
           opcode == WrOpcode::kAtomicFetchAndAdd || answered_by_empty_read();
  }
  // ATOMIC WRITE and FLUSH (IBTA 1.5 A19): one request packet, one zero-length read response.
  bool answered_by_empty_read() const {
    return opcode == WrOpcode::kAtomicWrite || opcode == WrOpcode::kFlush;
  }
  bool is_local() const { return opcode == WrOpcode::kLocalInv || opcode == WrOpcode::kBindMw; }
};

struct QpCounters {
  std::uint64_t tx_packets = 0, rx_packets = 0, retransmits = 0, duplicate_requests = 0,
                out_of_sequence = 0, seq_naks_sent = 0, rnr_naks_sent = 0, rnr_naks_received = 0,
                retry_exceeded = 0, rnr_retry_exceeded = 0, dropped_wrong_peer = 0,
                dropped_bad_qkey = 0, dropped_no_recv = 0, dropped_bad_opcode = 0;
  // Direct placement: RDMA WRITE packets whose payload this QP wrote into the peer itself, and
  // packets it received so placed (their payload not copied again).
  std::uint64_t placed_sent = 0, placed_received = 0;
  // Remote access error NAKs this QP's responder sent (mlx5's resp_remote_access_errors).
  std::uint64_t resp_remote_access_errors = 0;
  // XRC targets: requests taken for an SRQ of the domain, and requests NAKed for naming none
  // of this device's; of those, the ones naming another device's SRQ of the domain that could
  // not be passed to it (rxe/xrc_relay.h). Requests passed to the device holding their SRQ,
  // requests a proxy executed for another device's target, and packets dropped because too
  // many waited behind a passed one.
  std::uint64_t xrc_rcvd_requests = 0, xrc_bad_srqn = 0, xrc_srq_elsewhere = 0;
  std::uint64_t xrc_relayed = 0, xrc_proxied = 0, xrc_relay_dropped = 0;
  // Congestion control (mlx5's names): CE-marked packets received and CNPs sent for them
  // (notification point); CNPs that cut the rate and CNPs ignored (reaction point).
  std::uint64_t np_ecn_marked_roce_packets = 0, np_cnp_sent = 0, rp_cnp_handled = 0,
                rp_cnp_ignored = 0;
  // PFC: times the requester stopped because a switch port paused its priority.
  std::uint64_t rp_pause_waits = 0;
  // UD datagrams that found no receive WQE and waited for one (rxe/ud_hold.h); those still
  // without one at their deadline are counted in dropped_no_recv too.
  std::uint64_t held_no_recv = 0;
  // In a request/reply exchange (rxe/ack_hold.h): ACKs that left right after a request of the
  // QP's own, and ACKs that waited in vain for one and left alone.
  std::uint64_t acks_with_request = 0, ack_waits_expired = 0;
};

// Each protocol engine's state is a base of its own (rxe/requester_state.h,
// rxe/responder_state.h, rxe/completer_state.h); the rest is the QP's own.
class Qp : private RequesterState, private ResponderState, private CompleterState {
 public:
  void* user = nullptr;  // the upper layer's handle for this object (events)
  Qp(Device& dev, std::uint32_t qpn, QpType type, Pd* pd, Cq* send_cq, Cq* recv_cq, Srq* srq,
     const QpCap& cap, bool sq_sig_all, Xrcd* xrcd = nullptr);
  std::uint32_t qpn() const { return qpn_; }
  QpType type() const { return type_; }
  Pd* pd() const { return pd_; }
  Xrcd* xrcd() const { return xrcd_; }  // XRC targets: their domain
  // The P_Key its packets carry and must match (its pkey_index's entry); progress thread.
  std::uint16_t pkey() const { return pkey_.load(std::memory_order_relaxed); }

  // Verbs entry points (take the QP lock). Return 0 or an errno value.
  int modify(const QpAttr& attr, std::uint32_t mask);
  int query(QpAttr& attr, QpCap& cap);
  int post_send(const SendWr& wr);
  int post_recv(const RecvWr& wr);
  QpState state() const;
  QpCounters counters() const;
  // Attributes, PSNs, queue depths and counters for monitoring (rxe/snapshot.h).
  void info(QpInfo& out) const;

  // Sends the answers owed: an ACK waiting for a reply (rxe/ack_hold.h), or queued by a pass
  // that has not reached the QP's send step yet. True if any. With the progress lock
  // (Device::send_waiting_ack) and the QP's.
  bool send_waiting_ack();
  // An answer is queued or waits (the QP's lock): a pass has not sent it yet.
  bool answers_owed() const {
    return !responses_.empty() || ack_hold_.deadline() != Clock::time_point::max();
  }
  // Progress-thread entry points.
  void receive(const wire::RocePacket& pkt, const netdev::Packet& raw);
  // Builds packets while there is work and TX room; returns true if work remains.
  bool run_send(Clock::time_point now);
  // Fires expired timers. True when a timer rewound the send queue: the QP has
  // packets to send again (the progress pass marks it active).
  bool run_timers(Clock::time_point now);
  // Earliest armed timer, or time_point::max().
  Clock::time_point next_deadline() const;

  std::mutex& mutex() { return mutex_; }

 private:
  friend class Device;
  // Addresses a packet to the connected peer (RC/UC) and queues it for sending.
  void send_to_peer(netdev::Packet* p);
  // Addresses a packet from `src` to `dst` on the RoCE port (hop limit 0: 64) and queues it.
  void send_to(netdev::Packet* p, const netdev::IpAddr& dst, const netdev::IpAddr& src,
               std::uint8_t traffic_class, std::uint8_t hop_limit);
  // --- requester (requester.cpp)
  bool run_requester(Clock::time_point now);  // run_send's requester part
  bool build_next_packet(SendWqe& w, Clock::time_point now);
  // The next packet's headers, opcode from the tables (rxe/request_opcode.h); false when the
  // transport has no opcode for it.
  bool compose_request(const SendWqe& w, RequestPacket& rp) const;
  void set_ack_req(RequestPacket& rp, Clock::time_point now);
  // RC: the packets it may have unacknowledged now: the device's share (Device::window_for)
  // within what losses left of its LossWindow, or one while probing after a retransmission
  // timeout. With 1000 QPs whose ACKs were late behind a long receive queue, every timeout
  // resending the whole window grew the queue further until QPs ran out of retries
  // (rxe_scale_bench; docs/threading.md).
  std::uint32_t send_window() const;
  void transmit_request(const SendWqe& w, netdev::Packet* p);
  bool fail_wqe(SendWqe& w, WcStatus status);  // a local error building it: false
  // LOCAL_INV and BIND_MW, done in send-queue order; false (w.status set) when it failed.
  bool run_local(SendWqe& w);
  void retry_from(std::uint32_t psn);
  void arm_retransmit(Clock::time_point now);
  // The local ACK timeout, 4.096 µs << attr_.timeout (attr_.timeout 0: none, never asked).
  std::chrono::nanoseconds retransmit_timeout() const {
    return std::chrono::nanoseconds(std::uint64_t{4096} << attr_.timeout);
  }
  // RC and both XRC types: acknowledged, retried, failing as a whole.
  bool reliable() const { return type_ == QpType::kRc || xrc(); }
  bool xrc() const { return type_ == QpType::kXrcSend || type_ == QpType::kXrcRecv; }
  // The transport of its packets (requests, and the responses it sends).
  wire::Transport wire_transport() const;
  // What the responder delivers into: an XRC target the SRQ of the request under way (its PD
  // for the receive WQE's lkeys and for rkeys, its CQ), every other QP its own.
  Pd* rx_pd() const { return xrc_srq_ ? xrc_srq_->pd() : pd_; }
  Srq* rx_srq() const { return xrc_srq_ ? xrc_srq_ : srq_; }
  Cq* rx_cq() const { return xrc_srq_ ? xrc_srq_->cq() : recv_cq_; }
  // --- responder (responder.cpp: the checks; responder_execute.cpp; responder_reply.cpp;
  // ud_responder.cpp). A request runs the checks in order, each returning a verdict.
  void rc_uc_request(const wire::RocePacket& pkt, const netdev::Packet& raw);
  // XRC targets: the XRCETH names an XRC SRQ of the QP's domain, or the request is NAKed.
  RxVerdict check_xrc_srq(const InboundRequest& rq);
  // XRC targets: holds the XRC SRQ numbered `srqn` if it is the domain's (xrc_srq_), for one
  // request or one flush; false when there is none. drop_xrc_srq lets it go.
  bool hold_xrc_srq(std::uint32_t srqn);
  void drop_xrc_srq();
  // --- XRC across processes (xrc_forward.cpp, rxe/xrc_relay.h)
  // The SRQ `srqn` another device of the domain holds: notes it for forward_xrc; false if none.
  bool find_remote_srq(std::uint32_t srqn);
  // A request for such an SRQ, its PSN and opcode sequence checked: passed to its holder.
  RxVerdict forward_xrc(const InboundRequest& rq);
  // A packet that came while a passed one waits for its answer: kept for after it.
  void park(const netdev::Packet& raw);
  // The holder's answer: the responses sent as this QP's, the PSN and message moved on, then
  // the packets parked meanwhile run. Device, with the QP's lock.
  void forward_answered(const RelayAnswer& a);
  void run_parked();
  // A proxy (the holder's side): runs a passed request and returns what it answered.
  RelayAnswer run_proxied(const RelayRequest& r, const wire::RocePacket& pkt,
                          const netdev::Packet& raw);
  RxVerdict check_psn(const InboundRequest& rq);
  RxVerdict check_uc_psn(const InboundRequest& rq);
  void duplicate_request(const InboundRequest& rq);
  RxVerdict check_opcode_sequence(const InboundRequest& rq);
  RxVerdict check_length(const InboundRequest& rq);
  RxVerdict check_target(const InboundRequest& rq);  // RETH/AtomicETH: access, rkey, bounds
  RxVerdict check_write_target(const InboundRequest& rq);
  RxVerdict check_read_target(const InboundRequest& rq);
  // ATOMIC WRITE and FLUSH (responder_placement.cpp): their checks, execution and duplicates.
  RxVerdict check_atomic_write_target(const InboundRequest& rq);
  RxVerdict check_flush_target(const InboundRequest& rq);
  RxVerdict execute_atomic_write(const InboundRequest& rq);
  RxVerdict execute_flush(const InboundRequest& rq);
  void duplicate_placement(const InboundRequest& rq);
  RxVerdict check_resources(const InboundRequest& rq);  // a receive WQE, or an RNR NAK
  RxVerdict execute_request(const InboundRequest& rq);
  RxVerdict execute_send(const InboundRequest& rq);
  RxVerdict execute_write(const InboundRequest& rq);
  RxVerdict execute_read(const InboundRequest& rq);
  RxVerdict execute_atomic(const InboundRequest& rq);
  // The one place the expected PSN moves, and the ACK a request asked for.
  void finish_request(const InboundRequest& rq, RxVerdict v);
  // RC: NAK and fail the QP. UC: drop the packet (and, drop_rest, its message's rest).
  RxVerdict fail_request(const InboundRequest& rq, std::uint8_t syndrome,
                         WcStatus recv_status = WcStatus::kSuccess);
  RxVerdict uc_discard(bool drop_rest);
  RxVerdict refuse(const InboundRequest& rq, std::uint8_t syndrome, bool drop_rest);
  RxVerdict fail_placement(const InboundRequest& rq, std::uint8_t syndrome, WcStatus recv_status);
  MrCheck check_remote(std::uint32_t rkey, std::uint64_t va, std::uint64_t len,
                       std::uint32_t access);
  RespResource& claim_resource();
  RespResource& start_read(std::uint32_t psn, const wire::Reth& reth);
  void ud_request(const wire::RocePacket& pkt, const netdev::Packet& raw);
  // Places a UD datagram into the receive WQE taken for it, and completes it.
  void ud_deliver(const wire::RocePacket& pkt, const netdev::Packet& raw);
  // Delivers the held datagrams that now have a WQE, in order, and drops (counted) those past
  // their deadline that have none. (Leaving for RESET or ERR drops all it holds.)
  void drain_ud_hold(Clock::time_point now);
  // Read responses, ACKs, NAKs and atomic ACKs leave in PSN order: a response
  // never overtakes the responses owed to an earlier read. Returns true if
  // responses are still to be built.
  bool respond_in_order();
  // When the queued answers leave (rxe/ack_hold.h): now, before the requests; after this
  // step's requests; or not yet, an ACK waiting for the QP's next request.
  enum class AckPlan : std::uint8_t { kNow, kAfter, kWait };
  AckPlan plan_ack(Clock::time_point now);
  bool build_read_responses(RespResource& r, int& budget);
  // Queues an ACK/NAK (coalescing with a queued one) or an atomic ACK.
  void respond(std::uint8_t syndrome, std::uint32_t psn, bool atomic = false,
               std::uint64_t orig = 0);
  void send_ack(std::uint8_t syndrome, std::uint32_t psn);
  void send_atomic_ack(std::uint32_t psn, std::uint64_t orig);
  // Queues / sends the answer to an ATOMIC WRITE or a FLUSH: an RDMA READ response ONLY of
  // no payload, with an ACK in its AETH (IBTA 1.5 A19, as rxe answers them).
  void respond_empty_read(std::uint32_t psn);
  void send_empty_read_response(std::uint32_t psn);
  void send_acknowledge(std::uint8_t syndrome, std::uint32_t psn,
                        std::optional<std::uint64_t> atomic_orig);
  void responder_error(std::uint8_t nak_syndrome, std::uint32_t psn, WcStatus recv_status);
  void fail_recv_wqe(WcStatus status);  // completes the receive WQE held in error
  bool take_recv_wqe();
  // --- completer (completer.cpp)
  void rc_response(const wire::RocePacket& pkt);
  // Each returns false when the response ends there (no completion pass, no timer change).
  bool on_acknowledge(const wire::RocePacket& pkt, Clock::time_point now);
  bool on_read_or_atomic_response(const wire::RocePacket& pkt);
  // The WQE a read response or atomic ACK at `psn` answers (completing those it acknowledges
  // implicitly), or none.
  SendWqe* response_target(std::uint32_t psn);
  bool place_response(SendWqe& w, std::uint64_t offset, const std::uint8_t* data, std::uint32_t n);
  bool spend_retry();  // one retry, or (none left) the QP fails: false
  void complete_ready();
  void complete_send(SendWqe& w);
  void ack_through(std::uint32_t psn, bool implicit);
  // Moves the oldest unacknowledged PSN past `psn` (and grows the loss window by the packets
  // that covers); false when it was already there.
  bool acknowledged_through(std::uint32_t psn);
  // A WQE has been sent (PSNs assigned) and is not yet complete.
  bool has_outstanding() const;
  void fail_head(WcStatus status);
  // Missing responses of a read/atomic: retry from what is missing, once per gap.
  bool retry_responses(SendWqe& w);
  // --- congestion control (congestion.cpp)
  // A data packet of this QP arrived CE-marked (or was dropped for want of a receive WQE, as a
  // full port would drop it): count it and answer with a CNP to its sender, at most one per
  // cnp_interval.
  void notify_congestion(const wire::RocePacket& pkt, const netdev::Packet& raw,
                         Clock::time_point now);
  void on_cnp(Clock::time_point now);
  // Pacing: may the requester send a packet now? When not, arms the pacing deadline (or keeps
  // the QP active when it is near) and returns false.
  bool pace_allows(Clock::time_point now, bool& stay_active);
  // PFC: false while a switch port pauses the priority of `tc` (rxe/pfc.cpp); the QP then waits
  // for the pause to run out or be lifted.
  bool pfc_allows(std::uint8_t tc, Clock::time_point now);
  void paced_sent(std::uint32_t bytes, Clock::time_point now);
  bool paced() const { return pace_line_ || dcqcn_.limited(); }
  // --- state
  void enter_error();       // flush; caller holds the lock
  void last_wqe_reached();  // the SRQ's async event, on entering the error state
  // Publishes the QP in the device's placement directory while it receives RDMA WRITEs in
  // `state`, and withdraws it otherwise. Caller holds the lock.
  void publish_receiving(QpState state);
  void send_queue_error();  // a local send error: ERR for RC, SQE for UC/UD
  void flush_queues();
  void post_recv_completion(const Wc& wc, bool solicited);

  Device& dev_;
  const std::uint32_t qpn_;
  const QpType type_;
  Pd* const pd_;
  std::atomic<std::uint16_t> pkey_{0xFFFF};
  Cq* const send_cq_;
  Cq* const recv_cq_;
  Srq* const srq_;
  Xrcd* const xrcd_;
  // XRC targets: the SRQ the XRCETH of the request under way named, held for that request only
  // (destroy_srq waits for the hold); between packets a receive WQE taken from an SRQ keeps
  // only its number, xrc_wqe_srqn_ (set when it is taken). Under the QP's lock.
  core::XrcSrqTable::Hold xrc_hold_;
  Srq* xrc_srq_ = nullptr;
  std::uint32_t xrc_wqe_srqn_ = 0;
  // XRC targets that passed requests to another device (made by the first one), and proxies:
  // the target QPN their completions report, and where their responses go instead of the wire.
  std::unique_ptr<XrcForward> fwd_;
  std::uint32_t reported_qpn_;
  std::atomic<bool> proxy_{false};  // set once, as it is made (read by other threads)
  RelayAnswer* capture_ = nullptr;
  bool proxy_has_last_ = false;  // a proxy: the PSN of the last request it executed
  std::uint32_t proxy_last_psn_ = 0;
  const bool sq_sig_all_;
  mutable std::mutex mutex_;
  QpAttr attr_;
  QpCap cap_;
  QpCounters counters_;
  netdev::IpAddr peer_;   // RC/UC: the connected peer's address
  netdev::IpAddr local_;  // source address used
  std::uint16_t src_port_ = 0xC000;
  std::uint32_t mtu_ = 1024;

  // Send queue: WQEs from head (oldest not yet completed) on.
  std::deque<SendWqe> sq_;
  // Congestion control: the reaction point and its pacer, and the notification point's last CNP.
  const bool cc_on_;
  const bool pace_line_;  // paced at line rate too (CcConfig::pace_line_rate)
  Dcqcn dcqcn_;
  Pacer pacer_;
  Clock::time_point pace_deadline_ = Clock::time_point::max();  // paced: run again then
  Clock::time_point last_cnp_sent_{};
  bool cnp_sent_ = false;
  // Its earliest entry in the device's timer heap, and whether a timer was armed when it was last
  // listed (progress pass).
  Clock::time_point timer_listed_at_ = Clock::time_point::max();
  bool timer_armed_ = false;
  bool in_active_ = false;          // in the device's list of QPs with send work (progress pass)
  bool pause_waiting_ = false;      // in the device's list of QPs a PFC pause stopped (pass)
  std::uint64_t sent_in_pass_ = 0;  // the pass that last ran its requester (progress pass)
  std::uint64_t serial_ = 0;        // the device's number for this QP, never reused

  // Receive queue (the responder takes from it, or from the SRQ).
  RecvQueue rq_;
};

}  // namespace softrdma::rxe
