// rsockets' private parts, shared by cm/rsocket*.cpp: the socket object, the protocol's
// constants, and the connection, flow-control and linger helpers. The protocol:
//
// rsockets (RDMACM_1.0) are stream sockets over RC QPs connected through this librdmacm.
// Each side posts kSlots receive buffers of kSlotSize bytes; a SEND carries a chunk of the
// stream, a zero-length SEND the end of it (shutdown), a SEND with immediate data a control
// message (riomap's window; the close). Flow control: each side RDMA-WRITEs into the peer's
// 8-byte credit word how many of its receive buffers it has re-posted so far; a sender never
// has more than kSlots chunks the peer has not re-posted for, and keeps the last two for the
// end of its stream and its close. riowrite is an RDMA WRITE into the window the peer mapped.
// The protocol is softrdma's own: both ends must use this library (docs/rdma-cm.md).
// SOCK_DGRAM rsockets are not implemented (EOPNOTSUPP).
//
// Closing, as rdma-core's rsockets (its RS_CTRL_DISCONNECT): rclose sends a close message
// unless the peer's came first; a side that has the peer's close sends nothing more (no
// data, credits or close of its own), tears its QP down at once, and its DREQ follows. The
// side that sent the close keeps its QP (which goes on acknowledging what the peer sent
// before it saw the close) until the peer's close or DREQ arrives, the connection breaks or
// kLinger passes, and at exit waits up to kExitLinger for those (TCP's FIN_WAIT_2): so
// neither side sends to a QP that is gone, and nothing is retransmitted at teardown.
#pragma once

#include <infiniband/verbs.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "cm/rsocket_wire.h"

namespace softrdma::cm::rsockets {

constexpr int kSlots = 32;
constexpr std::uint32_t kSlotSize = 64 * 1024;
constexpr std::uint32_t kCtrlIomap = 1;         // immediate data of a control message
constexpr std::uint32_t kCtrlClose = 2;         // zero-length: the sender closed its socket
constexpr std::uint64_t kSendTag = 1ull << 32;  // send wr_ids: kSendTag | slot (recvs: slot)
constexpr std::uint64_t kCreditWr = ~0ull;
// Credits a sender keeps back for the end of its stream and its close: data and control
// messages leave two, the end of the stream one, the close none.
constexpr std::uint64_t kReservedData = 2, kReservedEnd = 1, kReservedClose = 0;
constexpr auto kLinger = std::chrono::seconds(10);
constexpr auto kExitLinger = std::chrono::seconds(2);

// Exchanged in the connection's private data (cm/rsocket_wire.h reads the peer's).
struct Hello {
  std::uint64_t credit_addr;
  std::uint32_t credit_rkey;
  std::uint32_t slots;
};
static_assert(sizeof(Hello) == softrdma::cm::rs::kHelloBytes);

struct Window {  // a region of ours that riomap registered (the peer's: rs::Window)
  off_t offset;
  std::uint64_t addr;
  std::uint32_t rkey;
  std::uint64_t len;
  ibv_mr* mr = nullptr;  // ours only
  void* buf = nullptr;
};

struct Chunk {
  int slot;
  std::uint32_t off, len;
};

struct RSocket {
  std::mutex mu;  // one operation on the socket at a time (a blocked rrecv holds it)
  int fd = -1;    // the number applications see (an eventfd reserves it)
  int type = SOCK_STREAM;
  bool nonblocking = false;
  sockaddr_storage bound{};
  bool is_bound = false;
  rdma_cm_id* id = nullptr;
  bool listening = false;
  bool connected = false;
  bool eof = false;          // the peer's stream ended
  bool peer_closed = false;  // the peer closed its socket: send it nothing more
  bool closing = false;      // we sent our close: send nothing more
  bool broken = false;       // the connection failed
  bool shut_wr = false;
  int error = 0;
  std::map<std::pair<int, int>, int> opts;  // (level, name) -> int value

