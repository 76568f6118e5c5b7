// Fuzz target: the segment size of a UDP GSO frame that arrived whole (netdev/gso_frame.h). The
// first input byte picks the MTU, the rest is the frame. A size found must be one the cutting
// can use: a multiple of 4, at least BTH + ICRC, and leaving a datagram after it.
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "netdev/gso_frame.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1 || size > 70000) return 0;
  const std::uint32_t mtu = 256 + 40u * data[0];
  const auto len = static_cast<std::uint32_t>(size - 1);
  const std::uint32_t s = softrdma::netdev::uncut_segment_size(data + 1, len, mtu);
  if (s != 0 && (s % 4 != 0 || s < 16 || s + 16 > len)) {
    std::fprintf(stderr, "fuzz_gso_frame: segment size %u of a %u-byte frame\n", s, len);
    std::abort();
  }
  return 0;
}
