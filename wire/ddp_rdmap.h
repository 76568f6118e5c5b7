// DDP/RDMAP headers (RFC 5041/5040), opcode table, Read Request and Terminate codecs:
// parsers never read past their span; builders write caller buffers, never allocate.
#pragma once

#include <cstdint>

#include "wire/bytes.h"

namespace softrdma::wire {

inline constexpr std::size_t kDdpTaggedLen = 14;    // ctrl, rdmap ctrl, STag, TO
inline constexpr std::size_t kDdpUntaggedLen = 18;  // ctrl, rdmap ctrl, Inv STag, QN, MSN, MO
inline constexpr std::size_t kReadRequestLen = 28;
inline constexpr std::size_t kTerminateControlLen = 4;
inline constexpr std::uint8_t kDdpFlagTagged = 0x80;
inline constexpr std::uint8_t kDdpFlagLast = 0x40;
inline constexpr std::uint8_t kDdpReservedMask = 0x3C;
inline constexpr std::uint8_t kDdpVersion = 1;
inline constexpr std::uint8_t kRdmapVersion = 1;
inline constexpr std::uint8_t kRdmapReservedMask = 0x30;

enum class RdmapOpcode : std::uint8_t {
  kWrite = 0,
  kReadRequest = 1,
  kReadResponse = 2,
  kSend = 3,
  kSendInvalidate = 4,
  kSendSe = 5,
  kSendSeInvalidate = 6,
  kTerminate = 7,
};

// Untagged queue numbers (RFC 5040 §5.1).
inline constexpr std::uint32_t kQnSend = 0;
inline constexpr std::uint32_t kQnReadRequest = 1;
inline constexpr std::uint32_t kQnTerminate = 2;

struct OpcodeInfo {
  const char* name;  // "unknown" for 8..15
  bool known;
  bool tagged;          // carried in a tagged DDP segment
  std::uint32_t queue;  // untagged queue number (meaningless when tagged)
  bool payload;         // may carry ULP payload after the header
  bool uses_inv_stag;   // the untagged Inv STag field is meaningful (else reserved, zero)
};
// The table entry for a 4-bit opcode (values above 15 are masked).
const OpcodeInfo& opcode_info(std::uint8_t opcode);

// One DDP segment header including the RDMAP control byte.
struct DdpHeader {
  bool tagged = false;
  bool last = true;
  std::uint8_t ddp_reserved = 0;  // the 4 reserved bits of the DDP control byte
  std::uint8_t ddp_version = kDdpVersion;
  std::uint8_t rdmap_version = kRdmapVersion;
  std::uint8_t rdmap_reserved = 0;  // 2 bits
  std::uint8_t opcode = 0;          // 4 bits; see RdmapOpcode
  std::uint32_t stag = 0;           // tagged
  std::uint64_t to = 0;             // tagged
  std::uint32_t inv_stag = 0;       // untagged (reserved unless the opcode uses it)
  std::uint32_t qn = 0;             // untagged
  std::uint32_t msn = 0;            // untagged
  std::uint32_t mo = 0;             // untagged
  std::size_t header_len() const { return tagged ? kDdpTaggedLen : kDdpUntaggedLen; }
};

// What check_ddp_header (a receiver rejects these) or check_ddp_reserved (RFC 5040/5041:
// sent as zero, ignored on receive; reported by lint) found wrong first, in the order listed.
enum class DdpIssue : std::uint8_t {
  kNone = 0,
  kBadDdpVersion,    // DV != 1
  kBadRdmapVersion,  // RV != 1
  kDdpReserved,      // DDP control reserved bits
  kRdmapReserved,    // RDMAP control reserved bits, or Inv STag set where reserved
  kUnknownOpcode,    // opcode 8..15
  kTaggedMismatch,   // T bit disagrees with the opcode
  kQueueNumber,      // untagged QN disagrees with the opcode
};
std::string_view to_string(DdpIssue i);
// The Error a DdpIssue maps to (kBadVersion, kReservedBits, kUnknownOpcode, kBadValue).
Error to_error(DdpIssue i);

// Decodes the header (length from the T bit) without judging its fields: kTruncated only.
Expected<DdpHeader> decode_ddp_header(Bytes in);
// Versions, opcode, T bit and queue number; reserved fields are not judged.
DdpIssue check_ddp_header(const DdpHeader& h);
// The reserved fields only: kDdpReserved, kRdmapReserved (Inv STag too, where reserved).
DdpIssue check_ddp_reserved(const DdpHeader& h);
// decode_ddp_header + check_ddp_header; the first issue becomes the Error.
Expected<DdpHeader> parse_ddp_header(Bytes in);
// Writes 14 or 18 bytes as h.tagged says (fields are masked to their widths).
Expected<std::size_t> build_ddp_header(MutBytes out, const DdpHeader& h);

// RDMA Read Request message body (RFC 5040 §4.4).
struct ReadRequest {
  std::uint32_t sink_stag = 0;
  std::uint64_t sink_to = 0;
  std::uint32_t size = 0;  // RDMA Read Message Size
  std::uint32_t src_stag = 0;
  std::uint64_t src_to = 0;
};
Expected<ReadRequest> parse_read_request(Bytes in);  // kTruncated when < 28 bytes
Expected<std::size_t> build_read_request(MutBytes out, const ReadRequest& r);

// Terminate error reporting (RFC 5040 §7.4, RFC 5041 §7, RFC 5044 §8, RFC 6581).
enum class TermLayer : std::uint8_t { kRdmap = 0, kDdp = 1, kLlp = 2 };
enum class RdmapErrorType : std::uint8_t {
  kLocalCatastrophic = 0,
  kRemoteProtection = 1,
  kRemoteOperation = 2,
};
enum class RdmapErrorCode : std::uint8_t {
  kInvalidStag = 0x00,
  kBaseBounds = 0x01,
  kAccessRights = 0x02,
  kStagNotAssociated = 0x03,
  kToWrap = 0x04,
  kInvalidVersion = 0x05,
  kUnexpectedOpcode = 0x06,
  kCatastrophicStream = 0x07,
  kCatastrophicGlobal = 0x08,
  kStagCannotInvalidate = 0x09,
  kUnspecified = 0xFF,
};
enum class DdpErrorType : std::uint8_t {
  kCatastrophic = 0,
  kTaggedBuffer = 1,
  kUntaggedBuffer = 2
};
enum class DdpTaggedErrorCode : std::uint8_t {
  kInvalidStag = 0x00,
  kBaseBounds = 0x01,
  kStagNotAssociated = 0x02,
  kToWrap = 0x03,
  kInvalidVersion = 0x04,
};
enum class DdpUntaggedErrorCode : std::uint8_t {
  kInvalidQn = 0x01,
  kInvalidMsnNoBuffer = 0x02,
  kInvalidMsnRange = 0x03,
  kInvalidMo = 0x04,
  kMessageTooLong = 0x05,
  kInvalidVersion = 0x06,
};
enum class MpaErrorType : std::uint8_t { kMpa = 0 };
enum class MpaErrorCode : std::uint8_t {
  kConnectionLost = 0x01,
  kCrc = 0x02,
  kMarker = 0x03,
  kInvalidRequestReply = 0x04,
  kLocalCatastrophic = 0x05,  // RFC 6581
  kInsufficientIrd = 0x06,    // RFC 6581
  kNoMatchingRtr = 0x07,      // RFC 6581
};

// Terminate message body (after the untagged DDP header on queue 2):
// control word {layer 4 | etype 4 | code 8 | M D R | reserved 13}; then, when D is
// set, the 16-bit DDP segment length (meaningful when M is set) and the copied DDP
// header (14 or 18 bytes as its T bit says); then, when R is set, the copied
// 28-byte RDMA Read Request header.
struct Terminate {
  std::uint8_t layer = 0;  // TermLayer
  std::uint8_t etype = 0;  // 4 bits
  std::uint8_t code = 0;
  bool m = false;
  bool d = false;
  bool r = false;
  std::uint16_t reserved = 0;  // 13 bits
  std::uint16_t ddp_segment_len = 0;
  Bytes ddp_header;    // copied DDP header, when d
  Bytes rdmap_header;  // copied RDMA header, when r
  std::size_t encoded_len() const {
    return kTerminateControlLen + (d ? 2 + ddp_header.size() : 0) + (r ? rdmap_header.size() : 0);
  }
};
// Errors: kTruncated, kBadValue (layer > 2, or M without D). Reserved bits are returned in
// `reserved`, not judged (RFC 5040: ignored on receive).
Expected<Terminate> parse_terminate(Bytes in);
// kBadLength when a copied header has the wrong size, kBadValue for out-of-range fields.
Expected<std::size_t> build_terminate(MutBytes out, const Terminate& t);

}  // namespace softrdma::wire
