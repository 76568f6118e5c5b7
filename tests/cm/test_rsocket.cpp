// rsockets in one process: a listener, a client and the accepted socket talk over RC QPs
// connected through librdmacm (the process's CM agent talks to itself over the wire).
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <rdma/rsocket.h>
#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

namespace {

struct Conn {
  int listener = -1, client = -1, server = -1;
  Conn() {
    listener = rsocket(AF_INET, SOCK_STREAM, 0);
    std::mt19937 rng(std::random_device{}());
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    for (int i = 0; i < 50; ++i) {
      a.sin_port = htons(static_cast<std::uint16_t>(29000 + rng() % 3000));
      if (rbind(listener, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
          rlisten(listener, 4) == 0) {
        break;
      }
      rclose(listener);
      listener = rsocket(AF_INET, SOCK_STREAM, 0);
    }
    client = rsocket(AF_INET, SOCK_STREAM, 0);
    std::thread t([&] { server = raccept(listener, nullptr, nullptr); });
    EXPECT_EQ(rconnect(client, reinterpret_cast<sockaddr*>(&a), sizeof a), 0) << strerror(errno);
    t.join();
    EXPECT_GE(server, 0);
  }
  ~Conn() {
    if (client >= 0) rclose(client);
    if (server >= 0) rclose(server);
    if (listener >= 0) rclose(listener);
  }
};

// Sends all of `n` bytes (rsend may take part of them).
bool send_all(int fd, const std::uint8_t* p, std::size_t n) {
  while (n) {
    const ssize_t k = rsend(fd, p, n, 0);
    if (k <= 0) return false;
    p += k;
    n -= static_cast<std::size_t>(k);
  }
  return true;
}

}  // namespace

TEST(Rsocket, StreamCarriesEveryByteInOrder) {
  Conn c;
  ASSERT_GE(c.server, 0);
  std::vector<std::uint8_t> out(5 * 1024 * 1024 + 123), in(out.size());
  std::mt19937 rng(3);
  for (auto& b : out) b = static_cast<std::uint8_t>(rng());
  std::thread tx([&] { EXPECT_TRUE(send_all(c.client, out.data(), out.size())); });
  std::size_t got = 0;
  while (got < in.size()) {
    const ssize_t k = rrecv(c.server, in.data() + got, in.size() - got, 0);
    ASSERT_GT(k, 0);
    got += static_cast<std::size_t>(k);
  }
  tx.join();
  EXPECT_EQ(in, out);
}

TEST(Rsocket, NonBlockingPollAndEndOfStream) {
  Conn c;
  ASSERT_GE(c.server, 0);
  ASSERT_EQ(rfcntl(c.server, F_SETFL, O_NONBLOCK), 0);
  EXPECT_EQ(rfcntl(c.server, F_GETFL) & O_NONBLOCK, O_NONBLOCK);
  char buf[64];
  EXPECT_EQ(rrecv(c.server, buf, sizeof buf, 0), -1);
  EXPECT_EQ(errno, EAGAIN);
  pollfd p{c.server, POLLIN, 0};
  EXPECT_EQ(rpoll(&p, 1, 0), 0);
  ASSERT_EQ(rsend(c.client, "hello", 5, 0), 5);
  ASSERT_EQ(rpoll(&p, 1, 5000), 1);
  EXPECT_TRUE(p.revents & POLLIN);
  ASSERT_EQ(rrecv(c.server, buf, sizeof buf, 0), 5);
  EXPECT_EQ(std::memcmp(buf, "hello", 5), 0);
  pollfd w{c.client, POLLOUT, 0};
  EXPECT_EQ(rpoll(&w, 1, 0), 1);  // credits to spare
  ASSERT_EQ(rshutdown(c.client, SHUT_WR), 0);
  EXPECT_EQ(rsend(c.client, "x", 1, 0), -1);
  EXPECT_EQ(errno, EPIPE);
  ASSERT_EQ(rpoll(&p, 1, 5000), 1);
  EXPECT_EQ(rrecv(c.server, buf, sizeof buf, 0), 0);  // end of stream
}

TEST(Rsocket, RiowriteLandsInThePeersWindow) {
  Conn c;
  ASSERT_GE(c.server, 0);
  std::vector<std::uint8_t> window(256 * 1024, 0);
  ASSERT_EQ(riomap(c.server, window.data(), window.size(), PROT_WRITE, 0, 0), 0);
  // The window's announcement travels in band: a message after it tells the client it came.
  ASSERT_EQ(rsend(c.server, "go", 2, 0), 2);
  char go[2];
  ASSERT_EQ(rrecv(c.client, go, 2, 0), 2);
  std::vector<std::uint8_t> data(100000);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::uint8_t>(i * 7);
  std::size_t done = 0;
  while (done < data.size()) {
    const std::size_t k = riowrite(c.client, data.data() + done, data.size() - done,
                                   static_cast<off_t>(1000 + done), 0);
    ASSERT_GT(k, 0u) << strerror(errno);
    done += k;
  }
  ASSERT_EQ(rsend(c.client, "!", 1, 0), 1);  // writes are ordered before this send
  char bang;
  ASSERT_EQ(rrecv(c.server, &bang, 1, 0), 1);
  EXPECT_EQ(std::memcmp(window.data() + 1000, data.data(), data.size()), 0);
  EXPECT_EQ(window[999], 0);
  EXPECT_EQ(window[1000 + data.size()], 0);
  // Outside the window: refused, nothing written.
  EXPECT_EQ(riowrite(c.client, data.data(), 10, static_cast<off_t>(window.size() - 5), 0), 0u);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(riounmap(c.server, window.data(), window.size()), 0);
}

TEST(Rsocket, BadCalls) {
  char b;
  EXPECT_EQ(rrecv(12345, &b, 1, 0), -1);
  EXPECT_EQ(errno, EBADF);
  EXPECT_EQ(rsocket(AF_INET, SOCK_DGRAM, 0), -1);
  EXPECT_EQ(errno, EOPNOTSUPP);
  int s = rsocket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(s, 0);
  EXPECT_EQ(rsend(s, "x", 1, 0), -1);
  EXPECT_EQ(errno, ENOTCONN);
  sockaddr_in nobody{};
  nobody.sin_family = AF_INET;
  nobody.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  nobody.sin_port = htons(9);  // nobody listens there
  EXPECT_EQ(rconnect(s, reinterpret_cast<sockaddr*>(&nobody), sizeof nobody), -1);
  EXPECT_EQ(errno, ECONNREFUSED);
  EXPECT_EQ(rclose(s), 0);
  EXPECT_EQ(rclose(s), -1);
}

// As rdma-core's rsockets: a peer's close ends the stream and what is still sent to it fails
// (EPIPE) instead of going to a QP that is gone.
TEST(Rsocket, ThePeersCloseEndsTheStreamAndOurSends) {
  Conn c;
  ASSERT_GE(c.server, 0);
  ASSERT_EQ(rsend(c.client, "last", 4, 0), 4);
  ASSERT_EQ(rclose(c.client), 0);
  c.client = -1;
  char buf[16];
  pollfd p{c.server, POLLIN, 0};
  ASSERT_EQ(rpoll(&p, 1, 5000), 1);
  ASSERT_EQ(rrecv(c.server, buf, sizeof buf, 0), 4);  // what came before the close
  EXPECT_EQ(std::memcmp(buf, "last", 4), 0);
  EXPECT_EQ(rrecv(c.server, buf, sizeof buf, 0), 0);  // then the end
  EXPECT_EQ(rsend(c.server, "x", 1, 0), -1);
  EXPECT_EQ(errno, EPIPE);
  tcp_info info{};
  socklen_t len = sizeof info;
  ASSERT_EQ(rgetsockopt(c.server, IPPROTO_TCP, TCP_INFO, &info, &len), 0);
  EXPECT_EQ(len, sizeof info);
}
