// The MPA settings a user gives softrdma (SOFTRDMA_MPA / `softrdma run --mpa`):
// "rev=1|2,crc,markers,rtr=read|write|send|none,ird=N,ord=N" (any subset, any order;
// "crc=0"/"markers=0" turn them off). Parsed into iwarp::MpaParams.
#pragma once

#include <string>

#include "iwarp/params.h"

namespace softrdma::iwarp {

// False and a message naming the bad item on a malformed spec.
bool parse_mpa_spec(const std::string& spec, MpaParams& out, std::string& error);

}  // namespace softrdma::iwarp
