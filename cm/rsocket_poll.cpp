// rpoll and rselect: readiness of rsockets (from their completions and credits) and of
// plain fds together, as poll(2) and select(2).
#include <poll.h>
#include <rdma/rsocket.h>
#include <sys/select.h>

#include <algorithm>
#include <cerrno>
#include <vector>

#include "cm/rsocket_internal.h"

using namespace softrdma::cm::rsockets;

extern "C" {

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
}  // extern "C"
