// CRCs through ISA-L: CRC-32 (reflected IEEE, as zlib) for the RoCE ICRC and
// CRC32c (Castagnoli) for the MPA FPDU CRC. Values are the final CRCs.
#pragma once

#include <cstdint>

#include "wire/bytes.h"

namespace softrdma::wire {

// zlib-compatible crc32: crc32_ieee_refl(0, "123456789") == 0xCBF43926.
// Chain calls by passing the previous result as `crc`.
std::uint32_t crc32_ieee_refl(std::uint32_t crc, Bytes data);

// CRC32c: crc32c(0, "123456789") == 0xE3069283. Chainable the same way.
std::uint32_t crc32c(std::uint32_t crc, Bytes data);

}  // namespace softrdma::wire
