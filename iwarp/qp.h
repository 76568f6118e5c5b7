// An iWARP RC queue pair: RDMAP over DDP over MPA on one byte stream (byte_stream.h; a
// connected TCP socket). It owns the MPA negotiation on that stream (request/reply, RFC 6581
// RTR), the send queue (segmented into FPDUs sized to the MSS, written many per stream send
// straight from registered memory), the receive path (FPDU framing, markers, CRC, tagged
// placement after STag/PD/access/bounds checks, untagged queues 0/1/2 with MSN and MO) and
// TERMINATE on any error. All work runs under the QP's mutex; callbacks and events are
// delivered by the device outside it.
#pragma once

#include <sys/uio.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "core/cq.h"
#include "core/mr.h"
#include "core/srq.h"
#include "core/types.h"
#include "iwarp/byte_stream.h"
#include "iwarp/params.h"
#include "iwarp/stream_trace.h"
#include "iwarp/terminate.h"
#include "wire/ddp_rdmap.h"
#include "wire/mpa.h"

namespace softrdma::iwarp {

class Device;
struct QpInfo;
struct TxBatch;
struct TxCursor;
struct TxDesc;
struct TxSegment;
enum class TxStep : std::uint8_t;
using Clock = std::chrono::steady_clock;
using core::Cq;
using core::Pd;
using core::QpState;
using core::Srq;
using core::WcStatus;

struct SendWqe {
  std::uint64_t wr_id = 0;
  core::WrOpcode opcode = core::WrOpcode::kSend;
  std::uint32_t flags = 0;
  std::uint32_t inv_stag = 0;  // SEND_WITH_INV / LOCAL_INV
  std::vector<core::Sge> sge;
  std::array<std::uint8_t, core::kMaxInline> inline_data{};
  bool is_inline = false;
  std::uint64_t length = 0;
  std::uint64_t remote_addr = 0;
  std::uint32_t rkey = 0;
  // progress
  std::uint64_t sent = 0;  // payload bytes committed to the stream
  bool all_sent = false;   // every FPDU committed
  bool done = false;       // ready to complete
  WcStatus status = WcStatus::kSuccess;
  std::uint64_t placed = 0;  // READ: bytes of the response placed
};

// An inbound RDMA Read being answered (one of at most IRD).
struct InboundRead {
  wire::ReadRequest req;
  std::uint64_t sent = 0;
};

struct QpCounters {
  std::uint64_t tx_fpdus = 0, rx_fpdus = 0, tx_bytes = 0, rx_bytes = 0, sendmsg_calls = 0,
                crc_errors = 0, terminates_sent = 0, terminates_received = 0, faults_injected = 0,
                rx_direct_bytes = 0;  // payload placed straight from the socket
};

// Per-device transmit options the QPs read.
struct TxOptions {
  std::uint32_t max_fpdu = 0;     // bytes of an FPDU at most; 0: the TCP MSS
  std::uint32_t corrupt_nth = 0;  // fault injection: corrupt the Nth FPDU sent (1-based); 0: never
};

class Qp {
 public:
  Qp(Device& dev, std::uint32_t qpn, Pd* pd, Cq* send_cq, Cq* recv_cq, Srq* srq,
     const core::QpCap& cap, bool sq_sig_all);
  ~Qp();
  Qp(const Qp&) = delete;
  Qp& operator=(const Qp&) = delete;

  std::uint32_t qpn() const { return qpn_; }
  Pd* pd() const { return pd_; }
  Cq* send_cq() const { return send_cq_; }
  Cq* recv_cq() const { return recv_cq_; }
  Srq* srq() const { return srq_; }
  QpState state() const;
  QpCounters counters() const;
  // A copy for monitoring (iwarp/snapshot.h).
  void info(QpInfo& out) const;
  std::uint16_t ird() const;  // negotiated
  std::uint16_t ord() const;
  bool crc_in_use() const;
  bool markers_tx() const;
  bool markers_rx() const;

