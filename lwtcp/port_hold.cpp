#include "lwtcp/port_hold.h"

#include <linux/filter.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "netdev/ip_sockaddr.h"

namespace softrdma::lwtcp {

namespace {

// A kernel TCP socket on address:port that listens and drops every segment (classic BPF
// "ret #0": the kernel discards a segment its socket filter refuses, without a reset). The
// port it got, or -errno.
int open_hold(const netdev::IpAddr& address, std::uint16_t port, int& fd) {
  sockaddr_storage ss;
  socklen_t len = netdev::to_sockaddr(address, port, 0, ss);
  fd = ::socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -errno;
  auto fail = [&fd] {
    const int e = errno;
    ::close(fd);
    fd = -1;
    return -e;
  };
  const int one = 1;
  sock_filter drop[] = {{BPF_RET | BPF_K, 0, 0, 0}};
  sock_fprog prog{1, drop};
  auto* sa = reinterpret_cast<sockaddr*>(&ss);
  if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
      setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof prog) != 0 ||
      ::bind(fd, sa, len) != 0 || ::listen(fd, 1) != 0 || getsockname(fd, sa, &len) != 0) {
    return fail();
  }
  netdev::IpAddr bound;
  std::uint16_t got = 0;
  netdev::from_sockaddr(ss, bound, got);
  return got;
}

}  // namespace

PortHolds::~PortHolds() {
  for (auto& [port, h] : holds_) ::close(h.fd);
}

int PortHolds::hold(std::uint16_t port) {
  if (port != 0) {
    if (auto it = holds_.find(port); it != holds_.end()) {
      ++it->second.users;
      return port;
    }
  }
  int fd = -1;
  const int got = open_hold(address_, port, fd);
  if (got < 0) return got;
  const auto p = static_cast<std::uint16_t>(got);
  if (steer_ && !steer_(p, true)) {
    ::close(fd);
    return -EIO;
  }
  holds_[p] = Hold{fd, 1, {}};
  held_.set(p);
  return p;
}

void PortHolds::release(std::uint16_t port) {
  auto it = holds_.find(port);
  if (it == holds_.end() || it->second.users == 0) return;
  if (--it->second.users == 0) it->second.until = Clock::now() + kLinger;
}

void PortHolds::expire(Clock::time_point now) {
  for (auto it = holds_.begin(); it != holds_.end();) {
    if (it->second.users == 0 && now >= it->second.until) {
      if (steer_) steer_(it->first, false);
      ::close(it->second.fd);
      held_.reset(it->first);
      it = holds_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace softrdma::lwtcp
