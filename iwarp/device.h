// The iWARP device (softiwarp0): the verbs objects of core/ (PD, MR, CQ, SRQ), RC QPs running
// RDMAP/DDP/MPA over byte streams (kernel TCP sockets, see kernel_tcp_stream.h), and a
// progress thread sleeping in epoll on the streams' wait fds, a kick eventfd and the MPA
// timers.
//
// Contract with the CM layer, which owns connect/listen/accept of the TCP sockets:
//  - active:  connect(qp, fd, params, cb) on a connected socket sends the MPA request; cb gets
//             accepted (peer private data, IRD/ORD) once the QP is in RTS (after the RFC 6581
//             RTR when peer-to-peer), rejected (private data) or an error (ETIMEDOUT when no
//             reply within params.timeout, ECONNRESET, EPROTO for a malformed reply).
//  - passive: read_request(fd, timeout, cb) reads the MPA request; then accept(qp, fd, params,
//             cb) sends the reply (cb(0) once established, after the RTR when there is one) or
//             reject(fd, private_data) sends a reply with the Reject bit.
//  - connect/read_request wrap the socket in a kernel TCP stream (nonblocking, TCP_NODELAY), or,
//    with a userspace TCP configured (DeviceConfig::user_tcp), take its connection when `fd` is
//    one of its handles; the progress thread then also drives that stack (frames, timers).
//    After connect/accept the QP owns the socket (closes it when destroyed). disconnect() is
//    graceful (FIN once queued work is on the wire), abort() closes with SO_LINGER 0 (RST).
//  - Each QP's event handler reports established / disconnected / fatal (TERMINATE sent or
//    received, with layer/type/code; connection error).
//  - Callbacks run on the progress thread (or the thread in poll_progress), never under a
//    lock of the device: they may call back into it.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/cq.h"
#include "core/mr.h"
#include "core/objects.h"
#include "core/srq.h"
#include "core/types.h"
#include "iwarp/params.h"
#include "iwarp/qp.h"
#include "iwarp/user_tcp.h"
#include "wire/mpa.h"

namespace softrdma::pcap {
class PcapngWriter;
}

namespace softrdma::iwarp {

struct DeviceSnapshot;

struct DeviceConfig {
  std::string name = "softiwarp0";
  std::array<std::uint8_t, 6> mac{0x02, 0x00, 0x00, 0x00, 0x00, 0x01};  // GID[0] comes from it
  TxOptions tx;
  std::shared_ptr<pcap::PcapngWriter> trace;  // null: no tracing
  std::shared_ptr<UserTcp> user_tcp;          // null: kernel TCP only
};

class Device : public core::Objects {
 public:
  explicit Device(DeviceConfig cfg = {});
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  const std::string& name() const { return cfg_.name; }
  // GID[0]: the MAC in the interface identifier of a link-local IPv6 address (as siw).
  core::Gid gid() const;
  const DeviceConfig& config() const { return cfg_; }

  // RC only: UD and UC fail with EOPNOTSUPP.
  Qp* create_qp(Pd* pd, core::QpType type, Cq* send_cq, Cq* recv_cq, Srq* srq, core::QpCap& cap,
                bool sq_sig_all, int* err);
  int destroy_qp(Qp* qp);

  // ---- connection management (see the contract above). 0 or an errno value
  // (EINVAL: bad parameters or QP state, EBADF: not a TCP socket).
  int connect(Qp* qp, int fd, const MpaParams& local, ConnectCallback cb);
  int read_request(int fd, std::chrono::milliseconds timeout, RequestCallback cb);
  int accept(Qp* qp, int fd, const MpaParams& local, AcceptCallback cb);
  int reject(int fd, std::span<const std::uint8_t> private_data);
  int disconnect(Qp* qp);
  int abort(Qp* qp);

  // Named counters for the whole device (its QPs', destroyed ones included), for --stats.
  std::vector<std::pair<std::string, std::uint64_t>> hw_counters();
  // A copy of the objects for monitoring (iwarp/snapshot.h).
  DeviceSnapshot snapshot() const;
  // Runs one pass of receive progress on the calling thread unless another thread is in
  // one (never blocks; false then); applications that poll their CQs call it.
  bool poll_progress();
  void kick();
  // CQ overflows (kCqErr) and SRQs falling below their limit (kSrqLimitReached) go to `fn`, on
  // the thread that caused them; events before it is set are not kept.
  using ObjectEventHandler = std::function<void(core::AsyncEventType, Cq*, Srq*)>;
  void set_object_event_handler(ObjectEventHandler fn);

 private:
  struct PendingRequest {
    int fd = -1;
    std::unique_ptr<ByteStream> stream;
    Clock::time_point deadline;
    RequestCallback cb;
    std::vector<std::uint8_t> buf;
  };
  struct ReadRequestDone {
    std::vector<std::uint8_t> bytes;     // the request as read
    std::unique_ptr<ByteStream> stream;  // its connection, for the reply
  };
  bool qp_uses(const Pd* pd, const Cq* cq, const Srq* srq) const override;
  bool ah_reachable(const core::AhAttr&) const override { return false; }  // iWARP has no AHs
  void object_event(core::AsyncEventType type, Cq* cq, Srq* srq) override;
  void progress_loop();
  // The stream of `fd`: the userspace TCP's connection, else a kernel socket's.
  int open_stream(int fd, std::unique_ptr<ByteStream>& out);
  // Callbacks of the device and of every QP, to run once progress_mu_ is released.
  std::vector<std::function<void()>> collect_callbacks();
  void service_qp(Qp* qp, bool readable, bool writable);
  void run_timers();
  void read_pending(std::uint64_t id);
  int next_timeout_ms();
  // Changes what the progress loop waits for on `fd` from `was` to `want` events (0: not
  // registered), reported with `tag`.
  void watch(int fd, std::uint64_t tag, std::uint32_t was, std::uint32_t want);

  DeviceConfig cfg_;
  std::uint32_t trace_iface_ = 0;
  std::mutex object_event_mu_;
  ObjectEventHandler object_event_handler_;

  mutable std::mutex progress_mu_;  // held by whoever runs a pass; guards the maps below
  std::unordered_map<std::uint32_t, std::unique_ptr<Qp>> qps_;
  QpCounters retired_;  // counters of destroyed QPs
  std::uint32_t next_qpn_ = 0x11;
  std::map<std::uint64_t, PendingRequest> pending_;  // read_request in progress, by tag
  std::map<int, ReadRequestDone> requests_;          // requests read, by fd, until accept/reject
  std::uint64_t next_tag_ = 1ull << 32;
  std::vector<std::function<void()>> callbacks_;

  friend class Qp;
  int epoll_fd_ = -1;
  int kick_fd_ = -1;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace softrdma::iwarp
