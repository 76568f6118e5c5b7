// The request packet the requester is building (rxe/requester.cpp): its headers, and the
// slice of the message it carries. Internal to rxe/.
#pragma once

#include <cstdint>

#include "wire/roce_headers.h"

namespace softrdma::rxe {

struct RequestPacket {
  wire::RoceHeaders h;
  std::uint64_t off = 0;  // offset in the message of its payload
  std::uint32_t n = 0;    // payload bytes (none for a READ request or an atomic)
  bool last = true;       // the message's last packet
};

}  // namespace softrdma::rxe
