#include "cm/registry.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>

namespace softrdma::cm::registry {
namespace {

constexpr std::uint32_t kMagic = 0x53434d31;  // "SCM1"

std::string addr_text(const sockaddr* addr) {
  if (!addr || is_wildcard(addr)) return "*";
  char buf[INET6_ADDRSTRLEN] = {};
  if (addr->sa_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(addr)->sin_addr, buf, sizeof buf);
  } else {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(addr)->sin6_addr, buf, sizeof buf);
  }
  return buf;
}

std::string name_of(std::uint16_t ps, const std::string& addr, std::uint16_t port) {
  return "softrdma-cm/" + std::to_string(ps) + "/" + addr + "/" + std::to_string(port);
}

socklen_t make_sun(sockaddr_un& sun, const std::string& name) {
  std::memset(&sun, 0, sizeof sun);
  sun.sun_family = AF_UNIX;
  std::memcpy(sun.sun_path + 1, name.data(), name.size());  // abstract: leading NUL
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
}

int bind_name(const std::string& name) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -errno;
  sockaddr_un sun;
  socklen_t len = make_sun(sun, name);
  if (bind(fd, reinterpret_cast<sockaddr*>(&sun), len) != 0 || listen(fd, 64) != 0) {
    int e = errno;
    close(fd);
    return -e;
  }
  return fd;
}

// Asks the holder of `name`; false when nobody holds it.
bool query(const std::string& name, Answer& out) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_un sun;
  socklen_t len = make_sun(sun, name);
  if (connect(fd, reinterpret_cast<sockaddr*>(&sun), len) != 0) {
    close(fd);
    return false;
  }
  out.found = true;
  std::uint8_t buf[24];
  std::size_t got = 0;
  while (got < sizeof buf) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 2000) <= 0) break;  // the holder is busy or stuck: found, unanswered
    ssize_t n = read(fd, buf + got, sizeof buf - got);
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  close(fd);
  std::uint32_t magic;
  std::memcpy(&magic, buf, 4);
  if (got == sizeof buf && magic == kMagic) {
    out.listening = buf[4] != 0;
    std::memcpy(out.gid.data(), buf + 8, 16);
  }
  return true;
}

// Does any specific address hold (ps, *, port)? Abstract names are listed in /proc/net/unix.
bool any_specific(std::uint16_t ps, std::uint16_t port) {
  std::ifstream in("/proc/net/unix");
  const std::string prefix = "@softrdma-cm/" + std::to_string(ps) + "/";
  const std::string suffix = "/" + std::to_string(port);
  std::string line;
  while (std::getline(in, line)) {
    auto at = line.find(prefix);
    if (at == std::string::npos) continue;
    std::string name = line.substr(at);
    if (name.size() >= suffix.size() &&
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0 &&
        name.find("/*/") == std::string::npos) {
      return true;
    }
  }
  return false;
}

int claim_exact(std::uint16_t ps, const sockaddr* addr, std::uint16_t port) {
  const bool wild = !addr || is_wildcard(addr);
  int fd = bind_name(name_of(ps, addr_text(addr), port));
  if (fd < 0) return fd == -EADDRINUSE ? -EADDRINUSE : fd;
  Answer a;
  const bool clash = wild ? any_specific(ps, port) : query(name_of(ps, "*", port), a);
  if (clash) {
    close(fd);
    return -EADDRINUSE;
  }
  return fd;
}

}  // namespace

bool is_wildcard(const sockaddr* addr) {
  if (addr->sa_family == AF_INET) {
    return reinterpret_cast<const sockaddr_in*>(addr)->sin_addr.s_addr == htonl(INADDR_ANY);
  }
  if (addr->sa_family == AF_INET6) {
    const auto& a = reinterpret_cast<const sockaddr_in6*>(addr)->sin6_addr;
    return IN6_IS_ADDR_UNSPECIFIED(&a);
  }
  return false;
}

bool is_local(const sockaddr* addr) {
  if (is_wildcard(addr)) return true;
  int fd = socket(addr->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_storage ss{};
  socklen_t len = addr->sa_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
  std::memcpy(&ss, addr, len);
  if (ss.ss_family == AF_INET)
    reinterpret_cast<sockaddr_in*>(&ss)->sin_port = 0;
  else
    reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port = 0;
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&ss), len) == 0;
  close(fd);
  return ok;
}

int claim(std::uint16_t ps, const sockaddr* addr, std::uint16_t& port) {
  if (port != 0) return claim_exact(ps, addr, port);
  static thread_local std::mt19937 rng{std::random_device{}()};
  std::uniform_int_distribution<int> pick(32768, 60999);
  for (int i = 0; i < 256; ++i) {
    auto p = static_cast<std::uint16_t>(pick(rng));
    int fd = claim_exact(ps, addr, p);
    if (fd >= 0) {
      port = p;
      return fd;
    }
    if (fd != -EADDRINUSE) return fd;
  }
  return -EADDRINUSE;
}

Answer lookup(std::uint16_t ps, const sockaddr* addr, std::uint16_t port) {
  Answer a;
  if (query(name_of(ps, addr_text(addr), port), a)) return a;
  a = Answer{};
  if (query(name_of(ps, "*", port), a)) return a;
  return Answer{};
}

void answer(int listen_fd, const wire::Gid16& gid, bool listening) {
  for (;;) {
    int fd = accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) return;
    std::uint8_t buf[24] = {};
    std::memcpy(buf, &kMagic, 4);
    buf[4] = listening ? 1 : 0;
    std::memcpy(buf + 8, gid.data(), 16);
    (void)!send(fd, buf, sizeof buf, MSG_NOSIGNAL | MSG_DONTWAIT);  // the asker may be gone
    close(fd);
  }
}

}  // namespace softrdma::cm::registry