  ibv_pd* pd = nullptr;
  ibv_comp_channel* ch = nullptr;
  ibv_cq* cq = nullptr;
  ibv_qp* qp = nullptr;
  std::vector<std::uint8_t> rbuf, sbuf;
  ibv_mr *rmr = nullptr, *smr = nullptr, *cmr = nullptr;
  std::uint64_t* credit_word = nullptr;  // peer writes its re-posted count here
  std::uint64_t reposted = 0;            // our re-posted count (what we tell the peer)
  std::uint64_t reposted_told = 0;
  std::uint64_t sent_chunks = 0;  // chunks sent to the peer
  std::uint32_t peer_slots = kSlots;
  std::uint64_t peer_credit_addr = 0;
  std::uint32_t peer_credit_rkey = 0;
  std::vector<int> free_sslots;
  int outstanding = 0;  // sends not yet completed
  std::deque<Chunk> rx;
  std::vector<softrdma::cm::rs::Window> peer_windows;  // as announced, checked
  std::vector<Window> my_windows;
  std::uint64_t credit_src = 0;  // registered inside sbuf's MR? kept apart: see cmr
};

// The table of sockets by the numbers applications see (guarded by table_mutex()).
std::mutex& table_mutex();
std::map<int, std::shared_ptr<RSocket>>& table();
std::shared_ptr<RSocket> find(int fd);
void insert(int fd, std::shared_ptr<RSocket> s);

inline int fail(int e) {
  errno = e;
  return -1;
}

inline socklen_t alen(const sockaddr* a) {
  return a->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
}

// Looks the socket up and locks it for the call: `S s(fd); if (!s) return -1;`.
class S {
 public:
  explicit S(int fd) : p_(find(fd)) {
    if (p_)
      lock_ = std::unique_lock(p_->mu);
    else
      errno = EBADF;
  }
  operator RSocket*() const { return p_.get(); }  // NOLINT: used as the socket
  RSocket* operator->() const { return p_.get(); }
  RSocket* get() const { return p_.get(); }

 private:
  std::shared_ptr<RSocket> p_;
  std::unique_lock<std::mutex> lock_;
};

// Connection setup and teardown (cm/rsocket_conn.cpp).
void post_recv(RSocket* s, int slot);
// Creates the PD, CQ, QP and buffers of a connection id; posts the receives.
bool setup_qp(RSocket* s, rdma_cm_id* id);
Hello my_hello(RSocket* s);
// Connection parameters for either side, carrying `h` (which must outlive the call they go to).
rdma_conn_param conn_param(const Hello& h);
void take_hello(RSocket* s, const void* pdata, std::uint8_t len);
void teardown(RSocket* s);

// Flow control and the data path (cm/rsocket_flow.cpp).
// Tells the peer how many receive buffers we have re-posted (an 8-byte RDMA WRITE). Not
// once the peer's stream has ended: it sends nothing more that needs them.
void tell_credits(RSocket* s);
// Takes every completion waiting on the socket's CQ.
void drain(RSocket* s);
std::uint64_t credits(RSocket* s);
bool readable(RSocket* s);
// Whether a message that must leave `reserve` credits to the peer can go (or fails at once:
// a broken connection, a peer that closed).
bool writable(RSocket* s, std::uint64_t reserve = kReservedData);
int post_send(RSocket* s, int slot, std::uint32_t len, bool imm, std::uint32_t imm_value);
// Sends one message of `len` bytes from `src` (a chunk, a control message or an end),
// leaving `reserve` of the peer's credits.
int send_message(RSocket* s, const void* src, std::uint32_t len, bool imm, std::uint32_t v,
                 std::uint64_t reserve = kReservedData);
// What rgetsockopt reports as the segment size (TCP_MAXSEG): the path MTU, as rdma-core.
int mss(RSocket* s);

// Waits until `ready` or the timeout (ms, -1: forever); false on timeout.
template <class Ready>
bool wait_for(RSocket* s, Ready ready, int timeout_ms) {
  for (;;) {
    drain(s);
    if (ready()) return true;
    if (timeout_ms == 0) return false;
    pollfd p{s->ch->fd, POLLIN, 0};
    // Credits arrive by RDMA WRITE, with no completion: poll often while waiting for them.
    const int r = poll(&p, 1, timeout_ms < 0 ? 1 : std::min(timeout_ms, 1));
    if (r < 0 && errno != EINTR) return false;
    if (timeout_ms > 0) timeout_ms = std::max(0, timeout_ms - 1);
  }
}

// Lingering closes (cm/rsocket_linger.cpp): `s` stays until the peer closes too (see the top).
void lingering(std::shared_ptr<RSocket> s);
// Tears down the lingering sockets that may go; with `at_exit`, waits for them up to
// kExitLinger first.
void reap(bool at_exit);

}  // namespace softrdma::cm::rsockets
