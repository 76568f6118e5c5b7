// Fuzz target: frame decoding, the RoCEv2 packet parser and the ICRC.
#include <cstddef>
#include <cstdint>

#include "wire/roce_frame.h"
#include "wire/roce_headers.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace softrdma::wire;
  const Bytes in(data, size);
  (void)parse_roce(in);
  for (int linktype : {1, 101, 113, 276}) {
    auto f = parse_frame(in, linktype);
    if (f && f->udp) {
      (void)parse_roce(f->payload);
      (void)expected_icrc(*f);
    }
  }
  return 0;
}
