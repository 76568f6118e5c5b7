#include "monitor/endpoint.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <fstream>

namespace softrdma::monitor {
namespace {

constexpr const char* kPrefix = "softrdma-mon/";
constexpr std::size_t kMaxAnswer = 64u << 20;  // a report larger than this is not one

socklen_t make_sun(sockaddr_un& sun, const std::string& name) {
  std::memset(&sun, 0, sizeof sun);
  sun.sun_family = AF_UNIX;
  std::memcpy(sun.sun_path + 1, name.data(), name.size());  // abstract: leading NUL
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
}

// Whether `pid` still holds its endpoint: the kernel releases it as the process ends, before
// the process is reaped (kill(pid, 0) still succeeds on a zombie).
bool listening(int pid) {
  const std::vector<int> pids = list_endpoints();
  return std::binary_search(pids.begin(), pids.end(), pid);
}

}  // namespace

std::string endpoint_name(int pid) {
  return kPrefix + std::to_string(pid);
}

int listen_endpoint() {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -errno;
  sockaddr_un sun;
  const socklen_t len = make_sun(sun, endpoint_name(static_cast<int>(getpid())));
  if (bind(fd, reinterpret_cast<sockaddr*>(&sun), len) != 0 || listen(fd, 16) != 0) {
    const int e = errno;
    close(fd);
    return -e;
  }
  return fd;
}

bool holds_endpoint(int pid) {
  return listening(pid);
}

std::vector<int> list_endpoints() {
  std::vector<int> pids;
  std::ifstream in("/proc/net/unix");
  const std::string needle = std::string("@") + kPrefix;
  std::string line;
  while (std::getline(in, line)) {
    const auto at = line.find(needle);
    if (at == std::string::npos) continue;
    const std::string rest = line.substr(at + needle.size());
    if (rest.empty() || rest.find_first_not_of("0123456789") != std::string::npos ||
        rest.size() > 9) {
      continue;  // not one of ours
    }
    pids.push_back(std::stoi(rest));
  }
  std::sort(pids.begin(), pids.end());
  pids.erase(std::unique(pids.begin(), pids.end()), pids.end());
  return pids;
}

long process_uid(int pid) {
  struct stat st {};
  if (stat(("/proc/" + std::to_string(pid)).c_str(), &st) != 0) return -1;
  return static_cast<long>(st.st_uid);
}

Query query(int pid, int timeout_ms, std::string& out, std::string& error) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  out.clear();
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    error = std::strerror(errno);
    return Query::kError;
  }
  sockaddr_un sun;
  const socklen_t len = make_sun(sun, endpoint_name(pid));
  if (connect(fd, reinterpret_cast<sockaddr*>(&sun), len) != 0) {
    const int e = errno;
    close(fd);
    if (e == ECONNREFUSED || e == ENOENT) return Query::kGone;
    if (e == EAGAIN) return Query::kNoAnswer;  // its backlog is full: it is not answering
    error = std::strerror(e);
    return Query::kError;
  }
  ucred cred{};
  socklen_t cl = sizeof cred;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) == 0 && cred.pid != pid) {
    close(fd);
    error = "held by pid " + std::to_string(cred.pid);
    return Query::kBadPeer;
  }
  char buf[65536];
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      close(fd);
      return Query::kNoAnswer;
    }
    pollfd p{fd, POLLIN, 0};
    const int r = poll(&p, 1, static_cast<int>(left));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      close(fd);
      return r == 0 ? Query::kNoAnswer : Query::kError;
    }
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (n < 0) {
      const int e = errno;
      close(fd);
      if (e == ECONNRESET && !listening(pid)) return Query::kGone;
      error = std::strerror(e);
      return Query::kError;
    }
    if (n == 0) break;
    out.append(buf, static_cast<std::size_t>(n));
    if (out.size() > kMaxAnswer) {
      close(fd);
      error = "answer larger than 64 MiB";
      return Query::kError;
    }
  }
  close(fd);
  if (out.empty() && !listening(pid)) return Query::kGone;  // it ended before it answered
  return Query::kOk;
}

}  // namespace softrdma::monitor
