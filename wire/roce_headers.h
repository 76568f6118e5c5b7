// RoCEv2 transport headers: BTH and the extended headers (RETH, AETH, AtomicETH,
// AtomicAckETH, ImmDt, IETH, DETH, FETH, XRCETH), and the whole packet as carried in a UDP
// datagram to port 4791: BTH | extended headers | payload | pad | ICRC.
#pragma once

#include <cstdint>
#include <optional>

#include "wire/bytes.h"
#include "wire/roce_opcode.h"

namespace softrdma::wire {

inline constexpr std::uint32_t kPsnMask = 0xFFFFFF;
inline constexpr std::uint32_t kQpnMask = 0xFFFFFF;

struct Bth {
  std::uint8_t opcode = 0;
  bool se = false;       // solicited event
  bool mig_req = false;  // ignored on receive (rxe sends 0, ConnectX 1)
  std::uint8_t pad_count = 0;
  std::uint8_t tver = 0;
  std::uint16_t pkey = 0xFFFF;
  bool fecn = false;
  bool becn = false;
  std::uint8_t resv6 = 0;  // low 6 bits of byte 4; must be 0
  std::uint32_t dest_qp = 0;
  bool ack_req = false;
  std::uint8_t resv7 = 0;  // low 7 bits of byte 8; must be 0
  std::uint32_t psn = 0;
};

struct Reth {
  std::uint64_t va = 0;
  std::uint32_t rkey = 0;
  std::uint32_t dma_len = 0;
};

// AETH syndrome: bits 7..5 say ACK (000), RNR NAK (001) or NAK (011).
struct Aeth {
  std::uint8_t syndrome = 0;
  std::uint32_t msn = 0;
};
enum class AethKind : std::uint8_t { kAck, kRnrNak, kReserved, kNak };
inline AethKind aeth_kind(std::uint8_t syndrome) {
  switch (syndrome >> 5) {
    case 0:
      return AethKind::kAck;
    case 1:
      return AethKind::kRnrNak;
    case 3:
      return AethKind::kNak;
    default:
      return AethKind::kReserved;
  }
}
namespace syndrome {
inline constexpr std::uint8_t kAckNoCredit = 0x1F, kRnrNakBase = 0x20, kNakPsnSeqErr = 0x60,
                              kNakInvalidRequest = 0x61, kNakRemoteAccess = 0x62,
                              kNakRemoteOp = 0x63, kNakInvalidRdRequest = 0x64;
}

struct AtomicEth {
  std::uint64_t va = 0;
  std::uint32_t rkey = 0;
  std::uint64_t swap_add = 0;
  std::uint64_t compare = 0;
};

// FLUSH extended transport header (IBTA 1.5 A19): the placement type (bits 3-0: 1 global
// visibility, 2 persistence; both may be set) and the selectivity level (bits 5-4: 0 the
// RETH's range, 1 the whole memory region); the other bits are reserved.
struct Feth {
  std::uint8_t placement = 0;
  std::uint8_t selectivity = 0;
  std::uint32_t reserved = 0;  // bits 31-6, as they stand in the word
};
namespace flush {
inline constexpr std::uint8_t kGlobal = 1, kPersistent = 2;  // placement type bits
inline constexpr std::uint8_t kRange = 0, kRegion = 1;       // selectivity levels
}  // namespace flush

struct AtomicAckEth {
  std::uint64_t orig = 0;
};

struct Deth {
  std::uint32_t qkey = 0;
  std::uint8_t resv = 0;
  std::uint32_t src_qp = 0;
};

// XRC extended transport header (IBTA annex A14): 8 reserved bits, then the number of the XRC
// SRQ at the target that takes the message.
struct XrcEth {
  std::uint8_t resv = 0;
  std::uint32_t srqn = 0;
};

// The decoded transport headers of one packet. Which optionals are set follows
// the opcode table.
struct RoceHeaders {
  Bth bth;
  std::optional<Deth> deth;
  std::optional<XrcEth> xrceth;
  std::optional<Feth> feth;
  std::optional<Reth> reth;
  std::optional<AtomicEth> atomic_eth;
  std::optional<Aeth> aeth;
  std::optional<AtomicAckEth> atomic_ack_eth;
  std::optional<std::uint32_t> imm;       // ImmDt, host order
  std::optional<std::uint32_t> inv_rkey;  // IETH
};

// A parsed packet: views into the datagram it came from.
struct RocePacket {
  RoceHeaders hdr;
  const RoceOpcodeInfo* info = nullptr;
  std::size_t header_len = 0;  // BTH + extended headers
  Bytes payload;               // without pad
  Bytes pad;
  Bytes cnp_reserved;      // the 16 bytes after a CNP's BTH
  std::uint32_t icrc = 0;  // as received (the 4 wire bytes read least-significant first)
};

// Parses the UDP payload of a RoCEv2 datagram. Errors: kTruncated (shorter than
// the opcode's headers + ICRC), kUnknownOpcode, kBadVersion (TVer != 0),
// kBadPad (pad count larger than the payload, or pad on an opcode that carries
// none), kBadLength (payload where none is allowed). The ICRC is returned, not
// checked. Reserved fields (BTH resv6/resv7, DETH and XRCETH resv, a CNP's 16 bytes) are
// returned, not judged: IBTA has receivers ignore them; see roce_reserved_set. (FETH fields
// are returned as they are too: lint and the responder judge them.)
Expected<RocePacket> parse_roce(Bytes udp_payload);
// True when a reserved field of the packet is not zero (a sender's fault, which receivers
// ignore).
bool roce_reserved_set(const RocePacket& pkt);

// Header-only decoders (the span starts at the header).
Expected<Bth> parse_bth(Bytes in);
Expected<Reth> parse_reth(Bytes in);
Expected<Aeth> parse_aeth(Bytes in);
Expected<AtomicEth> parse_atomic_eth(Bytes in);
Expected<AtomicAckEth> parse_atomic_ack_eth(Bytes in);
Expected<Deth> parse_deth(Bytes in);
Expected<Feth> parse_feth(Bytes in);
Expected<XrcEth> parse_xrceth(Bytes in);

void encode_bth(std::uint8_t* p, const Bth& h);
void encode_reth(std::uint8_t* p, const Reth& h);
void encode_aeth(std::uint8_t* p, const Aeth& h);
void encode_atomic_eth(std::uint8_t* p, const AtomicEth& h);
void encode_atomic_ack_eth(std::uint8_t* p, const AtomicAckEth& h);
void encode_deth(std::uint8_t* p, const Deth& h);
void encode_feth(std::uint8_t* p, const Feth& h);
void encode_xrceth(std::uint8_t* p, const XrcEth& h);

// Pad bytes needed after `payload_len` bytes to reach a 4-byte boundary.
inline std::uint8_t roce_pad(std::size_t payload_len) {
  return static_cast<std::uint8_t>((4 - (payload_len & 3)) & 3);
}
// UDP payload length of a packet with these headers and payload (incl. pad and ICRC).
std::size_t roce_len(const RoceOpcodeInfo& info, std::size_t payload_len);

// Writes BTH, the extended headers the opcode requires, payload, zero pad and a
// zero ICRC placeholder. bth.pad_count is set from the payload length. Errors:
// kUnknownOpcode, kBadValue (a required header missing, payload on an opcode
// without payload, or a field out of range), kNoRoom.
Expected<std::size_t> build_roce(MutBytes out, const RoceHeaders& h, Bytes payload);

// Writes only the BTH and extended headers for a packet that will carry
// `payload_len` bytes (pad count set accordingly); the caller writes payload, zero
// pad and ICRC placeholder after them. Returns the header length; same errors.
Expected<std::size_t> build_roce_header(MutBytes out, const RoceHeaders& h,
                                        std::size_t payload_len);

}  // namespace softrdma::wire
