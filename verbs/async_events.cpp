// verbs::AsyncEvents (verbs/async_events.h).
#include "verbs/async_events.h"

#include <unistd.h>

#include <cerrno>

namespace softrdma::verbs {

namespace {
// What travels through the pipe: at most PIPE_BUF, so each write is atomic.
struct Record {
  ibv_async_event ev;
  std::uint64_t id;
};
}  // namespace

std::uint64_t AsyncEvents::add() {
  std::lock_guard lock(mu_);
  const std::uint64_t id = next_++;
  reported_.emplace(id, 0);
  return id;
}

unsigned AsyncEvents::remove(std::uint64_t id) {
  std::lock_guard lock(mu_);
  const auto it = reported_.find(id);
  if (it == reported_.end()) return 0;
  const unsigned n = it->second;
  reported_.erase(it);
  return n;
}

void AsyncEvents::post(int write_fd, const ibv_async_event& ev, std::uint64_t id) {
  const Record r{ev, id};
  (void)!write(write_fd, &r, sizeof r);
}

bool AsyncEvents::take(int read_fd, ibv_async_event& ev) {
  for (;;) {
    Record r;
    const ssize_t n = read(read_fd, &r, sizeof r);
    if (n != static_cast<ssize_t>(sizeof r)) {
      if (n >= 0) errno = EIO;
      return false;
    }
    if (r.id != 0) {
      std::lock_guard lock(mu_);
      const auto it = reported_.find(r.id);
      if (it == reported_.end()) continue;  // its object was destroyed before it was read
      ++it->second;
    }
    ev = r.ev;
    return true;
  }
}

void wait_acked(pthread_mutex_t& mu, pthread_cond_t& cond, const unsigned& completed,
                unsigned reported) {
  pthread_mutex_lock(&mu);
  while (completed != reported) pthread_cond_wait(&cond, &mu);
  pthread_mutex_unlock(&mu);
}

}  // namespace softrdma::verbs
