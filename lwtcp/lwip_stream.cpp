// The byte stream over one lwIP TCP connection: send copies into lwIP's send buffer as far as
// tcp_sndbuf allows (its flow control), recv copies out of the received pbufs and opens the
// window (open_window, receive_window.h); readiness is the connection's eventfd, signalled by
// lwIP's callbacks.
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "lwip/pbuf.h"
#include "lwip/tcp.h"
#include "lwtcp/lwip_internal.h"
#include "lwtcp/receive_window.h"

namespace softrdma::lwtcp {
namespace {

class LwipStream final : public iwarp::ByteStream {
 public:
  LwipStream(Stack& stack, int handle) : stack_(stack), fd_(handle) {}

  iwarp::StreamIo send(std::span<const iovec> batch) override {
    std::lock_guard lock(stack_.mu);
    Conn* c = stack_.find(fd_);
    if (!c) return {0, EBADF};
    if (c->error) return {0, c->error};
    if (!c->pcb) return {0, EPIPE};
    std::size_t sent = 0;
    bool whole = true;
    for (std::size_t i = 0; i < batch.size(); ++i) {
      const iovec& v = batch[i];
      std::size_t off = 0;
      while (off < v.iov_len) {
        const std::size_t room = std::min<std::size_t>(tcp_sndbuf(c->pcb), 0xFFFF);
        if (room == 0 || tcp_sndqueuelen(c->pcb) >= TCP_SND_QUEUELEN) break;
        const auto n = static_cast<u16_t>(std::min(room, v.iov_len - off));
        // PSH on the batch's last segment only, as the kernel pushes a sendmsg's end.
        const bool last = i + 1 == batch.size() && off + n == v.iov_len;
        const err_t e = tcp_write(c->pcb, static_cast<const std::uint8_t*>(v.iov_base) + off, n,
                                  TCP_WRITE_FLAG_COPY | (last ? 0 : TCP_WRITE_FLAG_MORE));
        if (e != ERR_OK) break;  // ERR_MEM: the queue is full
        off += n;
        sent += n;
      }
      if (off < v.iov_len) {
        whole = false;
        break;
      }
    }
    // A short write blocks the writer as an EAGAIN does: it waits for the room that tcp_sent
    // signals (an ib_write_lat of 64 KiB, which spins on memory, waited forever when only
    // EAGAIN armed it).
    c->send_blocked = !whole;
    if (sent == 0) return {0, EAGAIN};
    stack_.begin_batch();
    tcp_output(c->pcb);
    stack_.end_batch();
    return {sent, 0};
  }

  iwarp::StreamIo recv(std::span<std::uint8_t> into) override {
    std::lock_guard lock(stack_.mu);
    Conn* c = stack_.find(fd_);
    if (!c) return {0, EBADF};
    if (!c->rx.empty()) {
      std::size_t got = 0;
      while (got < into.size() && !c->rx.empty()) {
        pbuf*& front = c->rx.front();
        const auto n = static_cast<u16_t>(std::min<std::size_t>(into.size() - got, front->tot_len));
        pbuf_copy_partial(front, into.data() + got, n, 0);
        front = pbuf_free_header(front, n);
        if (!front) c->rx.pop_front();
        got += n;
      }
      if (c->pcb) open_window(c->pcb, static_cast<std::uint32_t>(got));
      return {got, 0};
    }
    if (c->peer_fin) return {0, 0};
    if (c->error) return {0, c->error};
    // Nothing to read: quiet the handle, unless the peer opened room meanwhile (the wakeup
    // is shared with the writer).
    Stack::quiet(*c);
    if (c->send_blocked && c->pcb && tcp_sndbuf(c->pcb) > 0) Stack::signal(*c);
    return {0, EAGAIN};
  }

  int wait_fd() const override { return fd_; }
  bool readiness_signalled() const override { return true; }
  bool traced_below() const override { return true; }

  void shutdown_send() override {
    std::lock_guard lock(stack_.mu);
    if (Conn* c = stack_.find(fd_); c && c->pcb) tcp_shutdown(c->pcb, 0, 1);
  }
  void abort() override { end(true); }
  void close() override { end(false); }

  bool endpoints(iwarp::TcpEndpoint& local, iwarp::TcpEndpoint& remote) const override {
    std::lock_guard lock(stack_.mu);
    const Conn* c = stack_.find(fd_);
    // IPv4 only: a stream trace's synthesized headers and the QP's snapshot are IPv4 (as
    // kernel TCP's streams report them).
    return c && iwarp::endpoint_of(c->local, local) && iwarp::endpoint_of(c->remote, remote);
  }

  std::uint32_t mss() const override {
    std::lock_guard lock(stack_.mu);
    const Conn* c = stack_.find(fd_);
    return c && c->pcb ? tcp_mss(c->pcb) : 1460;
  }

 private:
  void end(bool reset) {
    std::lock_guard lock(stack_.mu);
    stack_.end(fd_, reset);
    fd_ = -1;
  }

  Stack& stack_;
  int fd_;
};

}  // namespace

std::unique_ptr<iwarp::ByteStream> make_stream(Stack& stack, int handle) {
  return std::make_unique<LwipStream>(stack, handle);
}

}  // namespace softrdma::lwtcp
