// Byte-level helpers for the codecs: big-endian loads/stores over spans, the
// precise parse error enumeration, and a small Expected type. No allocation.
#pragma once

#include <boost/endian/conversion.hpp>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <utility>

namespace softrdma::wire {

using Bytes = std::span<const std::uint8_t>;
using MutBytes = std::span<std::uint8_t>;

// Why a parser or builder refused its input.
enum class Error : std::uint8_t {
  kNone = 0,
  kTruncated,      // the span ends before the structure does
  kBadLength,      // a length field disagrees with the bytes present
  kUnknownOpcode,  // opcode not defined by the spec
  kReservedBits,   // reserved bits or bytes are not zero
  kBadPad,         // pad count or pad bytes are wrong
  kBadVersion,     // version field not supported
  kBadChecksum,    // IPv4/UDP/TCP checksum, ICRC or CRC32c mismatch
  kBadKey,         // MPA key is not a request or reply key
  kNoRoom,         // the output span is too small
  kBadValue,       // a field holds a value outside its range
  kNotRoce,        // not a RoCEv2 packet (wrong protocol or port)
};

std::string_view to_string(Error e);

// Either a value or an Error. Cheap to copy; never allocates.
template <class T>
class Expected {
 public:
  Expected(T v) : value_(std::move(v)), error_(Error::kNone) {}  // NOLINT(implicit)
  Expected(Error e) : value_(), error_(e) {}                     // NOLINT(implicit)
  bool ok() const { return error_ == Error::kNone; }
  explicit operator bool() const { return ok(); }
  Error error() const { return error_; }
  const T& value() const { return value_; }
  T& value() { return value_; }
  const T& operator*() const { return value_; }
  const T* operator->() const { return &value_; }
  T* operator->() { return &value_; }

 private:
  T value_;
  Error error_;
};

inline std::uint8_t load8(const std::uint8_t* p) {
  return *p;
}
inline std::uint16_t load16(const std::uint8_t* p) {
  return boost::endian::load_big_u16(p);
}
inline std::uint32_t load24(const std::uint8_t* p) {
  return boost::endian::load_big_u24(p);
}
inline std::uint32_t load32(const std::uint8_t* p) {
  return boost::endian::load_big_u32(p);
}
inline std::uint64_t load64(const std::uint8_t* p) {
  return boost::endian::load_big_u64(p);
}
inline void store8(std::uint8_t* p, std::uint8_t v) {
  *p = v;
}
inline void store16(std::uint8_t* p, std::uint16_t v) {
  boost::endian::store_big_u16(p, v);
}
inline void store24(std::uint8_t* p, std::uint32_t v) {
  boost::endian::store_big_u24(p, v);
}
inline void store32(std::uint8_t* p, std::uint32_t v) {
  boost::endian::store_big_u32(p, v);
}
inline void store64(std::uint8_t* p, std::uint64_t v) {
  boost::endian::store_big_u64(p, v);
}
inline std::uint32_t load32le(const std::uint8_t* p) {
  return boost::endian::load_little_u32(p);
}
inline void store32le(std::uint8_t* p, std::uint32_t v) {
  boost::endian::store_little_u32(p, v);
}

}  // namespace softrdma::wire
