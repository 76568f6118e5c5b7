// A userspace TCP under softiwarp0 (lwtcp/: lwIP over a raw backend's frames), as the device and
// the CM see it. Its sockets are named by handles that are file descriptors of its own
// (eventfds): readable whenever something may have changed (a connection to accept, a connect
// done or failed, bytes, room to send), so the CM agent and the device's progress loop can
// sleep on them in epoll. Every call is thread-safe (one lock over the stack); the stack's own
// callbacks run inside poll() or inside these calls, and only signal handles.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "iwarp/byte_stream.h"

namespace softrdma::iwarp {

class UserTcp {
 public:
  virtual ~UserTcp() = default;

  // ---- the device's progress loop
  // Readable when frames wait for poll().
  virtual int wait_fd() const = 0;
  // Milliseconds until poll() is due for the stack's timers (retransmission, delayed ACK).
  virtual int next_timeout_ms() = 0;
  // Takes the frames that wait and runs the timers that are due.
  virtual void poll() = 0;
  // The connection behind `handle` as a byte stream (nullptr when `handle` is not one of ours).
  // Its wait_fd() is the handle; the EPOLLOUT of an eventfd means nothing, so the device waits
  // for EPOLLIN alone and tries both ways when woken (ByteStream::readiness_signalled()).
  virtual std::unique_ptr<ByteStream> stream(int handle) = 0;

  // ---- sockets for the CM, of the stack's one address (IPv4 or IPv6). Addresses come as AF_INET
  // or AF_INET6 (an IPv4 stack takes an IPv4-mapped one as IPv4; either family's wildcard is
  // the wildcard); errno values as the kernel's calls give them.
  // A new unbound socket's handle, or -errno.
  virtual int socket() = 0;
  // 0, EADDRNOTAVAIL (not our address), EAFNOSUPPORT (the other family), EADDRINUSE, EINVAL.
  virtual int bind(int handle, const sockaddr* addr) = 0;
  virtual int listen(int handle, int backlog) = 0;
  // 0 once started (the handle becomes readable when error() tells the outcome).
  virtual int connect(int handle, const sockaddr* dst) = 0;
  // The next accepted connection's handle, or -EAGAIN.
  virtual int accept(int handle) = 0;
  // A connect's outcome: 0 connected, EINPROGRESS still going, or ECONNREFUSED, ETIMEDOUT, ….
  virtual int error(int handle) = 0;
  // Local and peer address (sockaddr_in or sockaddr_in6, the stack's family); false for an
  // unknown handle.
  virtual bool names(int handle, sockaddr_storage& local, sockaddr_storage& peer) = 0;
  // Ends the connection or listener (FIN, or RST when bytes were not read) and the handle.
  virtual void close(int handle) = 0;
  // The stack's address (port 0).
  virtual sockaddr_storage address() const = 0;
  // Whether `addr` is the stack's address or the wildcard, in either family's form.
  virtual bool owns(const sockaddr* addr) const = 0;
  // Named counters of its frames and of the bad input it met, for the device's hw_counters.
  virtual std::vector<std::pair<std::string, std::uint64_t>> counters() = 0;
};

}  // namespace softrdma::iwarp
