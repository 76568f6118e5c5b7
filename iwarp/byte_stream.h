// The reliable, ordered byte stream (the LLP of RFC 5044: TCP) that MPA, DDP and RDMAP run on,
// as the QP, the MPA exchange and the device's progress loop see it; nothing in iwarp/ above
// it touches a socket. Contract:
//  - Threading: not thread-safe; one user at a time (the QP's lock, or the device's progress
//    lock before a QP owns it). Calls never block.
//  - send() takes a prefix of the iovec batch, in order, possibly ending inside an iovec, and
//    reports how many bytes it accepted; the caller keeps the rest and sends it first next
//    time. The bytes are copied (or pinned by the stream) before send returns: the caller's
//    buffers may change afterwards. Nothing accepted with EAGAIN: wait until writable.
//  - recv() fills a prefix of the buffer. No bytes and no error: the peer closed its side
//    (EOF); EAGAIN: nothing now, wait until readable; any other error: the connection failed.
//  - Readiness: wait_fd() is what the progress loop sleeps on (epoll): readable (EPOLLIN),
//    the peer closed (EPOLLRDHUP), writable (EPOLLOUT), failed (EPOLLERR/EPOLLHUP). A stream
//    with no file of its own (a userspace TCP) hands out one it signals (an eventfd) whenever
//    any of these may have changed; spurious wakeups are harmless, send/recv then say EAGAIN.
//  - Ownership: a stream is a handle and its destructor leaves the connection open, so a
//    connection can go back to the one who handed it in (the CM, on a reject or a failed
//    negotiation). close() ends it; abort() ends it with a reset (RST, queued bytes dropped).
//    After either, wait_fd() is -1 and the stream is not used again.
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <span>

#include "iwarp/tcp_endpoint.h"

namespace softrdma::iwarp {

// The outcome of one send or recv: `bytes` moved, or none with `error` (an errno value).
struct StreamIo {
  std::size_t bytes = 0;
  int error = 0;
};

class ByteStream {
 public:
  virtual ~ByteStream() = default;

  virtual StreamIo send(std::span<const iovec> batch) = 0;
  virtual StreamIo recv(std::span<std::uint8_t> into) = 0;
  virtual int wait_fd() const = 0;
  // Our FIN once the bytes already accepted have gone; receiving goes on.
  virtual void shutdown_send() = 0;
  virtual void abort() = 0;
  virtual void close() = 0;
  // Both ends; false when not IPv4 (a v4-mapped IPv6 connection counts as IPv4) or unknown.
  virtual bool endpoints(TcpEndpoint& local, TcpEndpoint& remote) const = 0;
  // The maximum segment size the stream sends (1460 when it cannot tell).
  virtual std::uint32_t mss() const = 0;
  // True for a stream whose wait_fd() is an eventfd it signals (a userspace TCP): the progress
  // loop waits for EPOLLIN alone (an eventfd is always writable) and, woken, tries both ways.
  virtual bool readiness_signalled() const { return false; }
  // True when the segments under the stream are traced as they are (a userspace TCP writes its
  // frames): the QP then synthesizes no stream trace of its own.
  virtual bool traced_below() const { return false; }

  // send() of one buffer.
  StreamIo send_buffer(const void* data, std::size_t len) {
    const iovec one{const_cast<void*>(data), len};
    return send(std::span<const iovec>(&one, 1));
  }
};

}  // namespace softrdma::iwarp
