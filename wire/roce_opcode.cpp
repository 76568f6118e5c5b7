#include "wire/roce_opcode.h"

#include <array>

namespace softrdma::wire {

namespace {

using T = Transport;
using K = OpKind;
using S = Seg;

struct Row {
  std::uint8_t opcode;
  RoceOpcodeInfo info;
};

// IBTA vol. 1, table 38 (opcodes) and the header layouts of 9.2–9.5, for the
// transports RoCEv2 devices use, and FLUSH and ATOMIC WRITE of release 1.5 (annex A19, the
// memory placement extensions); XRC (annex A14) has RC's opcodes from 0xA0, its requests with
// the XRCETH first; RD is not implemented.
constexpr Row kRows[] = {
    {0x00, {"RC SEND_FIRST", T::kRc, K::kSend, S::kFirst, 0, true, true}},
    {0x01, {"RC SEND_MIDDLE", T::kRc, K::kSend, S::kMiddle, 0, true, true}},
    {0x02, {"RC SEND_LAST", T::kRc, K::kSend, S::kLast, 0, true, true}},
    {0x03, {"RC SEND_LAST_WITH_IMMEDIATE", T::kRc, K::kSend, S::kLast, kImmDt, true, true}},
    {0x04, {"RC SEND_ONLY", T::kRc, K::kSend, S::kOnly, 0, true, true}},
    {0x05, {"RC SEND_ONLY_WITH_IMMEDIATE", T::kRc, K::kSend, S::kOnly, kImmDt, true, true}},
    {0x06, {"RC RDMA_WRITE_FIRST", T::kRc, K::kWrite, S::kFirst, kReth, true, true}},
    {0x07, {"RC RDMA_WRITE_MIDDLE", T::kRc, K::kWrite, S::kMiddle, 0, true, true}},
    {0x08, {"RC RDMA_WRITE_LAST", T::kRc, K::kWrite, S::kLast, 0, true, true}},
    {0x09, {"RC RDMA_WRITE_LAST_WITH_IMMEDIATE", T::kRc, K::kWrite, S::kLast, kImmDt, true, true}},
    {0x0A, {"RC RDMA_WRITE_ONLY", T::kRc, K::kWrite, S::kOnly, kReth, true, true}},
    {0x0B,
     {"RC RDMA_WRITE_ONLY_WITH_IMMEDIATE", T::kRc, K::kWrite, S::kOnly, kReth | kImmDt, true,
      true}},
    {0x0C, {"RC RDMA_READ_REQUEST", T::kRc, K::kReadRequest, S::kOnly, kReth, false, true}},
    {0x0D,
     {"RC RDMA_READ_RESPONSE_FIRST", T::kRc, K::kReadResponse, S::kFirst, kAeth, true, false}},
    {0x0E, {"RC RDMA_READ_RESPONSE_MIDDLE", T::kRc, K::kReadResponse, S::kMiddle, 0, true, false}},
    {0x0F, {"RC RDMA_READ_RESPONSE_LAST", T::kRc, K::kReadResponse, S::kLast, kAeth, true, false}},
    {0x10, {"RC RDMA_READ_RESPONSE_ONLY", T::kRc, K::kReadResponse, S::kOnly, kAeth, true, false}},
    {0x11, {"RC ACKNOWLEDGE", T::kRc, K::kAck, S::kOnly, kAeth, false, false}},
    {0x12,
     {"RC ATOMIC_ACKNOWLEDGE", T::kRc, K::kAtomicAck, S::kOnly, kAeth | kAtomicAckEth, false,
      false}},
    {0x13, {"RC CMP_SWAP", T::kRc, K::kAtomic, S::kOnly, kAtomicEth, false, true}},
    {0x14, {"RC FETCH_ADD", T::kRc, K::kAtomic, S::kOnly, kAtomicEth, false, true}},
    {0x16, {"RC SEND_LAST_WITH_INVALIDATE", T::kRc, K::kSend, S::kLast, kIeth, true, true}},
    {0x17, {"RC SEND_ONLY_WITH_INVALIDATE", T::kRc, K::kSend, S::kOnly, kIeth, true, true}},
    {0x1C, {"RC FLUSH", T::kRc, K::kFlush, S::kOnly, kFeth | kReth, false, true}},
    {0x1D, {"RC ATOMIC_WRITE", T::kRc, K::kAtomicWrite, S::kOnly, kReth, true, true}},
    {0x20, {"UC SEND_FIRST", T::kUc, K::kSend, S::kFirst, 0, true, true}},
    {0x21, {"UC SEND_MIDDLE", T::kUc, K::kSend, S::kMiddle, 0, true, true}},
    {0x22, {"UC SEND_LAST", T::kUc, K::kSend, S::kLast, 0, true, true}},
    {0x23, {"UC SEND_LAST_WITH_IMMEDIATE", T::kUc, K::kSend, S::kLast, kImmDt, true, true}},
    {0x24, {"UC SEND_ONLY", T::kUc, K::kSend, S::kOnly, 0, true, true}},
    {0x25, {"UC SEND_ONLY_WITH_IMMEDIATE", T::kUc, K::kSend, S::kOnly, kImmDt, true, true}},
    {0x26, {"UC RDMA_WRITE_FIRST", T::kUc, K::kWrite, S::kFirst, kReth, true, true}},
    {0x27, {"UC RDMA_WRITE_MIDDLE", T::kUc, K::kWrite, S::kMiddle, 0, true, true}},
    {0x28, {"UC RDMA_WRITE_LAST", T::kUc, K::kWrite, S::kLast, 0, true, true}},
    {0x29, {"UC RDMA_WRITE_LAST_WITH_IMMEDIATE", T::kUc, K::kWrite, S::kLast, kImmDt, true, true}},
    {0x2A, {"UC RDMA_WRITE_ONLY", T::kUc, K::kWrite, S::kOnly, kReth, true, true}},
    {0x2B,
     {"UC RDMA_WRITE_ONLY_WITH_IMMEDIATE", T::kUc, K::kWrite, S::kOnly, kReth | kImmDt, true,
      true}},
    {0x64, {"UD SEND_ONLY", T::kUd, K::kSend, S::kOnly, kDeth, true, true}},
    {0x65, {"UD SEND_ONLY_WITH_IMMEDIATE", T::kUd, K::kSend, S::kOnly, kDeth | kImmDt, true, true}},
    {0xA0, {"XRC SEND_FIRST", T::kXrc, K::kSend, S::kFirst, kXrcEth, true, true}},
    {0xA1, {"XRC SEND_MIDDLE", T::kXrc, K::kSend, S::kMiddle, kXrcEth, true, true}},
    {0xA2, {"XRC SEND_LAST", T::kXrc, K::kSend, S::kLast, kXrcEth, true, true}},
    {0xA3,
     {"XRC SEND_LAST_WITH_IMMEDIATE", T::kXrc, K::kSend, S::kLast, kXrcEth | kImmDt, true, true}},
    {0xA4, {"XRC SEND_ONLY", T::kXrc, K::kSend, S::kOnly, kXrcEth, true, true}},
    {0xA5,
     {"XRC SEND_ONLY_WITH_IMMEDIATE", T::kXrc, K::kSend, S::kOnly, kXrcEth | kImmDt, true, true}},
    {0xA6, {"XRC RDMA_WRITE_FIRST", T::kXrc, K::kWrite, S::kFirst, kXrcEth | kReth, true, true}},
    {0xA7, {"XRC RDMA_WRITE_MIDDLE", T::kXrc, K::kWrite, S::kMiddle, kXrcEth, true, true}},
    {0xA8, {"XRC RDMA_WRITE_LAST", T::kXrc, K::kWrite, S::kLast, kXrcEth, true, true}},
    {0xA9,
     {"XRC RDMA_WRITE_LAST_WITH_IMMEDIATE", T::kXrc, K::kWrite, S::kLast, kXrcEth | kImmDt, true,
      true}},
    {0xAA, {"XRC RDMA_WRITE_ONLY", T::kXrc, K::kWrite, S::kOnly, kXrcEth | kReth, true, true}},
    {0xAB,
     {"XRC RDMA_WRITE_ONLY_WITH_IMMEDIATE", T::kXrc, K::kWrite, S::kOnly, kXrcEth | kReth | kImmDt,
      true, true}},
    {0xAC,
     {"XRC RDMA_READ_REQUEST", T::kXrc, K::kReadRequest, S::kOnly, kXrcEth | kReth, false, true}},
    {0xAD,
     {"XRC RDMA_READ_RESPONSE_FIRST", T::kXrc, K::kReadResponse, S::kFirst, kAeth, true, false}},
    {0xAE,
     {"XRC RDMA_READ_RESPONSE_MIDDLE", T::kXrc, K::kReadResponse, S::kMiddle, 0, true, false}},
    {0xAF,
     {"XRC RDMA_READ_RESPONSE_LAST", T::kXrc, K::kReadResponse, S::kLast, kAeth, true, false}},
    {0xB0,
     {"XRC RDMA_READ_RESPONSE_ONLY", T::kXrc, K::kReadResponse, S::kOnly, kAeth, true, false}},
    {0xB1, {"XRC ACKNOWLEDGE", T::kXrc, K::kAck, S::kOnly, kAeth, false, false}},
    {0xB2,
     {"XRC ATOMIC_ACKNOWLEDGE", T::kXrc, K::kAtomicAck, S::kOnly, kAeth | kAtomicAckEth, false,
      false}},
    {0xB3, {"XRC CMP_SWAP", T::kXrc, K::kAtomic, S::kOnly, kXrcEth | kAtomicEth, false, true}},
    {0xB4, {"XRC FETCH_ADD", T::kXrc, K::kAtomic, S::kOnly, kXrcEth | kAtomicEth, false, true}},
    {0xB6,
     {"XRC SEND_LAST_WITH_INVALIDATE", T::kXrc, K::kSend, S::kLast, kXrcEth | kIeth, true, true}},
    {0xB7,
     {"XRC SEND_ONLY_WITH_INVALIDATE", T::kXrc, K::kSend, S::kOnly, kXrcEth | kIeth, true, true}},
    {0x81, {"CNP", T::kCnp, K::kCnp, S::kNone, kCnpPad, false, true}},
};

constexpr std::array<RoceOpcodeInfo, 256> make_table() {
  std::array<RoceOpcodeInfo, 256> t{};
  for (const auto& r : kRows) t[r.opcode] = r.info;
  return t;
}

constexpr std::array<RoceOpcodeInfo, 256> kTable = make_table();

// segment_opcode's index: transport, kind, seg and suffix (none, ImmDt, IETH).
constexpr std::size_t kTransports = 6, kKinds = 11, kSegs = 5, kSuffixes = 3;
constexpr std::uint8_t kNoOpcode = 0xFF;  // undefined in the table

constexpr std::size_t suffix_index(std::uint16_t headers) {
  return (headers & kImmDt) ? 1 : (headers & kIeth) ? 2 : 0;
}

constexpr std::size_t shape_index(T t, K k, S s, std::size_t suffix) {
  return ((static_cast<std::size_t>(t) * kKinds + static_cast<std::size_t>(k)) * kSegs +
          static_cast<std::size_t>(s)) *
             kSuffixes +
         suffix;
}

constexpr std::array<std::uint8_t, kTransports * kKinds * kSegs * kSuffixes> make_shapes() {
  std::array<std::uint8_t, kTransports * kKinds * kSegs * kSuffixes> t{};
  for (auto& o : t) o = kNoOpcode;
  for (const auto& r : kRows) {
    if (r.info.kind == K::kAtomic) continue;
    t[shape_index(r.info.transport, r.info.kind, r.info.seg, suffix_index(r.info.headers))] =
        r.opcode;
  }
  return t;
}

constexpr auto kShapes = make_shapes();

}  // namespace

std::size_t ext_header_len(std::uint16_t ext) {
  std::size_t n = 0;
  if (ext & kXrcEth) n += kXrcEthLen;
  if (ext & kFeth) n += kFethLen;
  if (ext & kDeth) n += kDethLen;
  if (ext & kReth) n += kRethLen;
  if (ext & kAtomicEth) n += kAtomicEthLen;
  if (ext & kAeth) n += kAethLen;
  if (ext & kAtomicAckEth) n += kAtomicAckEthLen;
  if (ext & kImmDt) n += kImmDtLen;
  if (ext & kIeth) n += kIethLen;
  if (ext & kCnpPad) n += kCnpPadLen;
  return n;
}

std::size_t RoceOpcodeInfo::header_len() const {
  return kBthLen + ext_header_len(headers);
}

const RoceOpcodeInfo& roce_opcode_info(std::uint8_t opcode) {
  return kTable[opcode];
}

std::optional<std::uint8_t> segment_opcode(Transport transport, OpKind kind, Seg seg,
                                           std::uint16_t suffix) {
  if (suffix & ~(kImmDt | kIeth)) return std::nullopt;
  const std::uint8_t op = kShapes[shape_index(transport, kind, seg, suffix_index(suffix))];
  if (op == kNoOpcode) return std::nullopt;
  return op;
}

}  // namespace softrdma::wire