  // 0, or EINVAL (bad WR, wrong state), ENOMEM (queue full), EOPNOTSUPP (immediate data,
  // atomics, memory windows: not in iWARP without RFC 7306). `bad` counts accepted WRs.
  int post_send(std::span<const core::SendWr> wrs, std::size_t* bad = nullptr);
  int post_recv(std::span<const core::RecvWr> wrs, std::size_t* bad = nullptr);
  // Moves the QP to ERR: outstanding work completes with WR_FLUSH_ERR.
  void set_error();
  // ibv_modify_qp's state changes: RESET, INIT and RTR before a connection (bookkeeping: the
  // MPA negotiation brings the QP to RTS); RTS only once connected; ERR at any time (flush).
  // 0 or EINVAL.
  int modify_state(QpState to);
  core::QpCap cap() const;
  // Per-QP events (established, disconnected, fatal); delivered on the progress thread.
  void set_event_handler(QpEventCallback fn);

 private:
  friend class Device;
  enum class Phase : std::uint8_t {
    kIdle,       // no connection
    kWaitReply,  // active: request sent, reading the reply
    kWaitRtr,    // passive: reply sent, waiting for the initiator's RTR
    kRunning,    // full operation
    kClosing,    // graceful close requested: FIN after the send queue drains
    kDead,       // error, terminate, or closed: no more I/O
  };

  // ---- device interface (all lock mu_)
  // On success the QP takes `stream` (moved from); on failure it stays with the caller.
  int start_active(std::unique_ptr<ByteStream>& stream, const MpaParams& local, ConnectCallback cb);
  int start_passive(std::unique_ptr<ByteStream>& stream, const MpaParams& local,
                    const wire::MpaFrame& request, std::span<const std::uint8_t> request_bytes,
                    AcceptCallback cb);
  void on_readable();
  void on_writable();
  void on_timer(Clock::time_point now);
  std::optional<Clock::time_point> deadline() const;
  bool wants_writable() const;
  void close_graceful();
  void close_abortive();
  // Callbacks collected under mu_, run by the device after releasing it.
  std::vector<std::function<void()>> take_callbacks();
  // Registers the stream for the events it now needs (readable; writable with bytes pending).
  void sync_epoll();
  // Drops the stream's registration with the device's epoll.
  void unwatch();
  // The connection goes back to the CM, which closes it (a reject, a failed negotiation).
  void release_stream();

  // ---- MPA (qp_mpa.cpp)
  // Sends our MPA request (active) or reply on `s`; when tracing, starts the connection's
  // stream trace with the peer's request (`received`, passive side) and our frame.
  int send_mpa(ByteStream& s, const wire::MpaFrame& f, bool active, wire::Bytes received);
  void read_reply();
  void finish_active(const wire::MpaFrame& reply);
  void established();
  void fail_connect(int err);
  bool handle_rtr(const wire::DdpHeader& h, wire::Bytes hdr, wire::Bytes body);

