#include "wire/bytes.h"

namespace softrdma::wire {

std::string_view to_string(Error e) {
  switch (e) {
    case Error::kNone:
      return "ok";
    case Error::kTruncated:
      return "truncated";
    case Error::kBadLength:
      return "bad length";
    case Error::kUnknownOpcode:
      return "unknown opcode";
    case Error::kReservedBits:
      return "reserved bits set";
    case Error::kBadPad:
      return "bad pad";
    case Error::kBadVersion:
      return "bad version";
    case Error::kBadChecksum:
      return "bad checksum";
    case Error::kBadKey:
      return "bad MPA key";
    case Error::kNoRoom:
      return "output too small";
    case Error::kBadValue:
      return "value out of range";
    case Error::kNotRoce:
      return "not RoCEv2";
  }
  return "unknown error";
}

}  // namespace softrdma::wire
