#include "wire/crc.h"

#include <isa-l/crc.h>

namespace softrdma::wire {

std::uint32_t crc32_ieee_refl(std::uint32_t crc, Bytes data) {
  return crc32_gzip_refl(crc, data.data(), data.size());
}

std::uint32_t crc32c(std::uint32_t crc, Bytes data) {
  // ISA-L's crc32_iscsi takes and returns the raw (non-inverted) register.
  return ~crc32_iscsi(const_cast<unsigned char*>(data.data()), static_cast<int>(data.size()), ~crc);
}

}  // namespace softrdma::wire
