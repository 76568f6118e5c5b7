// One DDP segment, its header (RFC 5041) then its payload, framed as a marker-free FPDU
// (RFC 5044 §4) in a buffer of its own: what a test peer or a sample capture sends. The engine
// frames into its own buffers instead (iwarp/qp_tx.cpp).
#pragma once

#include <cstdint>
#include <vector>

#include "wire/bytes.h"
#include "wire/ddp_rdmap.h"

namespace softrdma::wire {

// With crc the FPDU carries its CRC32c, else zero there. A ULPDU over 65535 bytes gives an FPDU
// of zeros (build_fpdu refuses it).
std::vector<std::uint8_t> ddp_segment_fpdu(const DdpHeader& h, Bytes payload, bool crc);

}  // namespace softrdma::wire