  // ---- transmit (qp_tx.cpp)
  // Sends what is queued until the socket is full or `budget` batches (512 KiB each) have
  // gone; with work left, it asks for EPOLLOUT so the progress thread carries on (a post
  // never spends long sending a large message on the application's thread).
  void pump_tx(int budget = 16);
  // pump_tx's steps (qp_tx_batch.cpp, qp_tx.cpp), in order:
  // The payload of one FPDU at most (MSS or configured FPDU size, markers taken off).
  std::size_t tx_max_payload() const;
  // Cuts one batch from the read responses and the send queue; false when it holds nothing
  // (then `c` tells of a failure that stopped it, if any).
  bool build_batch(TxBatch& b, TxCursor& c, std::size_t max_pay);
  // The next segment's descriptor, header and payload source: a read response first, then
  // the send queue.
  TxStep next_segment(TxCursor& c, TxDesc& d, TxSegment& seg, std::size_t max_pay);
  TxStep next_read_response(TxCursor& c, TxDesc& d, TxSegment& seg, std::size_t max_pay);
  TxStep next_sq_segment(TxCursor& c, TxDesc& d, TxSegment& seg, std::size_t max_pay);
  // The segment's iovecs: header slot, payload, pad and CRC (staged when markers or a fault
  // need its bytes). False on a local protection error in its SGEs (recorded in `c`).
  bool put_fpdu_iov(TxBatch& b, TxCursor& c, TxDesc& d, const TxSegment& seg);
  bool put_sge_iov(TxBatch& b, TxCursor& c, const TxSegment& seg, std::uint32_t& crc);
  void stage_fpdu(TxBatch& b, TxCursor& c, TxDesc& d, std::size_t pad);
  // Writes the batch with one stream send; false when the connection failed.
  bool write_batch(TxBatch& b, std::size_t& sent);
  // Traces what went and keeps a cut FPDU's tail pending; the descriptors to commit.
  std::size_t account_sent(TxBatch& b, std::size_t sent, bool& short_write);
  // Takes the progress of the committed descriptors; false when a LOCAL_INV failed.
  bool commit_sent(const TxBatch& b, std::size_t ncommit);
  // Our FIN once a graceful close has nothing left to send.
  void fin_when_drained();
  bool flush_pending();
  void queue_terminate(RxError e, wire::Bytes ddp_header, wire::Bytes read_req);
  void queue_control(const wire::DdpHeader& h, wire::Bytes body);  // RTR, zero reads

  // ---- receive (qp_rx.cpp)
  void parse_rx();
  // false: stop (terminate queued or QP dead)
  bool handle_fpdu(wire::Bytes ulpdu);
  // The oldest READ awaiting its response, if any.
  SendWqe* outstanding_read();
  // Starts placing a large WRITE or Read Response segment straight from the socket into its region
  // once its header is in (checks done first); `p` holds `avail` bytes of the FPDU. False: not
  // taken.
  bool start_direct(const std::uint8_t* p, std::size_t avail, std::uint16_t ulen);
  // Receives the rest of a direct segment's payload; false when the QP failed.
  bool recv_direct();
  bool rx_tagged(const wire::DdpHeader& h, wire::Bytes hdr, wire::Bytes payload);
  bool rx_send(const wire::DdpHeader& h, wire::Bytes hdr, wire::Bytes payload);
  bool rx_read_request(const wire::DdpHeader& h, wire::Bytes hdr, wire::Bytes body);
  void rx_terminate(wire::Bytes body);
  bool fail_rx(RxError e, wire::Bytes hdr, wire::Bytes read_req = {});

  // ---- state and completions (qp.cpp)
  void to_error(WcStatus first_status);
  void complete_sq();
  void complete_recv(const core::RecvWqe& w, WcStatus st, std::uint32_t len, std::uint32_t flags,
                     std::uint32_t inv, bool solicited);
  void event(QpEvent ev);
  void conn_error(int err);
  void peer_closed();

  Device& dev_;
  const std::uint32_t qpn_;
  Pd* pd_;
  Cq* send_cq_;
  Cq* recv_cq_;
  Srq* srq_;
  const bool sq_sig_all_;
  mutable std::mutex mu_;
  // Application threads waiting for mu_: the progress thread, which may hold it for a burst
  // of receives, lets go at the next segment boundary and does not take it again meanwhile
  // (a mutex is not fair: without this, a steady stream could starve abort or post_send).
  mutable std::atomic<int> app_waiting_{0};
  class AppLock {
   public:
    explicit AppLock(const Qp& q) : q_(q) {
      q_.app_waiting_.fetch_add(1, std::memory_order_relaxed);
      q_.mu_.lock();
      q_.app_waiting_.fetch_sub(1, std::memory_order_relaxed);
    }
    ~AppLock() { q_.mu_.unlock(); }
    AppLock(const AppLock&) = delete;
    AppLock& operator=(const AppLock&) = delete;

