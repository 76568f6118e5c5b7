// softrdma exporter [--listen ADDR:PORT]: serves the Prometheus text of every running device
// (tools/softrdma/prometheus.h) on /metrics with libmicrohttpd, collecting on each scrape, until
// SIGINT or SIGTERM. Exit status 2 on bad usage or when ADDR:PORT cannot be listened on.
#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <string>

#include "tools/softrdma/commands.h"
#include "tools/softrdma/prometheus.h"
#include "tools/softrdma/usage.h"
#include "tools/softrdma/watch_args.h"

namespace softrdma::tools {

namespace {

constexpr const char* kDefaultListen = "127.0.0.1:9797";

// "ADDR:PORT" or "[ADDR6]:PORT" into a socket address.
bool parse_listen(const std::string& s, sockaddr_storage& ss, socklen_t& len) {
  const auto colon = s.rfind(':');
  if (colon == std::string::npos) return false;
  std::string host = s.substr(0, colon);
  const std::string port_text = s.substr(colon + 1);
  unsigned port = 0;
  auto [p, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (ec != std::errc() || p != port_text.data() + port_text.size() || port > 65535) return false;
  ss = {};
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    auto& a6 = reinterpret_cast<sockaddr_in6&>(ss);
    a6.sin6_family = AF_INET6;
    a6.sin6_port = htons(static_cast<std::uint16_t>(port));
    len = sizeof a6;
    return inet_pton(AF_INET6, host.substr(1, host.size() - 2).c_str(), &a6.sin6_addr) == 1;
  }
  auto& a4 = reinterpret_cast<sockaddr_in&>(ss);
  a4.sin_family = AF_INET;
  a4.sin_port = htons(static_cast<std::uint16_t>(port));
  len = sizeof a4;
  return inet_pton(AF_INET, host.c_str(), &a4.sin_addr) == 1;
}

MHD_Result answer(void*, MHD_Connection* conn, const char* url, const char* method, const char*,
                  const char*, size_t*, void**) {
  std::string body;
  unsigned status = MHD_HTTP_OK;
  const char* type = "text/plain; version=0.0.4; charset=utf-8";
  if (std::strcmp(method, "GET") != 0 && std::strcmp(method, "HEAD") != 0) {
    status = MHD_HTTP_METHOD_NOT_ALLOWED;
    body = "only GET\n";
  } else if (!std::strcmp(url, "/metrics")) {
    body = render_metrics(monitor::collect(std::nullopt));
  } else if (!std::strcmp(url, "/")) {
    type = "text/html";
    body = "<html><body><a href=\"/metrics\">softrdma metrics</a></body></html>\n";
  } else {
    status = MHD_HTTP_NOT_FOUND;
    body = "not found: try /metrics\n";
  }
  MHD_Response* r =
      MHD_create_response_from_buffer(body.size(), body.data(), MHD_RESPMEM_MUST_COPY);
  MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
  const MHD_Result ok = MHD_queue_response(conn, status, r);
  MHD_destroy_response(r);
  return ok;
}

}  // namespace

int cmd_exporter(const WatchArgs& args) {
  const std::string listen_on = args.listen.empty() ? kDefaultListen : args.listen;
  sockaddr_storage ss{};
  socklen_t len = 0;
  if (!parse_listen(listen_on, ss, len)) {
    return usage_error("exporter", "bad --listen '" + listen_on + "' (expected ADDR:PORT)");
  }
  // Our own socket, so that a port in use is a clear error before the server starts.
  const int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int one = 1;
  if (fd >= 0) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&ss), len) != 0 || listen(fd, 64) != 0) {
    std::fprintf(stderr, "softrdma exporter: cannot listen on %s: %s\n", listen_on.c_str(),
                 std::strerror(errno));
    return 2;
  }
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);  // before the server's thread starts: main waits
  const unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG |
                         (ss.ss_family == AF_INET6 ? MHD_USE_IPv6 : 0);
  MHD_Daemon* d = MHD_start_daemon(flags, 0, nullptr, nullptr, &answer, nullptr,
                                   MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_END);
  if (!d) {
    std::fprintf(stderr, "softrdma exporter: the HTTP server did not start on %s\n",
                 listen_on.c_str());
    close(fd);
    return 2;
  }
  std::fprintf(stderr, "softrdma exporter: serving http://%s/metrics\n", listen_on.c_str());
  int sig = 0;
  sigwait(&stop, &sig);
  MHD_stop_daemon(d);
  return 0;
}

}  // namespace softrdma::tools
