#include "cm/liveness.h"

#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstddef>
#include <cstdio>
#include <cstring>
#include <string>

namespace softrdma::cm {
namespace {

socklen_t name_for(const wire::Gid16& gid, sockaddr_un& sun) {
  std::string name = "softrdma-cm-agent/";
  char hex[3];
  for (auto b : gid) {
    std::snprintf(hex, sizeof hex, "%02x", b);
    name += hex;
  }
  std::memset(&sun, 0, sizeof sun);
  sun.sun_family = AF_UNIX;
  std::memcpy(sun.sun_path + 1, name.data(), name.size());
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
}

void add(int epfd, int fd) {
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP;
  ev.data.fd = fd;
  epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev);
}

void remove(int epfd, int fd) {
  epoll_ctl(epfd, EPOLL_CTL_DEL, fd, nullptr);
  close(fd);
}

}  // namespace

bool Liveness::open(const wire::Gid16& self, int epfd) {
  self_ = self;
  epfd_ = epfd;
  listen_fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  sockaddr_un sun;
  const socklen_t len = name_for(self, sun);
  if (listen_fd_ < 0 || bind(listen_fd_, reinterpret_cast<sockaddr*>(&sun), len) != 0 ||
      listen(listen_fd_, 64) != 0) {
    if (listen_fd_ >= 0) close(listen_fd_);
    listen_fd_ = -1;
    return false;
  }
  add(epfd_, listen_fd_);
  return true;
}

void Liveness::watch(const wire::Gid16& peer) {
  if (listen_fd_ < 0 || peer == self_) return;
  for (const auto& [fd, g] : links_) {
    if (g == peer) return;
  }
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return;
  sockaddr_un sun;
  const socklen_t len = name_for(peer, sun);
  if (connect(fd, reinterpret_cast<sockaddr*>(&sun), len) != 0) {
    close(fd);  // not a process on this host (or already gone)
    return;
  }
  links_[fd] = peer;
  add(epfd_, fd);
}

bool Liveness::handle(int fd, std::optional<wire::Gid16>& gone) {
  if (fd == listen_fd_) {
    for (;;) {
      int c = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (c < 0) break;
      inbound_.insert(c);
      add(epfd_, c);
    }
    return true;
  }
  char buf[64];
  if (inbound_.count(fd)) {
    if (read(fd, buf, sizeof buf) <= 0) {  // the watcher went away
      inbound_.erase(fd);
      remove(epfd_, fd);
    }
    return true;
  }
  auto it = links_.find(fd);
  if (it == links_.end()) return false;
  if (read(fd, buf, sizeof buf) <= 0) {
    gone = it->second;
    links_.erase(it);
    remove(epfd_, fd);
  }
  return true;
}

}  // namespace softrdma::cm
