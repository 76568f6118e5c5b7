// The rsockets calls (RDMACM_1.0) on stream sockets: creating, binding, listening,
// accepting, connecting, shutting down, closing, receiving, sending and socket options.
// The protocol is described in cm/rsocket_internal.h.
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

#include "cm/rsocket_internal.h"
#include "cm/rsocket_wire.h"

using namespace softrdma::cm::rsockets;

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
    std::lock_guard lock(table_mutex());
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

}  // extern "C"
