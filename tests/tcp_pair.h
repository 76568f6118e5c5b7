// TcpPair: a connected pair of TCP sockets over 127.0.0.1, through a listening socket of its own
// that it closes again; client and server stay -1 when it cannot be had. The sockets are the
// caller's to hand on or close.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace softrdma::test {

struct TcpPair {
  int client = -1, server = -1;
  TcpPair() {
    const int l = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (::bind(l, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(l, 4) != 0 ||
        ::getsockname(l, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      ::close(l);
      return;
    }
    client = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (::connect(client, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      ::close(client);
      client = -1;
    } else {
      server = ::accept4(l, nullptr, nullptr, SOCK_CLOEXEC);
    }
    ::close(l);
  }
};

}  // namespace softrdma::test
