// XRC across processes (docs/verbs-abi.md#xrc-domains-shared-by-processes): an XRC target QP
// whose request names an SRQ that another device of its domain holds passes the packet to that
// device, which runs it through a hidden target QP of its own (a proxy, reporting the real
// target's QPN) against its SRQ and memory, and answers with the responses the proxy made; the
// target sends them as its own. This file is the channel: one abstract unix datagram socket per
// device, "softrdma-xrc/PID/CHANNEL", whose number the domain's registry (core/xrcd_registry.h)
// gives for each SRQ's holder. Messages are checked on receipt (sizes, magic), never trusted.
// Threads: one thread at a time receives (a progress pass); sending is safe from any thread.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "netdev/netdev.h"
#include "wire/roce_opcode.h"

namespace softrdma::rxe {

// A request passed on: who passed it and what the proxy needs of the target's attributes.
struct RelayRequest {
  std::int32_t from_pid = 0;
  std::uint64_t from_channel = 0;
  std::uint32_t target_qpn = 0, initiator_qpn = 0, psn = 0, srqn = 0;
  std::uint64_t xrcd_dev = 0, xrcd_ino = 0;  // the domain's file
  std::uint32_t access = 0;                  // the target's qp_access_flags
  std::uint8_t mtu = 0;                      // its path MTU (core Mtu)
  std::uint8_t min_rnr_timer = 0;            // for the RNR NAKs it sends
  std::uint8_t max_dest_rd_atomic = 0;
  // Passed before and never answered (the target forgot it): the proxy may have executed it, and
  // then answers it as a duplicate.
  bool resend = false;
};

// One ACK, NAK, RNR NAK, atomic ACK or empty READ response the proxy made for the request.
struct RelayResponse {
  std::uint8_t syndrome = 0;
  bool atomic = false;
  bool empty_read = false;
  std::uint32_t psn = 0;
  std::uint64_t orig = 0;
};

struct RelayAnswer {
  std::uint32_t target_qpn = 0, psn = 0;
  bool executed = false;  // the proxy took the request (its PSN is done)
  bool failed = false;    // the proxy failed it: the target sends the NAK and fails too
  std::uint8_t count = 0;
  std::array<RelayResponse, 4> responses{};
  // Appends `r`; a full answer keeps the first four (one request makes one or two).
  void add(const RelayResponse& r) {
    if (count < responses.size()) responses[count++] = r;
  }
};

// An XRC target's side: the request passed and not yet answered (one at a time, so that no
// later request is executed before an earlier one's answer: an RNR NAK makes the initiator send
// both again), the packets that came meanwhile, and the passed message under way.
struct XrcForward {
  static constexpr std::size_t kMaxParked = 256;
  // How long a passed request may wait for its answer before the target forgets it (its holder
  // stalled or died): the initiator then sends it again.
  static constexpr std::chrono::seconds kAnswerTimeout{1};
  // Found by the XRCETH check for the request in hand: the SRQ's holder.
  std::int32_t pid = 0;
  std::uint64_t channel = 0;
  std::uint32_t srqn = 0;
  bool remote = false;
  // The request waiting for its answer.
  bool outstanding = false;
  std::uint32_t psn = 0;
  bool starts = false, ends = false;
  wire::OpKind kind = wire::OpKind::kNone;
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  // A passed SEND or WRITE between its FIRST and LAST: its SRQ (0: none).
  std::uint32_t msg_srqn = 0;
  // The PSN of the last passed request whose answer never came (RelayRequest::resend).
  bool timed_out = false;
  std::uint32_t timed_out_psn = 0;
  struct Parked {
    netdev::Packet raw;  // its data points into bytes
    std::vector<std::uint8_t> bytes;
  };
  std::deque<Parked> parked;
};

class XrcRelay {
 public:
  // The largest packet passed on (a 4096-byte path MTU's packets and their headers fit).
  static constexpr std::size_t kMaxPacket = 8192;
  // Binds this device's channel; nullptr and *err when the socket cannot be made.
  static std::unique_ptr<XrcRelay> open(int* err);
  ~XrcRelay();
  XrcRelay(const XrcRelay&) = delete;
  XrcRelay& operator=(const XrcRelay&) = delete;
  int fd() const { return fd_; }  // readable when a message waits
  std::uint64_t channel() const { return channel_; }
  std::int32_t pid() const { return pid_; }  // this process's

  // 0, or why the message could not be sent: EAGAIN (the channel is full for now), ECONNREFUSED
  // or ENOENT (its device is gone), EMSGSIZE.
  int send_request(std::int32_t pid, std::uint64_t channel, const RelayRequest& rq,
                   const std::uint8_t* packet, std::size_t len);
  int send_answer(std::int32_t pid, std::uint64_t channel, const RelayAnswer& a);

  struct Message {
    enum class Kind : std::uint8_t { kNone, kRequest, kAnswer } kind = Kind::kNone;
    RelayRequest request;
    RelayAnswer answer;
    const std::uint8_t* packet = nullptr;  // a request's packet, valid until the next receive
    std::size_t len = 0;
  };
  // The next well-formed message, kNone when none waits (malformed ones are counted, skipped).
  Message receive();
  // Messages dropped for breaking the format (any thread).
  std::uint64_t malformed() const { return malformed_.load(std::memory_order_relaxed); }

 private:
  XrcRelay(int fd, std::uint64_t channel, std::int32_t pid)
      : fd_(fd), channel_(channel), pid_(pid) {}
  int send_to(std::int32_t pid, std::uint64_t channel, const void* head, std::size_t head_len,
              const void* body, std::size_t body_len);

  int fd_;
  std::uint64_t channel_;
  std::int32_t pid_;
  std::vector<std::uint8_t> buf_ = std::vector<std::uint8_t>(kMaxPacket + 256);
  std::atomic<std::uint64_t> malformed_{0};
};

}  // namespace softrdma::rxe
