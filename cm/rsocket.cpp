// rsockets (RDMACM_1.0): stream sockets over RC QPs connected through this librdmacm.
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
#include <endian.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <rdma/rsocket.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "cm/rsocket_wire.h"

namespace {

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

std::mutex g_mu;  // the table only
std::map<int, std::shared_ptr<RSocket>>& table() {
  static auto* t = new std::map<int, std::shared_ptr<RSocket>>;
  return *t;
}

std::shared_ptr<RSocket> find(int fd) {
  std::lock_guard lock(g_mu);
  auto it = table().find(fd);
  return it == table().end() ? nullptr : it->second;
}

void insert(int fd, std::shared_ptr<RSocket> s) {
  std::lock_guard lock(g_mu);
  table()[fd] = std::move(s);
}

int fail(int e) {
  errno = e;
  return -1;
}

socklen_t alen(const sockaddr* a) {
  return a->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
}

void post_recv(RSocket* s, int slot) {
  ibv_sge sge{reinterpret_cast<std::uintptr_t>(s->rbuf.data() + std::size_t(slot) * kSlotSize),
              kSlotSize, s->rmr->lkey};
  ibv_recv_wr wr{};
  wr.wr_id = static_cast<std::uint64_t>(slot);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  ibv_post_recv(s->qp, &wr, &bad);
}

// Creates the PD, CQ, QP and buffers of a connection id; posts the receives.
bool setup_qp(RSocket* s, rdma_cm_id* id) {
  s->id = id;
  s->pd = ibv_alloc_pd(id->verbs);
  s->ch = s->pd ? ibv_create_comp_channel(id->verbs) : nullptr;
  s->cq = s->ch ? ibv_create_cq(id->verbs, 4 * kSlots + 16, s, s->ch, 0) : nullptr;
  if (!s->cq) return false;
  fcntl(s->ch->fd, F_SETFL, fcntl(s->ch->fd, F_GETFL) | O_NONBLOCK);
  ibv_qp_init_attr a{};
  a.send_cq = a.recv_cq = s->cq;
  a.qp_type = IBV_QPT_RC;
  a.cap.max_send_wr = 2 * kSlots + 8;
  a.cap.max_recv_wr = kSlots;
  a.cap.max_send_sge = a.cap.max_recv_sge = 1;
  a.sq_sig_all = 1;
  if (rdma_create_qp(id, s->pd, &a) != 0) return false;
  s->qp = id->qp;
  s->rbuf.resize(std::size_t(kSlots) * kSlotSize);
  s->sbuf.resize(std::size_t(kSlots) * kSlotSize);
  s->credit_word = static_cast<std::uint64_t*>(std::calloc(2, sizeof(std::uint64_t)));
  s->rmr = ibv_reg_mr(s->pd, s->rbuf.data(), s->rbuf.size(), IBV_ACCESS_LOCAL_WRITE);
  s->smr = ibv_reg_mr(s->pd, s->sbuf.data(), s->sbuf.size(), IBV_ACCESS_LOCAL_WRITE);
  s->cmr = ibv_reg_mr(s->pd, s->credit_word, 2 * sizeof(std::uint64_t),
                      IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (!s->rmr || !s->smr || !s->cmr) return false;
  for (int i = 0; i < kSlots; ++i) {
    post_recv(s, i);
    s->free_sslots.push_back(i);
  }
  ibv_req_notify_cq(s->cq, 0);
  return true;
}

Hello my_hello(RSocket* s) {
  return Hello{reinterpret_cast<std::uintptr_t>(s->credit_word), s->cmr->rkey, kSlots};
}

// Connection parameters for either side, carrying `h` (which must outlive the call they go to).
rdma_conn_param conn_param(const Hello& h) {
  rdma_conn_param p{};
  p.private_data = &h;
  p.private_data_len = sizeof h;
  p.responder_resources = 1;
  p.initiator_depth = 1;
  p.rnr_retry_count = 7;
  return p;
}

void take_hello(RSocket* s, const void* pdata, std::uint8_t len) {
  const auto h = softrdma::cm::rs::parse_hello(pdata, len, kSlots);
  s->peer_credit_addr = h.credit_addr;
  s->peer_credit_rkey = h.credit_rkey;
  s->peer_slots = h.slots;
}

void teardown(RSocket* s) {
  if (s->id) {
    if (s->connected) rdma_disconnect(s->id);
    if (s->qp) rdma_destroy_qp(s->id);
    rdma_destroy_id(s->id);
  }
  for (auto& w : s->my_windows) ibv_dereg_mr(w.mr);
  if (s->rmr) ibv_dereg_mr(s->rmr);
  if (s->smr) ibv_dereg_mr(s->smr);
  if (s->cmr) ibv_dereg_mr(s->cmr);
  if (s->cq) ibv_destroy_cq(s->cq);
  if (s->ch) ibv_destroy_comp_channel(s->ch);
  if (s->pd) ibv_dealloc_pd(s->pd);
  std::free(s->credit_word);
}

// Tells the peer how many receive buffers we have re-posted (an 8-byte RDMA WRITE). Not
// once the peer's stream has ended: it sends nothing more that needs them.
void tell_credits(RSocket* s) {
  if (!s->connected || s->broken || s->eof || s->closing || s->reposted == s->reposted_told) {
    return;
  }
  s->credit_word[1] = s->reposted;
  ibv_sge sge{reinterpret_cast<std::uintptr_t>(&s->credit_word[1]), 8, s->cmr->lkey};
  ibv_send_wr wr{};
  wr.wr_id = kCreditWr;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.send_flags = IBV_SEND_INLINE;
  wr.wr.rdma.remote_addr = s->peer_credit_addr;
  wr.wr.rdma.rkey = s->peer_credit_rkey;
  ibv_send_wr* bad = nullptr;
  if (ibv_post_send(s->qp, &wr, &bad) == 0) {
    s->outstanding++;
    s->reposted_told = s->reposted;
  }
}

// Takes every completion waiting on the socket's CQ.
void drain(RSocket* s) {
  if (!s->cq) return;
  ibv_cq* ev_cq;
  void* ev_ctx;
  while (ibv_get_cq_event(s->ch, &ev_cq, &ev_ctx) == 0) ibv_ack_cq_events(ev_cq, 1);
  ibv_req_notify_cq(s->cq, 0);
  ibv_wc wc[32];
  int n;
  while ((n = ibv_poll_cq(s->cq, 32, wc)) > 0) {
    for (int i = 0; i < n; ++i) {
      const ibv_wc& w = wc[i];
      const bool is_send = w.wr_id >= kSendTag;  // (an error completion's opcode is undefined)
      if (w.status != IBV_WC_SUCCESS) {
        // Receives flushed after the peer ended its stream (its disconnect moved the QP to
        // the error state): expected, and the data before the end is still to be read.
        if (!is_send && s->eof && w.status == IBV_WC_WR_FLUSH_ERR) continue;
        if (!s->broken && std::getenv("SOFTRDMA_RS_DEBUG")) {
          std::fprintf(stderr, "rsocket %d: %s (wr_id %llx)\n", s->fd, ibv_wc_status_str(w.status),
                       static_cast<unsigned long long>(w.wr_id));
        }
        if (!s->broken) s->error = w.status == IBV_WC_WR_FLUSH_ERR ? ECONNRESET : EIO;
        s->broken = true;
        if (is_send) s->outstanding--;
        continue;
      }
      if (!is_send) {
        const int slot = static_cast<int>(w.wr_id);
        if (w.wc_flags & IBV_WC_WITH_IMM) {  // a control message
          if (be32toh(w.imm_data) == kCtrlClose) {
            s->eof = true;
            s->peer_closed = true;
          } else if (be32toh(w.imm_data) == kCtrlIomap) {
            // A window riomap cannot make (negative offset, end beyond off_t) is ignored.
            if (auto win = softrdma::cm::rs::parse_window(
                    s->rbuf.data() + std::size_t(slot) * kSlotSize, w.byte_len)) {
              s->peer_windows.push_back(*win);
            }
          }
          post_recv(s, slot);
          s->reposted++;
        } else if (w.byte_len == 0) {  // the peer shut its side
          s->eof = true;
          post_recv(s, slot);
          s->reposted++;
        } else {
          s->rx.push_back(Chunk{slot, 0, w.byte_len});
        }
      } else {
        s->outstanding--;
        if (w.wr_id != kCreditWr) s->free_sslots.push_back(static_cast<int>(w.wr_id - kSendTag));
      }
    }
  }
  if (s->reposted - s->reposted_told >= kSlots / 2) tell_credits(s);
}

std::uint64_t credits(RSocket* s) {
  const std::uint64_t peer_reposted = __atomic_load_n(&s->credit_word[0], __ATOMIC_ACQUIRE);
  return softrdma::cm::rs::credits(peer_reposted, s->peer_slots, s->sent_chunks);
}

bool readable(RSocket* s) {
  return !s->rx.empty() || s->eof || s->broken;
}
// Whether a message that must leave `reserve` credits to the peer can go (or fails at once:
// a broken connection, a peer that closed).
bool writable(RSocket* s, std::uint64_t reserve = kReservedData) {
  return s->broken || s->peer_closed || (credits(s) > reserve && !s->free_sslots.empty());
}

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

int post_send(RSocket* s, int slot, std::uint32_t len, bool imm, std::uint32_t imm_value) {
  ibv_sge sge{reinterpret_cast<std::uintptr_t>(s->sbuf.data() + std::size_t(slot) * kSlotSize), len,
              s->smr->lkey};
  ibv_send_wr wr{};
  wr.wr_id = kSendTag | static_cast<std::uint64_t>(slot);
  wr.opcode = imm ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND;
  wr.imm_data = htobe32(imm_value);
  wr.sg_list = &sge;
  wr.num_sge = len ? 1 : 0;
  ibv_send_wr* bad = nullptr;
  int rc = ibv_post_send(s->qp, &wr, &bad);
  if (rc == 0) {
    s->outstanding++;
    s->sent_chunks++;
  }
  return rc;
}

// Sends one message of `len` bytes from `src` (a chunk, a control message or an end),
// leaving `reserve` of the peer's credits.
int send_message(RSocket* s, const void* src, std::uint32_t len, bool imm, std::uint32_t v,
                 std::uint64_t reserve = kReservedData) {
  if (!wait_for(
          s, [&] { return writable(s, reserve); }, s->nonblocking ? 0 : -1))
    return EAGAIN;
  if (s->broken) return s->error ? s->error : ECONNRESET;
  if (s->peer_closed || s->closing) return EPIPE;
  const int slot = s->free_sslots.back();
  s->free_sslots.pop_back();
  if (len) std::memcpy(s->sbuf.data() + std::size_t(slot) * kSlotSize, src, len);
  return post_send(s, slot, len, imm, v);
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

// What rgetsockopt reports as the segment size (TCP_MAXSEG): the path MTU, as rdma-core.
int mss(RSocket* s) {
  return s->id && s->id->route.num_paths && s->id->route.path_rec
             ? 1 << (7 + s->id->route.path_rec->mtu)
             : 2048;
}

// Sockets closed by us whose peer has not closed yet (see the top of the file).
struct Lingering {
  std::shared_ptr<RSocket> s;
  std::chrono::steady_clock::time_point until;
};
std::mutex g_linger_mu;
std::vector<Lingering>& lingerers() {
  static auto* v = new std::vector<Lingering>;
  return *v;
}

// Whether a lingering socket may go: the peer closed, its DREQ came (an event on the id's
// channel), the connection broke or the time is up.
bool linger_done(RSocket* s, std::chrono::steady_clock::time_point until) {
  drain(s);  // sends nothing: s->closing
  if (s->peer_closed || s->broken || std::chrono::steady_clock::now() >= until) return true;
  pollfd p{s->id->channel->fd, POLLIN, 0};
  return poll(&p, 1, 0) > 0;
}

// Tears down the lingering sockets that may go; with `at_exit`, waits for them up to
// kExitLinger first.
void reap(bool at_exit) {
  std::lock_guard lock(g_linger_mu);
  auto& v = lingerers();
  const auto exit_until = std::chrono::steady_clock::now() + kExitLinger;
  for (;;) {
    for (auto it = v.begin(); it != v.end();) {
      std::lock_guard sl(it->s->mu);
      if (linger_done(it->s.get(), at_exit ? std::min(it->until, exit_until) : it->until)) {
        teardown(it->s.get());
        it = v.erase(it);
      } else {
        ++it;
      }
    }
    if (!at_exit || v.empty()) return;
    poll(nullptr, 0, 1);
  }
}

void lingering(std::shared_ptr<RSocket> s) {
  static std::once_flag once;
  // Registered after the device's own exit handler (which prints --stats): runs before it.
  std::call_once(once, [] { std::atexit([] { reap(true); }); });
  {
    std::lock_guard lock(g_linger_mu);
    lingerers().push_back(Lingering{std::move(s), std::chrono::steady_clock::now() + kLinger});
  }
  reap(false);
}

}  // namespace

extern "C" {

int rsocket(int domain, int type, int protocol) {
  (void)protocol;
  reap(false);  // sockets closed earlier whose peers have closed since
  if (domain != AF_INET && domain != AF_INET6) return fail(EAFNOSUPPORT);
  const int base = type & ~(SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (base != SOCK_STREAM) return fail(EOPNOTSUPP);  // datagram rsockets: not implemented
  int fd = eventfd(0, EFD_CLOEXEC);
  if (fd < 0) return -1;
  auto s = std::make_shared<RSocket>();
  s->fd = fd;
  s->nonblocking = (type & SOCK_NONBLOCK) != 0;
  insert(fd, std::move(s));
  return fd;
}

int rbind(int socket, const sockaddr* addr, socklen_t addrlen) {
  S s(socket);
  if (!s) return -1;
  if (!addr || addrlen < alen(addr) || s->is_bound) return fail(EINVAL);
  std::memcpy(&s->bound, addr, alen(addr));
  s->is_bound = true;
  return 0;
}

int rlisten(int socket, int backlog) {
  S s(socket);
  if (!s) return -1;
  if (rdma_create_id(nullptr, &s->id, s, RDMA_PS_TCP) != 0) return -1;
  sockaddr_in any{};
  any.sin_family = AF_INET;
  const sockaddr* a =
      s->is_bound ? reinterpret_cast<sockaddr*>(&s->bound) : reinterpret_cast<sockaddr*>(&any);
  if (rdma_bind_addr(s->id, const_cast<sockaddr*>(a)) != 0 || rdma_listen(s->id, backlog) != 0) {
    const int e = errno;
    rdma_destroy_id(s->id);
    s->id = nullptr;
    return fail(e);
  }
  s->listening = true;
  return 0;
}

int raccept(int socket, sockaddr* addr, socklen_t* addrlen) {
  rdma_cm_id* lid;
  bool nonblocking;
  {
    S l(socket);
    if (!l) return -1;
    if (!l->listening) return fail(EINVAL);
    lid = l->id;
    nonblocking = l->nonblocking;
  }
  if (nonblocking) {
    pollfd p{lid->channel->fd, POLLIN, 0};
    if (poll(&p, 1, 0) <= 0) return fail(EAGAIN);
  }
  rdma_cm_id* id = nullptr;
  if (rdma_get_request(lid, &id) != 0) return -1;
  auto s = std::make_shared<RSocket>();
  if (!setup_qp(s.get(), id)) {
    rdma_reject(id, nullptr, 0);
    rdma_destroy_id(id);
    return fail(ENOMEM);
  }
  take_hello(s.get(), id->event->param.conn.private_data, id->event->param.conn.private_data_len);
  const Hello h = my_hello(s.get());
  rdma_conn_param p = conn_param(h);
  if (rdma_accept(id, &p) != 0) {
    const int e = errno;
    teardown(s.get());
    return fail(e);
  }
  s->connected = true;
  int fd = eventfd(0, EFD_CLOEXEC);
  if (fd < 0) {
    teardown(s.get());
    return -1;
  }
  s->fd = fd;
  if (addr && addrlen) {
    sockaddr* peer = rdma_get_peer_addr(id);
    const socklen_t n = std::min(*addrlen, alen(peer));
    std::memcpy(addr, peer, n);
    *addrlen = alen(peer);
  }
  insert(fd, std::move(s));
  return fd;
}

int rconnect(int socket, const sockaddr* addr, socklen_t addrlen) {
  S s(socket);
  if (!s) return -1;
  if (!addr || addrlen < alen(addr) || s->id) return fail(s->id ? EISCONN : EINVAL);
  rdma_cm_id* id = nullptr;
  if (rdma_create_id(nullptr, &id, s, RDMA_PS_TCP) != 0) return -1;
  auto bail = [&](int e) {
    if (s->qp) rdma_destroy_qp(id);
    s->qp = nullptr;
    rdma_destroy_id(id);
    s->id = nullptr;
    return fail(e);
  };
  if (rdma_resolve_addr(id, s->is_bound ? reinterpret_cast<sockaddr*>(&s->bound) : nullptr,
                        const_cast<sockaddr*>(addr), 2000) != 0 ||
      rdma_resolve_route(id, 2000) != 0) {
    return bail(errno);
  }
  if (!setup_qp(s.get(), id)) return bail(ENOMEM);
  const Hello h = my_hello(s.get());
  rdma_conn_param p = conn_param(h);
  p.retry_count = 7;
  if (rdma_connect(id, &p) != 0) {
    s->error = errno == ECONNREFUSED ? ECONNREFUSED : errno;
    return bail(s->error);
  }
  take_hello(s.get(), id->event->param.conn.private_data, id->event->param.conn.private_data_len);
  s->connected = true;
  return 0;  // connected, even on a non-blocking socket (SO_ERROR then says 0)
}

int rshutdown(int socket, int how) {
  S s(socket);
  if (!s) return -1;
  if (!s->connected) return fail(ENOTCONN);
  if ((how == SHUT_WR || how == SHUT_RDWR) && !s->shut_wr) {
    drain(s);
    if (!s->peer_closed && !s->broken) {
      const bool nb = s->nonblocking;
      s->nonblocking = false;  // the end of the stream is always sent
      send_message(s, nullptr, 0, false, 0, kReservedEnd);
      s->nonblocking = nb;
      wait_for(
          s, [&] { return s->outstanding == 0 || s->broken; }, 2000);
    }
    s->shut_wr = true;
  }
  return 0;
}

int rclose(int socket) {
  std::shared_ptr<RSocket> s;
  {
    std::lock_guard lock(g_mu);
    auto it = table().find(socket);
    if (it == table().end()) return fail(EBADF);
    s = std::move(it->second);
    table().erase(it);
  }
  bool linger = false;
  {
    std::lock_guard sl(s->mu);
    if (s->connected) {
      drain(s.get());  // the peer's close may be here already: then we send nothing
      if (!s->peer_closed && !s->broken) {
        s->nonblocking = false;
        const int rc = send_message(s.get(), nullptr, 0, true, kCtrlClose, kReservedClose);
        s->closing = true;
        if (rc == 0) {
          wait_for(
              s.get(), [&] { return s->outstanding == 0 || s->broken; }, 2000);
          linger = !s->broken && !s->peer_closed;
        }
      }
    }
    close(s->fd);
    if (!linger) teardown(s.get());
  }
  if (linger) {
    lingering(std::move(s));
  } else {
    reap(false);
  }
  return 0;
}

ssize_t rrecv(int socket, void* buf, size_t len, int flags) {
  S s(socket);
  if (!s) return -1;
  if (!s->connected) return fail(ENOTCONN);
  const bool nb = s->nonblocking || (flags & MSG_DONTWAIT);
  if (!wait_for(
          s, [&] { return readable(s); }, nb ? 0 : -1))
    return fail(EAGAIN);
  std::size_t got = 0;
  auto* out = static_cast<std::uint8_t*>(buf);
  while (got < len && !s->rx.empty()) {
    Chunk& c = s->rx.front();
    const std::size_t n = std::min<std::size_t>(len - got, c.len - c.off);
    std::memcpy(out + got, s->rbuf.data() + std::size_t(c.slot) * kSlotSize + c.off, n);
    got += n;
    c.off += static_cast<std::uint32_t>(n);
    if (c.off == c.len) {
      post_recv(s, c.slot);
      s->reposted++;
      s->rx.pop_front();
    }
  }
  if (s->reposted - s->reposted_told >= kSlots / 2) tell_credits(s);
  if (got == 0 && s->broken && !s->eof) return fail(s->error ? s->error : ECONNRESET);
  return static_cast<ssize_t>(got);  // 0: the peer ended the stream
}

ssize_t rsend(int socket, const void* buf, size_t len, int flags) {
  S s(socket);
  if (!s) return -1;
  if (!s->connected) return fail(ENOTCONN);
  if (s->shut_wr) return fail(EPIPE);
  const bool nb = s->nonblocking || (flags & MSG_DONTWAIT);
  std::size_t sent = 0;
  const auto* in = static_cast<const std::uint8_t*>(buf);
  while (sent < len) {
    const std::uint32_t n =
        static_cast<std::uint32_t>(std::min<std::size_t>(len - sent, kSlotSize));
    const bool old = s->nonblocking;
    s->nonblocking = nb || sent > 0;  // block for the first chunk only
    const int rc = send_message(s, in + sent, n, false, 0);
    s->nonblocking = old;
    if (rc == EAGAIN) break;
    if (rc) return sent ? static_cast<ssize_t>(sent) : fail(rc);
    sent += n;
  }
  if (sent == 0 && len > 0) return fail(EAGAIN);
  return static_cast<ssize_t>(sent);
}

ssize_t rrecvfrom(int socket, void* buf, size_t len, int flags, sockaddr* src, socklen_t* srclen) {
  if (src && srclen) rgetpeername(socket, src, srclen);
  return rrecv(socket, buf, len, flags);
}

ssize_t rsendto(int socket, const void* buf, size_t len, int flags, const sockaddr*, socklen_t) {
  return rsend(socket, buf, len, flags);  // a connected stream: the address is ignored
}

ssize_t rrecvmsg(int socket, msghdr* msg, int flags) {
  ssize_t total = 0;
  for (std::size_t i = 0; i < msg->msg_iovlen; ++i) {
    const ssize_t n = rrecv(socket, msg->msg_iov[i].iov_base, msg->msg_iov[i].iov_len,
                            i ? (flags | MSG_DONTWAIT) : flags);
    if (n < 0) return total ? total : n;
    total += n;
    if (static_cast<std::size_t>(n) < msg->msg_iov[i].iov_len) break;
  }
  return total;
}

ssize_t rsendmsg(int socket, const msghdr* msg, int flags) {
  ssize_t total = 0;
  for (std::size_t i = 0; i < msg->msg_iovlen; ++i) {
    const ssize_t n = rsend(socket, msg->msg_iov[i].iov_base, msg->msg_iov[i].iov_len, flags);
    if (n < 0) return total ? total : n;
    total += n;
    if (static_cast<std::size_t>(n) < msg->msg_iov[i].iov_len) break;
  }
  return total;
}

ssize_t rread(int socket, void* buf, size_t count) {
  return rrecv(socket, buf, count, 0);
}
ssize_t rwrite(int socket, const void* buf, size_t count) {
  return rsend(socket, buf, count, 0);
}

ssize_t rreadv(int socket, const iovec* iov, int iovcnt) {
  msghdr m{};
  m.msg_iov = const_cast<iovec*>(iov);
  m.msg_iovlen = static_cast<std::size_t>(iovcnt);
  return rrecvmsg(socket, &m, 0);
}

ssize_t rwritev(int socket, const iovec* iov, int iovcnt) {
  msghdr m{};
  m.msg_iov = const_cast<iovec*>(iov);
  m.msg_iovlen = static_cast<std::size_t>(iovcnt);
  return rsendmsg(socket, &m, 0);
}

int rpoll(pollfd* fds, nfds_t nfds, int timeout) {
  std::vector<pollfd> real(nfds);
  std::vector<char> is_rs(nfds), is_listener(nfds);
  for (;;) {
    int ready = 0;
    for (nfds_t i = 0; i < nfds; ++i) {
      fds[i].revents = 0;
      real[i] = pollfd{fds[i].fd, fds[i].events, 0};
      S s(fds[i].fd);
      is_rs[i] = static_cast<bool>(s);
      is_listener[i] = s && s->listening;
      if (!s) continue;
      if (s->listening) {
        real[i] = pollfd{s->id->channel->fd, POLLIN, 0};
      } else if (!s->connected) {
        fds[i].revents = POLLOUT & fds[i].events;  // not connecting: writable, as TCP says
        real[i] = pollfd{-1, 0, 0};
      } else {
        drain(s.get());
        short rev = 0;
        if ((fds[i].events & POLLIN) && readable(s.get())) rev |= POLLIN;
        if ((fds[i].events & POLLOUT) && writable(s.get())) rev |= POLLOUT;
        if (s->broken && s->rx.empty()) rev |= POLLHUP;  // once what arrived has been read
        fds[i].revents = rev;
        real[i] = pollfd{s->ch->fd, POLLIN, 0};
      }
      if (fds[i].revents) ++ready;
    }
    errno = 0;
    // Plain fds and listeners: ask the kernel without waiting.
    if (poll(real.data(), nfds, 0) > 0) {
      for (nfds_t i = 0; i < nfds; ++i) {
        if (is_rs[i] && !is_listener[i]) continue;
        const short rev = is_listener[i]
                              ? static_cast<short>((real[i].revents & POLLIN) ? POLLIN : 0)
                              : static_cast<short>(real[i].revents &
                                                   (fds[i].events | POLLERR | POLLHUP | POLLNVAL));
        if (rev && !fds[i].revents) ++ready;
        fds[i].revents |= rev;
      }
    }
    if (ready > 0 || timeout == 0) return ready;
    // Sleep until a completion or an fd wakes us, but at most 1 ms: credits come by RDMA
    // WRITE and make no noise.
    const int slice = timeout < 0 ? 1 : std::min(timeout, 1);
    const int r = poll(real.data(), nfds, slice);
    if (r < 0 && errno != EINTR) return -1;
    if (timeout > 0) timeout = std::max(0, timeout - slice);
  }
}

int rselect(int nfds, fd_set* readfds, fd_set* writefds, fd_set* exceptfds, timeval* timeout) {
  std::vector<pollfd> p;
  for (int fd = 0; fd < nfds; ++fd) {
    short ev = 0;
    if (readfds && FD_ISSET(fd, readfds)) ev |= POLLIN;
    if (writefds && FD_ISSET(fd, writefds)) ev |= POLLOUT;
    if (exceptfds && FD_ISSET(fd, exceptfds)) ev |= POLLPRI;
    if (ev) p.push_back(pollfd{fd, ev, 0});
  }
  const int ms = timeout ? static_cast<int>(timeout->tv_sec * 1000 + timeout->tv_usec / 1000) : -1;
  const int n = rpoll(p.data(), p.size(), ms);
  if (n < 0) return n;
  if (readfds) FD_ZERO(readfds);
  if (writefds) FD_ZERO(writefds);
  if (exceptfds) FD_ZERO(exceptfds);
  int count = 0;
  for (const pollfd& q : p) {
    if (readfds && (q.revents & (POLLIN | POLLHUP))) FD_SET(q.fd, readfds), ++count;
    if (writefds && (q.revents & POLLOUT)) FD_SET(q.fd, writefds), ++count;
    if (exceptfds && (q.revents & POLLPRI)) FD_SET(q.fd, exceptfds), ++count;
  }
  return count;
}

int rgetpeername(int socket, sockaddr* addr, socklen_t* addrlen) {
  S s(socket);
  if (!s) return -1;
  if (!s->connected) return fail(ENOTCONN);
  sockaddr* a = rdma_get_peer_addr(s->id);
  std::memcpy(addr, a, std::min(*addrlen, alen(a)));
  *addrlen = alen(a);
  return 0;
}

int rgetsockname(int socket, sockaddr* addr, socklen_t* addrlen) {
  S s(socket);
  if (!s) return -1;
  const sockaddr* a = s->id ? rdma_get_local_addr(s->id) : reinterpret_cast<sockaddr*>(&s->bound);
  if (a->sa_family == AF_UNSPEC) {
    std::memset(addr, 0, *addrlen);
    return 0;
  }
  std::memcpy(addr, a, std::min(*addrlen, alen(a)));
  *addrlen = alen(a);
  return 0;
}

int rsetsockopt(int socket, int level, int optname, const void* optval, socklen_t optlen) {
  S s(socket);
  if (!s) return -1;
  if (level == SOL_RDMA && optname == RDMA_ROUTE) return 0;  // routes come from rdma_cm
  int v = 0;
  if (optval && optlen >= sizeof(int))
    std::memcpy(&v, optval, sizeof v);
  else if (optval && optlen >= 1)
    v = *static_cast<const std::uint8_t*>(optval);
  // Accepted and reported back by rgetsockopt; buffer sizes and RDMA queue sizes are fixed
  // (32 buffers of 64 KiB each way), TCP keep-alives have no meaning over RDMA.
  s->opts[{level, optname}] = v;
  return 0;
}

int rgetsockopt(int socket, int level, int optname, void* optval, socklen_t* optlen) {
  S s(socket);
  if (!s) return -1;
  if (!optval || !optlen || *optlen < sizeof(int)) return fail(EINVAL);
  if (level == IPPROTO_TCP && optname == TCP_INFO) {
    // As rdma-core's rsockets: the state and the send queue's depth as the window; the rest
    // (retransmissions, RTT …) is TCP's and zero here.
    tcp_info info{};
    info.tcpi_state = s->connected && !s->broken ? TCP_ESTABLISHED : TCP_CLOSE;
    info.tcpi_snd_cwnd = kSlots;
    info.tcpi_snd_mss = info.tcpi_rcv_mss = static_cast<std::uint32_t>(mss(s));
    const socklen_t n = std::min<socklen_t>(*optlen, sizeof info);
    std::memcpy(optval, &info, n);
    *optlen = n;
    return 0;
  }
  if (level == SOL_SOCKET && optname == SO_LINGER) {
    if (*optlen < sizeof(linger)) return fail(EINVAL);
    linger l{};
    auto it = s->opts.find({level, optname});
    l.l_onoff = it != s->opts.end() && it->second;
    std::memcpy(optval, &l, sizeof l);
    *optlen = sizeof l;
    return 0;
  }
  int v = 0;
  if (level == IPPROTO_TCP && optname == TCP_MAXSEG) {
    // As rdma-core's rsockets: the path MTU.
    v = mss(s);
  } else if (level == SOL_SOCKET && optname == SO_ERROR) {
    v = s->error;
    s->error = 0;
  } else if (level == SOL_SOCKET && (optname == SO_SNDBUF || optname == SO_RCVBUF)) {
    v = kSlots * static_cast<int>(kSlotSize);
  } else {
    auto it = s->opts.find({level, optname});
    v = it == s->opts.end() ? 0 : it->second;
  }
  std::memcpy(optval, &v, sizeof v);
  *optlen = sizeof v;
  return 0;
}

int rfcntl(int socket, int cmd, ...) {
  S s(socket);
  if (!s) return -1;
  va_list ap;
  va_start(ap, cmd);
  int arg = cmd == F_SETFL ? va_arg(ap, int) : 0;
  va_end(ap);
  if (cmd == F_GETFL) return O_RDWR | (s->nonblocking ? O_NONBLOCK : 0);
  if (cmd == F_SETFL) {
    s->nonblocking = (arg & O_NONBLOCK) != 0;
    return 0;
  }
  return fail(EINVAL);
}

off_t riomap(int socket, void* buf, size_t len, int prot, int flags, off_t offset) {
  (void)flags;
  S s(socket);
  if (!s) return -1;
  if (!s->connected) return fail(ENOTCONN);
  if (!(prot & PROT_WRITE) || offset < 0) return fail(EINVAL);  // offset -1 (pick one): not done
  Window w{offset, reinterpret_cast<std::uintptr_t>(buf), 0, len};
  w.mr = ibv_reg_mr(s->pd, buf, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (!w.mr) return -1;
  w.rkey = w.mr->rkey;
  w.buf = buf;
  s->my_windows.push_back(w);
  std::uint8_t wire[softrdma::cm::rs::kWindowBytes];
  softrdma::cm::rs::encode_window({offset, w.addr, w.rkey, w.len}, wire);
  const bool nb = s->nonblocking;
  s->nonblocking = false;
  const int rc = send_message(s, wire, sizeof wire, true, kCtrlIomap);
  s->nonblocking = nb;
  if (rc) return fail(rc);
  return offset;
}

int riounmap(int socket, void* buf, size_t len) {
  S s(socket);
  if (!s) return -1;
  auto it = std::find_if(s->my_windows.begin(), s->my_windows.end(),
                         [&](const Window& w) { return w.buf == buf && w.len == len; });
  if (it == s->my_windows.end()) return fail(EINVAL);
  ibv_dereg_mr(it->mr);
  s->my_windows.erase(it);
  return 0;
}

size_t riowrite(int socket, const void* buf, size_t count, off_t offset, int flags) {
  S s(socket);
  if (!s) return 0;
  if (!s->connected) return errno = ENOTCONN, 0;
  drain(s);  // the peer's windows arrive as control messages
  std::uint64_t remote = 0;
  const auto win = std::find_if(
      s->peer_windows.begin(), s->peer_windows.end(),
      [&](const softrdma::cm::rs::Window& w) { return window_covers(w, offset, count, remote); });
  if (win == s->peer_windows.end()) return errno = EINVAL, 0;
  const bool nb = s->nonblocking || (flags & MSG_DONTWAIT);
  std::size_t done = 0;
  const auto* in = static_cast<const std::uint8_t*>(buf);
  while (done < count) {
    if (!wait_for(
            s, [&] { return s->broken || !s->free_sslots.empty(); }, nb && done == 0 ? 0 : -1)) {
      break;
    }
    if (s->broken) return done ? done : (errno = s->error ? s->error : ECONNRESET, 0);
    const int slot = s->free_sslots.back();
    s->free_sslots.pop_back();
    const auto n = static_cast<std::uint32_t>(std::min<std::size_t>(count - done, kSlotSize));
    std::memcpy(s->sbuf.data() + std::size_t(slot) * kSlotSize, in + done, n);
    ibv_sge sge{reinterpret_cast<std::uintptr_t>(s->sbuf.data() + std::size_t(slot) * kSlotSize), n,
                s->smr->lkey};
    ibv_send_wr wr{};
    wr.wr_id = kSendTag | static_cast<std::uint64_t>(slot);
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.wr.rdma.remote_addr = remote + done;
    wr.wr.rdma.rkey = win->rkey;
    ibv_send_wr* bad = nullptr;
    if (ibv_post_send(s->qp, &wr, &bad) != 0) break;
    s->outstanding++;
    done += n;
  }
  if (done == 0) errno = EAGAIN;
  return done;
}

}  // extern "C"
