#include "wire/ddp_segment.h"

#include <algorithm>

#include "wire/fpdu.h"

namespace softrdma::wire {

std::vector<std::uint8_t> ddp_segment_fpdu(const DdpHeader& h, Bytes payload, bool crc) {
  std::vector<std::uint8_t> ulpdu(h.header_len() + payload.size());
  (void)build_ddp_header(ulpdu, h);
  std::copy(payload.begin(), payload.end(),
            ulpdu.begin() + static_cast<std::ptrdiff_t>(h.header_len()));
  std::vector<std::uint8_t> out(fpdu_total_len(ulpdu.size()));
  (void)build_fpdu(out, ulpdu, crc);
  return out;
}

}  // namespace softrdma::wire
