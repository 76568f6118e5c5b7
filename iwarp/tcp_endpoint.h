// One end of a TCP connection (IPv4 address and port, host order): what a byte stream reports
// of itself and what a stream trace writes in its synthesized headers.
#pragma once

#include <cstdint>

namespace softrdma::iwarp {

struct TcpEndpoint {
  std::uint32_t addr = 0;  // IPv4, host order
  std::uint16_t port = 0;
};

}  // namespace softrdma::iwarp
