// MPA request/reply frames (RFC 5044 §7.1, RFC 6581 enhanced IRD/ORD). parse_mpa
// never reads past its span and returns views into it; build_mpa never allocates.
#pragma once

#include <cstdint>

#include "wire/bytes.h"

namespace softrdma::wire {

inline constexpr std::size_t kMpaKeyLen = 16;
inline constexpr std::size_t kMpaHeaderLen = 20;  // key, flags, revision, PD_Length
inline constexpr std::size_t kMpaMaxPrivateData = 512;
inline constexpr std::size_t kMpaIrdOrdLen = 4;  // RFC 6581 IRD and ORD words
inline constexpr std::uint8_t kMpaFlagMarkers = 0x80;
inline constexpr std::uint8_t kMpaFlagCrc = 0x40;
inline constexpr std::uint8_t kMpaFlagReject = 0x20;
inline constexpr std::uint8_t kMpaFlagEnhanced = 0x10;
inline constexpr std::uint8_t kMpaFlagReserved = 0x0F;

// The 16-byte keys, "MPA ID Req Frame" and "MPA ID Rep Frame".
extern const std::uint8_t kMpaRequestKey[kMpaKeyLen];
extern const std::uint8_t kMpaReplyKey[kMpaKeyLen];

enum class MpaKind : std::uint8_t { kRequest, kReply };

// RFC 6581 IRD/ORD words, present when the enhanced flag is set (revision 2).
struct MpaIrdOrd {
  bool peer_to_peer = false;    // IRD word 0x8000
  bool zero_send_rtr = false;   // IRD word 0x4000
  std::uint16_t ird = 0;        // 14 bits
  bool zero_write_rtr = false;  // ORD word 0x8000
  bool zero_read_rtr = false;   // ORD word 0x4000
  std::uint16_t ord = 0;        // 14 bits
};

struct MpaFrame {
  MpaKind kind = MpaKind::kRequest;
  bool markers = false;
  bool crc = false;
  bool reject = false;
  bool enhanced = false;
  std::uint8_t revision = 1;
  std::uint8_t reserved = 0;    // the flags' reserved bits: sent as zero, ignored on receive
  std::uint16_t pd_length = 0;  // PD_Length as on the wire (includes the IRD/ORD words)
  MpaIrdOrd ird_ord;            // valid when enhanced
  Bytes private_data;           // user private data (after IRD/ORD when enhanced)
  std::size_t total_len() const { return kMpaHeaderLen + pd_length; }
};

// Errors: kBadKey (neither key, judged on the bytes present), kTruncated,
// kBadVersion (revision not 1/2, or enhanced
// with revision 1), kBadLength (PD_Length > 512, or enhanced with PD_Length < 4).
Expected<MpaFrame> parse_mpa(Bytes in);

// Writes key, flags, revision, PD_Length (computed: private_data plus 4 when
// enhanced) and the private data. kBadLength if over 512, kBadVersion for
// enhanced with revision != 2, kBadValue when IRD/ORD exceed 14 bits, kNoRoom.
Expected<std::size_t> build_mpa(MutBytes out, const MpaFrame& f);

// Whether `in` starts with (as much as is present of) the request / reply key.
bool mpa_key_prefix(Bytes in, MpaKind kind);

}  // namespace softrdma::wire
