// One end of a TCP connection (IPv4 address and port, host order): what a byte stream reports
// of itself and what a stream trace writes in its synthesized headers.
#pragma once

#include <sys/socket.h>

#include <cstdint>

namespace softrdma::iwarp {

struct TcpEndpoint {
  std::uint32_t addr = 0;  // IPv4, host order
  std::uint16_t port = 0;
};

// The endpoint of an AF_INET (or IPv4-mapped AF_INET6) socket address; false for any other.
bool endpoint_of(const sockaddr_storage& ss, TcpEndpoint& out);

}  // namespace softrdma::iwarp
