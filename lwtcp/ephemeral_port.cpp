#include "lwtcp/ephemeral_port.h"

#include <cerrno>

namespace softrdma::lwtcp {

std::uint16_t bind_dynamic_port(std::uint32_t draw,
                                const std::function<int(std::uint16_t port)>& bind, int& err) {
  err = EADDRINUSE;
  for (std::uint32_t i = 0; i < kDynamicPorts; ++i) {
    const auto port = static_cast<std::uint16_t>(kFirstDynamicPort + (draw + i) % kDynamicPorts);
    const int e = bind(port);
    if (e == 0) {
      err = 0;
      return port;
    }
    if (e != EADDRINUSE) {
      err = e;
      return 0;
    }
  }
  return 0;
}

}  // namespace softrdma::lwtcp
