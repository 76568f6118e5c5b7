#include "wire/fpdu.h"

#include <algorithm>
#include <cstring>

#include "wire/crc.h"

namespace softrdma::wire {

std::uint32_t fpdu_crc(Bytes covered) {
  return crc32c(0, covered);
}

Expected<std::size_t> build_fpdu(MutBytes out, Bytes ulpdu, bool crc) {
  if (ulpdu.size() > kMaxUlpduLen) return Error::kBadLength;
  const std::size_t total = fpdu_total_len(ulpdu.size());
  if (out.size() < total) return Error::kNoRoom;
  store16(out.data(), static_cast<std::uint16_t>(ulpdu.size()));
  if (!ulpdu.empty()) std::memcpy(&out[kFpduHeaderLen], ulpdu.data(), ulpdu.size());
  const std::size_t covered = total - kFpduCrcLen;
  std::fill(out.begin() + static_cast<std::ptrdiff_t>(kFpduHeaderLen + ulpdu.size()),
            out.begin() + static_cast<std::ptrdiff_t>(covered), std::uint8_t{0});
  const std::uint32_t c = crc ? fpdu_crc(Bytes(out.data(), covered)) : 0;
  store32le(&out[covered], c);
  return total;
}

bool Fpdu::pad_zero() const {
  return std::all_of(pad.begin(), pad.end(), [](std::uint8_t b) { return b == 0; });
}

Error Fpdu::check() const {
  if (!crc_ok()) return Error::kBadChecksum;
  if (!pad_zero()) return Error::kBadPad;
  return Error::kNone;
}

Expected<Fpdu> parse_fpdu(Bytes in, bool crc_negotiated) {
  if (in.size() < kFpduHeaderLen) return Error::kTruncated;
  Fpdu f;
  f.ulpdu_len = load16(in.data());
  f.total_len = fpdu_total_len(f.ulpdu_len);
  if (in.size() < f.total_len) return Error::kTruncated;
  f.ulpdu = in.subspan(kFpduHeaderLen, f.ulpdu_len);
  f.pad = in.subspan(kFpduHeaderLen + f.ulpdu_len, fpdu_pad_len(f.ulpdu_len));
  const std::size_t covered = f.total_len - kFpduCrcLen;
  f.crc_negotiated = crc_negotiated;
  f.crc_found = load32le(&in[covered]);
  f.crc_computed = crc_negotiated ? fpdu_crc(in.first(covered)) : 0;
  return f;
}

std::size_t fpdu_wire_len(std::uint64_t start, std::size_t fpdu_len) {
  std::uint64_t pos = start;
  std::size_t left = fpdu_len;
  std::size_t wire = 0;
  while (left > 0) {
    if (is_marker_offset(pos)) {
      wire += kMarkerLen;
      pos += kMarkerLen;
    }
    const std::size_t room = kMarkerInterval - static_cast<std::size_t>(pos % kMarkerInterval);
    const std::size_t chunk = std::min(left, room);
    wire += chunk;
    pos += chunk;
    left -= chunk;
  }
  return wire;
}

std::uint16_t expected_fpdu_ptr(std::uint64_t marker_off, std::uint64_t fpdu_start) {
  if (marker_off == fpdu_start) return 0;  // leading marker: the header follows it
  // The ULPDU_Length field sits after a leading marker when there is one.
  const std::uint64_t header = fpdu_start + (is_marker_offset(fpdu_start) ? kMarkerLen : 0);
  return static_cast<std::uint16_t>(marker_off - header);
}

Expected<std::size_t> MarkerInserter::put_fpdu(MutBytes out, Bytes fpdu, bool crc) {
  if (fpdu.size() < kFpduHeaderLen + kFpduCrcLen ||
      fpdu_total_len(load16(fpdu.data())) != fpdu.size()) {
    return Error::kBadLength;
  }
  const std::size_t wire = wire_len(fpdu.size());
  if (out.size() < wire) return Error::kNoRoom;
  const std::uint64_t start = offset_;
  const std::uint64_t header = start + (is_marker_offset(start) ? kMarkerLen : 0);
  std::size_t in_pos = 0;
  std::size_t out_pos = 0;
  while (in_pos < fpdu.size()) {
    if (is_marker_offset(offset_)) {
      const std::uint16_t ptr =
          offset_ == start ? std::uint16_t{0} : static_cast<std::uint16_t>(offset_ - header);
      store16(&out[out_pos], 0);
      store16(&out[out_pos + 2], ptr);
      out_pos += kMarkerLen;
      offset_ += kMarkerLen;
    }
    const std::size_t room = kMarkerInterval - static_cast<std::size_t>(offset_ % kMarkerInterval);
    const std::size_t chunk = std::min(fpdu.size() - in_pos, room);
    std::memcpy(&out[out_pos], &fpdu[in_pos], chunk);
    in_pos += chunk;
    out_pos += chunk;
    offset_ += chunk;
  }
  if (crc) {
    // Markers never split the 4-aligned CRC field: it is the last 4 wire bytes.
    store32le(&out[wire - kFpduCrcLen], fpdu_crc(Bytes(out.data(), wire - kFpduCrcLen)));
  }
  return wire;
}

MarkerStripper::Result MarkerStripper::strip(Bytes wire, MutBytes out, std::span<Marker> markers) {
  Result r;
  while (r.consumed < wire.size()) {
    const std::size_t in_interval = static_cast<std::size_t>(offset_ % kMarkerInterval);
    if (in_interval < kMarkerLen) {
      // Inside a marker: collect its bytes; report it when complete (needs room).
      if (in_interval == kMarkerLen - 1 && r.markers == markers.size()) break;
      partial_[in_interval] = wire[r.consumed];
      ++r.consumed;
      ++offset_;
      if (in_interval == kMarkerLen - 1) {
        Marker m;
        m.offset = offset_ - kMarkerLen;
        m.reserved = load16(&partial_[0]);
        m.fpdu_ptr = load16(&partial_[2]);
        markers[r.markers++] = m;
      }
      continue;
    }
    const std::size_t room = kMarkerInterval - in_interval;
    const std::size_t chunk = std::min({room, wire.size() - r.consumed, out.size() - r.written});
    if (chunk == 0) break;
    std::memcpy(&out[r.written], &wire[r.consumed], chunk);
    r.written += chunk;
    r.consumed += chunk;
    offset_ += chunk;
  }
  return r;
}

}  // namespace softrdma::wire
