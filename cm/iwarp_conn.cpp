// rdma_cm over iWARP: the way the kernel's iw_cm and siw set up connections, with the MPA
// negotiation done by softiwarp0 (verbs/iwarp_cm.h, docs/iwarp.md) on sockets this file opens.
#include "cm/iwarp_conn.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "cm/agent.h"
#include "verbs/iwarp_cm.h"

namespace softrdma::cm {
namespace {

constexpr auto kRequestTimeout = std::chrono::milliseconds(5000);  // siw's MPA request wait

socklen_t addr_len(const sockaddr* a) {
  return a->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
}

void watch(int fd, std::uint32_t events) {
  epoll_event ev{};
  ev.events = events;
  ev.data.fd = fd;
  if (epoll_ctl(agent_epoll(), EPOLL_CTL_MOD, fd, &ev) != 0) {
    epoll_ctl(agent_epoll(), EPOLL_CTL_ADD, fd, &ev);
  }
}

void unwatch(int fd) {
  epoll_ctl(agent_epoll(), EPOLL_CTL_DEL, fd, nullptr);
}

// softiwarp0's userspace TCP, whose sockets replace the kernel's (docs/iwarp.md), or null.
iwarp::UserTcp* user_tcp() {
  return agent_iwarp() ? agent_iwarp()->user_tcp() : nullptr;
}

void close_socket(int fd) {
  if (iwarp::UserTcp* u = user_tcp()) {
    u->close(fd);
  } else {
    close(fd);
  }
}

// The local and peer addresses of a connected socket into the id's route.
void fill_names(CmId* c, int fd) {
  if (iwarp::UserTcp* u = user_tcp()) {
    u->names(fd, c->id.route.addr.src_storage, c->id.route.addr.dst_storage);
    return;
  }
  socklen_t len = sizeof c->id.route.addr.src_storage;
  getsockname(fd, &c->id.route.addr.src_addr, &len);
  len = sizeof c->id.route.addr.dst_storage;
  getpeername(fd, &c->id.route.addr.dst_addr, &len);
}

void close_tcp(CmId* id) {
  if (id->tcp_fd < 0) return;
  unwatch(id->tcp_fd);
  close_socket(id->tcp_fd);
  id->tcp_fd = -1;
  id->tcp_connecting = false;
}

int new_socket(int family) {
  if (iwarp::UserTcp* u = user_tcp()) {
    return family == AF_INET || family == AF_INET6 ? u->socket() : -EAFNOSUPPORT;
  }
  int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -errno;
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

iwarp::MpaParams params_for(CmId* id, const void* pdata, std::size_t len) {
  iwarp::MpaParams p = agent_iwarp()->configured_params();
  p.ird = id->responder_resources;
  p.ord = id->initiator_depth;
  const auto* b = static_cast<const std::uint8_t*>(pdata);
  if (b && len) p.private_data.assign(b, b + len);
  return p;
}

// The QP's own view of the connection: a close or a fatal error ends it.
void hook_qp(CmId* id) {
  agent_iwarp()->set_event_handler(id->id.qp, [id](const iwarp::QpEvent& ev) {
    if (ev.kind == iwarp::QpEvent::Kind::kEstablished ||
        ev.kind == iwarp::QpEvent::Kind::kLastWqeReached) {
      return;
    }
    post_task([id] {
      if (!is_tracked(id) || id->state != State::kEstablished) return;
      id->state = State::kClosed;
      deliver(make_event(id, RDMA_CM_EVENT_DISCONNECTED, 0));
    });
  });
}

void fill_conn(Event* ev, const std::vector<std::uint8_t>& pdata, int rr, int id_depth) {
  const std::size_t n = std::min(pdata.size(), ev->private_data.size());
  if (n) std::memcpy(ev->private_data.data(), pdata.data(), n);  // data() may be null
  ev->ev.param.conn.private_data = n ? ev->private_data.data() : nullptr;
  ev->ev.param.conn.private_data_len = static_cast<std::uint8_t>(std::min<std::size_t>(n, 255));
  ev->ev.param.conn.responder_resources = static_cast<std::uint8_t>(std::min(rr, 255));
  ev->ev.param.conn.initiator_depth = static_cast<std::uint8_t>(std::min(id_depth, 255));
}

// TCP is up: the QP sends the MPA request.
void start_mpa(CmId* id) {
  unwatch(id->tcp_fd);
  id->tcp_connecting = false;
  const int fd = id->tcp_fd;
  iwarp::MpaParams p = params_for(id, id->mpa_private.data(), id->mpa_private.size());
  hook_qp(id);
  int rc = agent_iwarp()->connect(id->id.qp, fd, p, [id, fd](const iwarp::ConnectResult& r) {
    post_task([id, fd, r] {
      if (!is_tracked(id)) return;
      if (r.kind == iwarp::ConnectResult::Kind::kAccepted) {
        id->tcp_fd = -1;  // the QP owns the socket now
        id->state = State::kEstablished;
        Event* ev = make_event(id, RDMA_CM_EVENT_ESTABLISHED, 0);
        // A revision 1 reply carries no IRD/ORD: report our own, as siw does.
        const bool told = r.peer_ord || r.peer_ird;
        fill_conn(ev, r.private_data, told ? r.peer_ord : id->responder_resources,
                  told ? r.peer_ird : id->initiator_depth);
        deliver(ev);
        return;
      }
      if (id->tcp_fd == fd) close_tcp(id);
      id->state = State::kClosed;
      Event* ev;
      if (r.kind == iwarp::ConnectResult::Kind::kRejected) {
        ev = make_event(id, RDMA_CM_EVENT_REJECTED, -ECONNREFUSED);
        fill_conn(ev, r.private_data, 0, 0);
      } else if (r.error == ETIMEDOUT) {
        ev = make_event(id, RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT);
      } else if (r.error == ECONNRESET || r.error == ECONNREFUSED) {
        ev = make_event(id, RDMA_CM_EVENT_REJECTED, -r.error);
      } else {
        ev = make_event(id, RDMA_CM_EVENT_CONNECT_ERROR, -r.error);
      }
      deliver(ev);
    });
  });
  if (rc) {
    close_tcp(id);
    id->state = State::kClosed;
    deliver(make_event(id, RDMA_CM_EVENT_CONNECT_ERROR, -rc));
  }
}

// A connection accepted on a listener: read its MPA request, then offer it as a request.
void on_accepted(CmId* listener, int fd) {
  agent_iwarp()->read_request(
      agent_context(), fd, kRequestTimeout, [listener, fd](const iwarp::RequestResult& r) {
        post_task([listener, fd, r] {
          if (r.error || !is_tracked(listener) || listener->destroyed ||
              listener->state != State::kListen) {
            close_socket(fd);  // a broken or late request: nobody to offer it to
            return;
          }
          CmId* c = new_child(listener);
          if (!c) {
            close_socket(fd);
            return;
          }
          fill_names(c, fd);
          c->tcp_fd = fd;
          // RFC 6581 requests carry the initiator's IRD and ORD: our IRD must cover its ORD and
          // our ORD must stay within its IRD. A revision 1 request (or a revision 2 one without
          // the enhanced words) says nothing: offer the device's limits, as siw does, so that
          // rdma_accept(NULL) leaves the QP able to issue READs (0 would mean none, ever).
          int peer_ord = r.request.ord, peer_ird = r.request.ird;
          if (!r.request.enhanced) {
            ibv_device_attr da{};
            if (ibv_query_device(agent_context(), &da) == 0) {
              peer_ord = da.max_qp_rd_atom;
              peer_ird = da.max_qp_init_rd_atom;
            }
          }
          c->responder_resources = static_cast<std::uint8_t>(std::min(peer_ord, 255));
          c->initiator_depth = static_cast<std::uint8_t>(std::min(peer_ird, 255));
          c->state = State::kReqRcvd;
          track(c);
          Event* ev = make_event(c, RDMA_CM_EVENT_CONNECT_REQUEST, 0);
          fill_conn(ev, r.request.private_data, peer_ord, peer_ird);
          offer_request(c, listener, ev);
        });
      });
}

// Opens the TCP connection of the bound id->tcp_fd to the id's destination: over the userspace
// TCP the handle turns readable once the outcome is known, over the kernel's writable (or the
// MPA request goes at once). 0 or an errno.
int start_tcp_connect(CmId* id) {
  const sockaddr* dst = &id->id.route.addr.dst_addr;
  if (iwarp::UserTcp* u = user_tcp()) {
    if (const int rc = u->connect(id->tcp_fd, dst)) return rc;
    id->tcp_connecting = true;
    watch(id->tcp_fd, EPOLLIN);
    return 0;
  }
  if (connect(id->tcp_fd, dst, addr_len(dst)) == 0) {
    start_mpa(id);
    return 0;
  }
  if (errno != EINPROGRESS) return errno;
  id->tcp_connecting = true;
  watch(id->tcp_fd, EPOLLOUT);
  return 0;
}

// A port nobody listens on may be about to be (a server closing one listener and opening the
// next, as qperf and perftest -R do between their connections; Debian's perftest 4.5 crashes
// when its own retry follows a REJECTED): for 250 ms after the first refusal, connect again
// every 10 ms, from a fresh socket on the same address, before reporting REJECTED. On this host
// and across hosts alike, over kernel TCP and over the userspace TCP.
bool retry_refused(CmId* id) {
  const auto now = Clock::now();
  if (id->iw_refused_since == Clock::time_point{}) id->iw_refused_since = now;
  if (now - id->iw_refused_since > std::chrono::milliseconds(250)) return false;
  sockaddr_storage src = id->id.route.addr.src_storage;
  reinterpret_cast<sockaddr_in*>(&src)->sin_port = 0;
  close_tcp(id);
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return iw_bind(id, reinterpret_cast<const sockaddr*>(&src)) == 0 && start_tcp_connect(id) == 0;
}

}  // namespace

bool iwarp_mode() {
  return agent_iwarp() != nullptr;
}

bool iw_user_tcp_source(const sockaddr* addr, sockaddr_storage* source) {
  if (!agent_context()) return false;  // started here when rdma_bind_addr comes first
  iwarp::UserTcp* u = iwarp_mode() ? user_tcp() : nullptr;
  if (!u) return false;
  if (source) *source = u->address();
  return !addr || u->owns(addr);
}

int iw_bind(CmId* id, const sockaddr* addr) {
  if (id->tcp_fd >= 0) return EINVAL;
  int fd = new_socket(addr->sa_family);
  if (fd < 0) return -fd;
  if (iwarp::UserTcp* u = user_tcp()) {
    if (const int rc = u->bind(fd, addr)) {
      u->close(fd);
      return rc;
    }
    id->tcp_fd = fd;
    sockaddr_storage peer{};
    u->names(fd, id->id.route.addr.src_storage, peer);
    return 0;
  }
  if (bind(fd, addr, addr_len(addr)) != 0) {
    const int e = errno == EADDRNOTAVAIL ? EADDRNOTAVAIL : errno;
    close(fd);
    return e;
  }
  id->tcp_fd = fd;
  socklen_t len = sizeof id->id.route.addr.src_storage;
  getsockname(fd, &id->id.route.addr.src_addr, &len);
  return 0;
}

int iw_listen(CmId* id, int backlog) {
  if (iwarp::UserTcp* u = user_tcp()) {
    if (const int rc = u->listen(id->tcp_fd, backlog > 0 ? backlog : SOMAXCONN)) return rc;
    watch(id->tcp_fd, EPOLLIN);
    return 0;
  }
  if (listen(id->tcp_fd, backlog > 0 ? backlog : SOMAXCONN) != 0) return errno;
  watch(id->tcp_fd, EPOLLIN);
  return 0;
}

int iw_connect(CmId* id, const rdma_conn_param* param) {
  if (!id->id.qp) return EINVAL;  // iWARP connects a QP: create it on the id first
  const auto* pd = param ? static_cast<const std::uint8_t*>(param->private_data) : nullptr;
  const std::size_t plen = param && pd ? param->private_data_len : 0;
  id->mpa_private.assign(pd, pd + plen);
  const State before = id->state;
  id->state = State::kReqSent;
  const int rc = start_tcp_connect(id);
  if (rc != 0 && user_tcp()) id->state = before;  // lwIP refused before sending anything
  return rc;
}

int iw_accept(CmId* id, const rdma_conn_param* param) {
  if (!id->id.qp || id->tcp_fd < 0) return EINVAL;
  const auto* pd = param ? static_cast<const std::uint8_t*>(param->private_data) : nullptr;
  const std::size_t plen = param && pd ? param->private_data_len : 0;
  iwarp::MpaParams p = params_for(id, pd, plen);
  const int fd = id->tcp_fd;
  hook_qp(id);
  id->state = State::kRepSent;
  int rc = agent_iwarp()->accept(id->id.qp, fd, p, [id, fd](int error) {
    post_task([id, fd, error] {
      if (!is_tracked(id)) return;
      if (error == 0) {
        id->tcp_fd = -1;  // owned by the QP
        id->state = State::kEstablished;
        Event* ev = make_event(id, RDMA_CM_EVENT_ESTABLISHED, 0);
        ev->ev.param.conn.responder_resources = id->responder_resources;
        ev->ev.param.conn.initiator_depth = id->initiator_depth;
        deliver(ev);
        return;
      }
      if (id->tcp_fd == fd) close_tcp(id);
      id->state = State::kClosed;
      deliver(make_event(
          id, error == ETIMEDOUT ? RDMA_CM_EVENT_UNREACHABLE : RDMA_CM_EVENT_CONNECT_ERROR,
          -error));
    });
  });
  if (rc) {
    id->state = State::kReqRcvd;
    return rc;
  }
  return 0;
}

int iw_reject(CmId* id, const void* private_data, std::uint8_t len) {
  if (id->tcp_fd < 0) return EINVAL;
  const auto* b = static_cast<const std::uint8_t*>(private_data);
  std::span<const std::uint8_t> pd(b, b ? len : 0);
  agent_iwarp()->reject(agent_context(), id->tcp_fd, pd);
  close_tcp(id);
  id->state = State::kClosed;
  return 0;
}

int iw_disconnect(CmId* id) {
  if (!id->id.qp) return EINVAL;
  if (id->state == State::kClosed) return 0;  // the peer went first: its event is queued
  if (id->state != State::kEstablished) return EINVAL;
  return agent_iwarp()->disconnect(id->id.qp);
}

void iw_destroy(CmId* id) {
  // id->qp may already be gone (programs call ibv_destroy_qp on it): not touched. A QP
  // destroyed closes its socket, and the peer sees the connection end.
  close_tcp(id);
}

bool iw_handle_fd(int fd, std::uint32_t events) {
  (void)events;
  CmId* id = nullptr;
  for (CmId* c : agent_ids()) {
    if (c->tcp_fd == fd) {
      id = c;
      break;
    }
  }
  if (!id) return false;
  iwarp::UserTcp* u = user_tcp();
  if (id->state == State::kListen && u) {
    for (int c; (c = u->accept(fd)) >= 0;) on_accepted(id, c);
    return true;
  }
  if (id->state == State::kListen) {
    for (;;) {
      int c = accept4(fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (c < 0) break;
      int one = 1;
      setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      on_accepted(id, c);
    }
    return true;
  }
  if (id->tcp_connecting) {
    int err = 0;
    socklen_t len = sizeof err;
    if (u) {
      err = u->error(fd);
      if (err == EINPROGRESS) return true;
    } else {
      getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    }
    if (err == 0) {
      start_mpa(id);
      return true;
    }
    if (err == ECONNREFUSED && retry_refused(id)) return true;
    close_tcp(id);
    id->state = State::kClosed;
    if (!id->destroyed) {
      // As the kernel's iw_cm: refused or reset is REJECTED, a timeout UNREACHABLE.
      const rdma_cm_event_type t = (err == ECONNREFUSED || err == ECONNRESET)
                                       ? RDMA_CM_EVENT_REJECTED
                                   : (err == ETIMEDOUT || err == EHOSTUNREACH || err == ENETUNREACH)
                                       ? RDMA_CM_EVENT_UNREACHABLE
                                       : RDMA_CM_EVENT_CONNECT_ERROR;
      deliver(make_event(id, t, -err));
    }
    return true;
  }
  return true;
}

}  // namespace softrdma::cm
