// The errors the iWARP receive path detects, and for each (a table) the TERMINATE it sends
// (RFC 5040 §7.4, RFC 5041 §7, RFC 5044 §8) and the completion status the peer's failed
// work gets.
#pragma once

#include <cstdint>

#include "core/types.h"
#include "iwarp/params.h"

namespace softrdma::iwarp {

enum class RxError : std::uint8_t {
  kCrc,               // MPA: FPDU CRC mismatch
  kMarker,            // MPA: bad marker
  kFraming,           // MPA: ULPDU too short for a DDP header
  kDdpVersion,        // DDP: DV != 1
  kRdmapVersion,      // RDMAP: RV != 1
  kBadOpcode,         // RDMAP: unknown or unexpected opcode (immediate, atomics, ...)
  kBadQn,             // DDP untagged: invalid queue number
  kNoBuffer,          // DDP untagged: no receive posted (queue 0) / IRD exceeded (queue 1)
  kMsnRange,          // DDP untagged: MSN out of range
  kBadMo,             // DDP untagged: MO out of order
  kTooLong,           // DDP untagged: message longer than the receive buffer
  kInvalidStag,       // DDP tagged: no such STag, or invalidated
  kStagNotAssoc,      // DDP tagged: STag of another PD
  kBaseBounds,        // DDP tagged: outside the region
  kAccessRights,      // RDMAP: the region lacks the access the operation needs
  kCannotInvalidate,  // RDMAP: SEND with Invalidate names an STag we cannot invalidate
  kReadSrcInvalid,    // RDMAP: Read Request's source STag invalid
  kReadSrcBounds,     // RDMAP: Read Request's source range outside the region
  kReadSrcAccess,     // RDMAP: Read Request's source region lacks REMOTE_READ
  kUnexpectedResp,    // RDMAP: Read Response with no Read outstanding
  kLocal,             // RDMAP: local catastrophic error
  kNoMatchingRtr,     // MPA: the first FPDU is not the negotiated RTR (RFC 6581)
};

TermInfo term_info(RxError e);
const char* to_string(RxError e);
// The status of the peer's work request that a received TERMINATE fails.
core::WcStatus status_for_term(const TermInfo& t);

}  // namespace softrdma::iwarp