   private:
    const Qp& q_;
  };
  // `field` as the application reads it: under AppLock (what the getters return).
  template <class T>
  T read_locked(const T& field) const {
    AppLock lock(*this);
    return field;
  }
  QpState state_ = QpState::kInit;
  Phase phase_ = Phase::kIdle;
  std::unique_ptr<ByteStream> stream_;  // null: no connection
  std::uint32_t epoll_events_ = 0;      // registered with the device's epoll (0: not)
  core::QpCap cap_;
  QpEventCallback on_event_;
  std::vector<std::function<void()>> callbacks_;

  // negotiation
  MpaParams local_;
  ConnectCallback connect_cb_;
  AcceptCallback accept_cb_;
  Clock::time_point deadline_{};
  std::vector<std::uint8_t> hs_buf_;  // the MPA reply being read
  std::vector<std::uint8_t> request_bytes_;
  bool crc_ = false, markers_tx_ = false, markers_rx_ = false;
  std::uint8_t revision_ = 1;
  RtrType rtr_ = RtrType::kNone;   // the RTR of this connection (P2P), if any
  bool rtr_read_pending_ = false;  // active: our zero-length READ RTR awaits its response
  std::uint16_t ird_ = 16, ord_ = 16;

  // send side
  std::deque<SendWqe> sq_;
  std::size_t sq_next_ = 0;  // index in sq_ of the first WQE not all sent
  std::uint32_t reads_out_ = 0;
  std::deque<InboundRead> inbound_;  // reads to answer (<= IRD)
  std::uint32_t msn_tx_[3] = {1, 1, 1};
  std::uint64_t marker_tx_off_ = 0;
  std::vector<std::uint8_t> pending_;  // bytes cut off by a short write, sent first
  std::size_t pending_off_ = 0;
  std::vector<std::uint8_t> control_;  // whole FPDUs (terminate, RTR), sent before new work
  bool terminate_queued_ = false;
  bool fin_after_drain_ = false;
  bool fin_sent_ = false;
  bool tx_blocked_ = false;  // the socket refused bytes: wait for EPOLLOUT
  std::uint32_t mss_ = 1460;
  std::uint64_t fpdus_sent_ = 0;

  // receive side
  core::RecvQueue rq_;
  std::vector<std::uint8_t> rx_;  // received stream bytes not yet parsed
  std::size_t rx_len_ = 0;
  std::uint64_t rx_stream_off_ = 0;     // marker offset of rx_[0]
  std::vector<std::uint8_t> rx_plain_;  // one FPDU with markers stripped
  std::uint32_t msn_rx_[3] = {1, 1, 1};
  std::optional<core::RecvWqe> cur_recv_;  // the receive a multi-segment SEND fills
  std::uint64_t cur_recv_len_ = 0;
  bool peer_fin_ = false;

  // A WRITE segment being placed straight from the socket (no markers, no trace).
  struct Direct {
    bool active = false;  // header seen: payload, then trailer, still to come
    std::uint32_t stag = 0;
    std::uint64_t to = 0;      // where the next payload byte goes
    std::uint64_t left = 0;    // payload bytes still to receive
    std::uint32_t crc = 0;     // running CRC32c over the FPDU so far
    std::size_t trailer = 0;   // pad and CRC bytes after the payload
    std::uint32_t access = 0;  // what the region must allow (REMOTE_WRITE, LOCAL_WRITE)
    bool read_resp = false;    // a Read Response (else a WRITE)
    bool last = false;         // the DDP L bit
    std::uint64_t payload = 0;
    std::array<std::uint8_t, wire::kDdpTaggedLen> hdr{};
  } direct_;

  std::unique_ptr<StreamTrace> trace_;
  QpCounters counters_;
};

}  // namespace softrdma::iwarp
