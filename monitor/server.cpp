#include "monitor/server.h"

#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "monitor/endpoint.h"

namespace softrdma::monitor {
namespace {

struct State {
  std::mutex mu;
  int fd = -1;
  bool running = false;
  Answer answer;
  std::string path;  // the endpoint's file, removed at exit by the process that bound it
  pid_t owner = 0;
};

State& state() {
  static State* s = new State();  // never destroyed: the thread may outlive static destructors
  return *s;
}

// A forked child has no server thread: its copy of the listening socket would keep the parent's
// name held by a process that never answers. The child's engine starts a server of its own.
void after_fork_child() {
  State& s = state();
  if (s.fd >= 0) close(s.fd);
  s.fd = -1;
  s.running = false;  // (fork happens outside start_server: the engine's lock is held)
}

// A normal exit removes the file (a killed process's is removed by the next listing); a forked
// child that exits leaves its parent's alone.
void remove_endpoint() {
  State& s = state();
  if (s.owner == getpid() && !s.path.empty()) unlink(s.path.c_str());
}

void send_all(int fd, const std::string& text) {
  std::size_t off = 0;
  while (off < text.size()) {
    const ssize_t n = send(fd, text.data() + off, text.size() - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the asker went away, or stopped reading (SO_SNDTIMEO)
    off += static_cast<std::size_t>(n);
  }
}

void serve(int listen_fd, Answer answer) {
  pthread_setname_np(pthread_self(), "softrdma-mon");
  for (;;) {
    const int fd = accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      return;  // closed (after fork) or broken
    }
    timeval tv{2, 0};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    ucred cred{};
    socklen_t len = sizeof cred;
    const bool allowed = getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 &&
                         (cred.uid == 0 || cred.uid == geteuid());
    send_all(fd, allowed ? answer() : nlohmann::json{{"error", "permission denied"}}.dump());
    close(fd);
  }
}

}  // namespace

bool start_server(Answer answer, std::string& error) {
  static std::once_flag once;
  std::call_once(once, [] { pthread_atfork(nullptr, nullptr, after_fork_child); });
  State& s = state();
  std::lock_guard lock(s.mu);
  if (s.running) return true;
  const int fd = listen_endpoint();
  if (fd < 0) {
    error = "monitoring endpoint " +
            endpoint_path(static_cast<long>(geteuid()), static_cast<int>(getpid())) + ": " +
            std::strerror(-fd);
    return false;
  }
  s.fd = fd;
  s.running = true;
  s.path = endpoint_path(static_cast<long>(geteuid()), static_cast<int>(getpid()));
  s.owner = getpid();
  static std::once_flag at_exit;
  std::call_once(at_exit, [] { std::atexit(remove_endpoint); });
  std::thread(serve, fd, std::move(answer)).detach();
  return true;
}

}  // namespace softrdma::monitor
