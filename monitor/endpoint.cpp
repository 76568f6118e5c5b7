#include "monitor/endpoint.h"

#include <dirent.h>
#include <poll.h>
#include <signal.h>
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

constexpr const char* kDirPrefix = "/tmp/.softrdma-mon-";
constexpr std::size_t kMaxAnswer = 64u << 20;  // a report larger than this is not one

socklen_t make_sun(sockaddr_un& sun, const std::string& path) {
  std::memset(&sun, 0, sizeof sun);
  sun.sun_family = AF_UNIX;
  std::memcpy(sun.sun_path, path.data(), std::min(path.size(), sizeof sun.sun_path - 1));
  return static_cast<socklen_t>(sizeof sun);
}

bool is_decimal(const std::string& s) {
  return !s.empty() && s.size() <= 9 && s.find_first_not_of("0123456789") == std::string::npos;
}

// A decimal pid, or 0.
int pid_of(const std::string& s) {
  return is_decimal(s) ? std::stoi(s) : 0;
}

// Whether the unix socket `path` is bound in `pid`'s network namespace by someone alive: the
// kernel drops the line when the last descriptor closes, at the latest as the process ends.
bool bound_in_netns_of(int pid, const std::string& path) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/net/unix");
  std::string line;
  while (std::getline(in, line)) {
    if (line.size() > path.size() &&
        line.compare(line.size() - path.size(), path.size(), path) == 0 &&
        line[line.size() - path.size() - 1] == ' ') {
      return true;
    }
  }
  return false;
}

// The directory exists (made now if not), is a directory (not a link) owned by us, and no one
// else may enter it: else an errno value.
int own_dir(const std::string& dir) {
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return errno;
  struct stat st {};
  if (lstat(dir.c_str(), &st) != 0) return errno;
  if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077) != 0) return EPERM;
  return 0;
}

}  // namespace

std::string endpoint_dir(long uid) {
  return kDirPrefix + std::to_string(uid);
}

std::string endpoint_path(long uid, int pid) {
  return endpoint_dir(uid) + "/" + std::to_string(pid);
}

int listen_endpoint() {
  const std::string dir = endpoint_dir(static_cast<long>(geteuid()));
  if (const int e = own_dir(dir)) return -e;
  const int me = static_cast<int>(getpid());
  const std::string path = endpoint_path(static_cast<long>(geteuid()), me);
  // A file left by an earlier process with our pid (killed: nothing removed it) is stale.
  if (!bound_in_netns_of(me, path)) unlink(path.c_str());
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -errno;
  sockaddr_un sun;
  const socklen_t len = make_sun(sun, path);
  if (bind(fd, reinterpret_cast<sockaddr*>(&sun), len) != 0 || chmod(path.c_str(), 0600) != 0 ||
      listen(fd, 16) != 0) {
    const int e = errno;
    close(fd);
    return -e;
  }
  return fd;
}

bool holds_endpoint(int pid) {
  const long uid = process_uid(pid);
  return uid >= 0 && bound_in_netns_of(pid, endpoint_path(uid, pid));
}

std::vector<int> list_endpoints() {
  std::vector<std::string> dirs;
  if (geteuid() == 0) {  // every user's directory
    if (DIR* tmp = opendir("/tmp")) {
      const std::string prefix = std::string(kDirPrefix).substr(5);  // ".softrdma-mon-"
      while (const dirent* e = readdir(tmp)) {
        const std::string n = e->d_name;
        if (n.rfind(prefix, 0) == 0 && is_decimal(n.substr(prefix.size()))) {
          dirs.push_back("/tmp/" + n);
        }
      }
      closedir(tmp);
    }
  } else {
    dirs.push_back(endpoint_dir(static_cast<long>(geteuid())));
  }
  std::vector<int> pids;
  for (const std::string& dir : dirs) {
    DIR* d = opendir(dir.c_str());
    if (!d) continue;
    while (const dirent* e = readdir(d)) {
      const int pid = pid_of(e->d_name);
      if (!pid) continue;
      const std::string path = dir + "/" + e->d_name;
      if (bound_in_netns_of(pid, path)) {
        pids.push_back(pid);
      } else if (kill(pid, 0) != 0 && errno == ESRCH) {
        unlink(path.c_str());  // its process was killed: the entry goes with it
      }
    }
    closedir(d);
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
  const long uid = process_uid(pid);
  if (uid < 0) return Query::kGone;
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    error = std::strerror(errno);
    return Query::kError;
  }
  sockaddr_un sun;
  const socklen_t len = make_sun(sun, endpoint_path(uid, pid));
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
      if (e == ECONNRESET && !holds_endpoint(pid)) return Query::kGone;
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
  if (out.empty() && !holds_endpoint(pid)) return Query::kGone;  // it ended before it answered
  return Query::kOk;
}

}  // namespace softrdma::monitor
