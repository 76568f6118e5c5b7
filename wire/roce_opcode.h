// The IBTA opcode table for RoCEv2 (RC, UC, UD, XRC and CNP; RC FLUSH and ATOMIC WRITE of IBTA
// 1.5 annex A19): for each 8-bit opcode,
// which extended headers follow the BTH, the transport, the packet's place in its
// message, whether payload is allowed and whether it is a request or a response.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace softrdma::wire {

enum class Transport : std::uint8_t { kNone, kRc, kUc, kUd, kCnp, kXrc };
enum class Seg : std::uint8_t { kNone, kFirst, kMiddle, kLast, kOnly };
enum class OpKind : std::uint8_t {
  kNone,
  kSend,
  kWrite,
  kReadRequest,
  kReadResponse,
  kAck,
  kAtomicAck,
  kAtomic,
  kCnp,
  kAtomicWrite,  // IBTA 1.5 A19: RETH and 8 bytes, answered by a zero-length read response
  kFlush,        // IBTA 1.5 A19: FETH and RETH, answered by a zero-length read response
};

// Extended headers, as bits; they follow the BTH in this (IBTA) order, but for the XRCETH,
// which comes first (every XRC request: BTH | XRCETH | RETH or AtomicETH ...), and the FETH
// (BTH | FETH | RETH).
enum ExtHeader : std::uint16_t {
  kDeth = 1u << 0,
  kReth = 1u << 1,
  kAtomicEth = 1u << 2,
  kAeth = 1u << 3,
  kAtomicAckEth = 1u << 4,
  kImmDt = 1u << 5,
  kIeth = 1u << 6,
  kCnpPad = 1u << 7,  // the 16 reserved bytes of a CNP
  kFeth = 1u << 8,    // FLUSH extended transport header (IBTA 1.5 A19)
  kXrcEth = 1u << 9,  // XRC extended transport header: the XRC SRQ number (IBTA annex A14)
};

inline constexpr std::size_t kBthLen = 12, kRethLen = 16, kAethLen = 4, kAtomicEthLen = 28,
                             kAtomicAckEthLen = 8, kImmDtLen = 4, kIethLen = 4, kDethLen = 8,
                             kCnpPadLen = 16, kIcrcLen = 4, kFethLen = 4, kXrcEthLen = 4;
inline constexpr std::size_t kAtomicWriteLen = 8;  // an ATOMIC WRITE's payload
inline constexpr std::uint16_t kRoceV2Port = 4791;

struct RoceOpcodeInfo {
  std::string_view name;  // IBTA name, e.g. "RC RDMA_WRITE_ONLY"; empty when undefined
  Transport transport = Transport::kNone;
  OpKind kind = OpKind::kNone;
  Seg seg = Seg::kNone;
  std::uint16_t headers = 0;  // ExtHeader bits
  bool payload = false;      // may carry payload
  bool request = false;      // sent by the requester (false: a response)
  bool immediate() const { return headers & kImmDt; }
  bool defined() const { return transport != Transport::kNone; }
  // BTH plus extended headers, in bytes.
  std::size_t header_len() const;
};

const RoceOpcodeInfo& roce_opcode_info(std::uint8_t opcode);

// The table read the other way: the opcode of a packet of `kind` at place `seg` in its
// message, on `transport`, carrying the suffix header `suffix` (0, kImmDt or kIeth); none
// where IBTA defines no such packet. Atomics (two opcodes of one shape) are not found here.
std::optional<std::uint8_t> segment_opcode(Transport transport, OpKind kind, Seg seg,
                                           std::uint16_t suffix = 0);
std::size_t ext_header_len(std::uint16_t ext_bits);

// Named opcodes used across the code base.
namespace op {
inline constexpr std::uint8_t kRcSendFirst = 0x00, kRcSendMiddle = 0x01, kRcSendLast = 0x02,
                              kRcSendLastImm = 0x03, kRcSendOnly = 0x04, kRcSendOnlyImm = 0x05,
                              kRcWriteFirst = 0x06, kRcWriteMiddle = 0x07, kRcWriteLast = 0x08,
                              kRcWriteLastImm = 0x09, kRcWriteOnly = 0x0A, kRcWriteOnlyImm = 0x0B,
                              kRcReadRequest = 0x0C, kRcReadResponseFirst = 0x0D,
                              kRcReadResponseMiddle = 0x0E, kRcReadResponseLast = 0x0F,
                              kRcReadResponseOnly = 0x10, kRcAck = 0x11, kRcAtomicAck = 0x12,
                              kRcCompareSwap = 0x13, kRcFetchAdd = 0x14, kRcSendLastInv = 0x16,
                              kRcSendOnlyInv = 0x17, kRcFlush = 0x1C, kRcAtomicWrite = 0x1D;
// XRC's opcodes are RC's (0x00-0x17, but for RESYNC) in the XRC transport's range 0xA0.
inline constexpr std::uint8_t kXrcBase = 0xA0, kXrcCompareSwap = 0xB3, kXrcFetchAdd = 0xB4;
inline constexpr std::uint8_t kUcBase = 0x20, kUdSendOnly = 0x64, kUdSendOnlyImm = 0x65,
                              kCnp = 0x81;
}  // namespace op

}  // namespace softrdma::wire
