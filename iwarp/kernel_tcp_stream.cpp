#include "iwarp/kernel_tcp_stream.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

namespace softrdma::iwarp {

namespace {

// The result of a send/recv system call as a StreamIo (EINTR retried by the caller).
StreamIo io_of(ssize_t n) {
  if (n >= 0) return {static_cast<std::size_t>(n), 0};
  return {0, errno == EWOULDBLOCK ? EAGAIN : errno};
}

class KernelTcpStream final : public ByteStream {
 public:
  explicit KernelTcpStream(int fd) : fd_(fd) {}

  StreamIo send(std::span<const iovec> batch) override {
    msghdr mh{};
    mh.msg_iov = const_cast<iovec*>(batch.data());
    mh.msg_iovlen = batch.size();
    ssize_t n;
    do {
      n = batch.size() == 1
              ? ::send(fd_, batch[0].iov_base, batch[0].iov_len, MSG_DONTWAIT | MSG_NOSIGNAL)
              : ::sendmsg(fd_, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    return io_of(n);
  }

  StreamIo recv(std::span<std::uint8_t> into) override {
    ssize_t n;
    do {
      n = ::recv(fd_, into.data(), into.size(), MSG_DONTWAIT);
    } while (n < 0 && errno == EINTR);
    return io_of(n);
  }

  int wait_fd() const override { return fd_; }

  void shutdown_send() override { ::shutdown(fd_, SHUT_WR); }

  void abort() override {
    const linger l{1, 0};
    setsockopt(fd_, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    close();
  }

  void close() override {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  bool endpoints(TcpEndpoint& local, TcpEndpoint& remote) const override {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    if (getsockname(fd_, reinterpret_cast<sockaddr*>(&ss), &len) != 0 || !endpoint_of(ss, local)) {
      return false;
    }
    len = sizeof ss;
    return getpeername(fd_, reinterpret_cast<sockaddr*>(&ss), &len) == 0 && endpoint_of(ss, remote);
  }

  std::uint32_t mss() const override {
    int mss = 0;
    socklen_t len = sizeof mss;
    if (getsockopt(fd_, IPPROTO_TCP, TCP_MAXSEG, &mss, &len) != 0 || mss < 536) return 1460;
    return static_cast<std::uint32_t>(mss);
  }

 private:
  int fd_;
};

}  // namespace

int open_kernel_tcp_stream(int fd, std::unique_ptr<ByteStream>& out) {
  int type = 0;
  socklen_t len = sizeof type;
  if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM) return EBADF;
  const int fl = fcntl(fd, F_GETFL);
  if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0) return errno;
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  out = std::make_unique<KernelTcpStream>(fd);
  return 0;
}

}  // namespace softrdma::iwarp
