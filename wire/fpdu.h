// MPA FPDU framing (RFC 5044 §4): ULPDU_Length | ULPDU | pad to 4 | CRC32c (sent
// least-significant byte first), and the 512-octet markers (§5). No allocation.
#pragma once

#include <cstdint>
#include <span>

#include "wire/bytes.h"

namespace softrdma::wire {

inline constexpr std::size_t kFpduHeaderLen = 2;
inline constexpr std::size_t kFpduCrcLen = 4;
inline constexpr std::size_t kMarkerLen = 4;
inline constexpr std::size_t kMarkerInterval = 512;
inline constexpr std::size_t kMaxUlpduLen = 0xFFFF;

// Pad after the ULPDU so that 2 + ULPDU_Length + pad is a multiple of 4.
constexpr std::size_t fpdu_pad_len(std::size_t ulpdu_len) {
  return (4 - (2 + ulpdu_len) % 4) % 4;
}
// Marker-free FPDU length: header, ULPDU, pad and CRC.
constexpr std::size_t fpdu_total_len(std::size_t ulpdu_len) {
  return kFpduHeaderLen + ulpdu_len + fpdu_pad_len(ulpdu_len) + kFpduCrcLen;
}

// The MPA CRC (CRC32c) over the covered bytes; store with store32le.
std::uint32_t fpdu_crc(Bytes covered);

// Writes a marker-free FPDU. With crc the CRC field holds CRC32c over header,
// ULPDU and pad; without, it is zero. kBadLength over 65535 bytes, kNoRoom.
Expected<std::size_t> build_fpdu(MutBytes out, Bytes ulpdu, bool crc);

// A decoded marker-free FPDU. Pad and CRC problems do not fail the parse; they
// are reported by check() so a checker can print expected versus found.
struct Fpdu {
  std::uint16_t ulpdu_len = 0;
  Bytes ulpdu;                // view into the input
  Bytes pad;                  // view into the input (0..3 bytes)
  std::size_t total_len = 0;  // fpdu_total_len(ulpdu_len)
  bool crc_negotiated = false;
  std::uint32_t crc_found = 0;     // CRC field read least-significant byte first
  std::uint32_t crc_computed = 0;  // CRC32c of the covered bytes (0 when not negotiated)
  bool pad_zero() const;
  bool crc_ok() const { return !crc_negotiated || crc_found == crc_computed; }
  // kBadChecksum when the CRC is negotiated and wrong, else kBadPad when pad
  // bytes are not zero ("should be zero"), else kNone.
  Error check() const;
};
// kTruncated when `in` ends before the FPDU does. Reads only the FPDU's bytes.
Expected<Fpdu> parse_fpdu(Bytes in, bool crc_negotiated);

// ---- Markers (RFC 5044 §4.3, §5). Stream offsets count octets (markers included)
// from the first octet after the MPA request/reply in that direction -- the first
// octet of the first FPDU, which a marker immediately precedes -- and a marker sits
// at every multiple of 512. A marker that falls where an FPDU would begin is placed
// before its ULPDU_Length field, belongs to that FPDU (the CRC covers it) and
// carries FPDUPTR 0; any other marker carries the distance back from its first
// octet to the ULPDU_Length field of the FPDU it sits in.
struct Marker {
  std::uint64_t offset = 0;  // stream offset of the marker's first octet
  std::uint16_t reserved = 0;
  std::uint16_t fpdu_ptr = 0;
};

constexpr bool is_marker_offset(std::uint64_t off) {
  return off % kMarkerInterval == 0;
}
// Wire length of a marker-free FPDU of fpdu_len bytes that begins at `start`
// (a marker at `start` itself is counted).
std::size_t fpdu_wire_len(std::uint64_t start, std::size_t fpdu_len);
// The FPDUPTR expected in the marker at `marker_off` within the FPDU that began at
// `fpdu_start` (its leading marker, if any, included).
std::uint16_t expected_fpdu_ptr(std::uint64_t marker_off, std::uint64_t fpdu_start);

// Turns marker-free FPDUs into wire bytes with markers inserted.
class MarkerInserter {
 public:
  explicit MarkerInserter(std::uint64_t stream_offset = 0) : offset_(stream_offset) {}
  std::uint64_t offset() const { return offset_; }
  std::size_t wire_len(std::size_t fpdu_len) const { return fpdu_wire_len(offset_, fpdu_len); }
  // Copies one marker-free FPDU into `out` with markers inserted and advances the
  // offset. With crc the CRC field is recomputed over the wire bytes (markers
  // included); without it is copied. kBadLength if `fpdu` is not one whole FPDU
  // (per its ULPDU_Length), kNoRoom if `out` is short (nothing is consumed then).
  Expected<std::size_t> put_fpdu(MutBytes out, Bytes fpdu, bool crc);

 private:
  std::uint64_t offset_;
};

// Removes markers from wire bytes, reporting each one. Incremental: a marker
// split across calls is completed by the next call.
class MarkerStripper {
 public:
  explicit MarkerStripper(std::uint64_t stream_offset = 0) : offset_(stream_offset) {}
  std::uint64_t offset() const { return offset_; }
  struct Result {
    std::size_t consumed = 0;  // wire bytes used
    std::size_t written = 0;   // marker-free bytes written to `out`
    std::size_t markers = 0;   // markers written to `markers`
  };
  // Stops early (consumed < wire.size()) when `out` or `markers` is full.
  Result strip(Bytes wire, MutBytes out, std::span<Marker> markers);

 private:
  std::uint64_t offset_;
  std::uint8_t partial_[kMarkerLen] = {};
};

}  // namespace softrdma::wire
