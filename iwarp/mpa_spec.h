// The MPA settings a user gives softrdma (SOFTRDMA_MPA / `softrdma run --mpa`):
// "rev=1|2,crc,markers,rtr=read|write|send|none" (any subset, any order;
// "crc=0"/"markers=0" turn them off). Parsed into iwarp::MpaParams. Two device settings ride
// along: "fpdu=N" (largest FPDU in bytes; default the TCP MSS) and "corrupt_fpdu=N" (fault
// injection: flip a byte of the Nth FPDU each QP sends, after its CRC is computed).
#pragma once

#include <string>

#include "iwarp/params.h"
#include "iwarp/qp.h"

namespace softrdma::iwarp {

// False and a message naming the bad item on a malformed spec.
bool parse_mpa_spec(const std::string& spec, MpaParams& out, std::string& error,
                    TxOptions* tx = nullptr);

}  // namespace softrdma::iwarp
