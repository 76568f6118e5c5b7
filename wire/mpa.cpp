#include "wire/mpa.h"

#include <algorithm>
#include <cstring>

namespace softrdma::wire {

const std::uint8_t kMpaRequestKey[kMpaKeyLen] = {'M', 'P', 'A', ' ', 'I', 'D', ' ', 'R',
                                                 'e', 'q', ' ', 'F', 'r', 'a', 'm', 'e'};
const std::uint8_t kMpaReplyKey[kMpaKeyLen] = {'M', 'P', 'A', ' ', 'I', 'D', ' ', 'R',
                                               'e', 'p', ' ', 'F', 'r', 'a', 'm', 'e'};

namespace {
constexpr std::uint16_t kBit15 = 0x8000;
constexpr std::uint16_t kBit14 = 0x4000;
constexpr std::uint16_t kDepthMask = 0x3FFF;
}  // namespace

bool mpa_key_prefix(Bytes in, MpaKind kind) {
  const std::uint8_t* key = kind == MpaKind::kRequest ? kMpaRequestKey : kMpaReplyKey;
  const std::size_t n = std::min(in.size(), kMpaKeyLen);
  return n == 0 || std::memcmp(in.data(), key, n) == 0;
}

Expected<MpaFrame> parse_mpa(Bytes in) {
  MpaFrame f;
  if (in.size() >= kMpaKeyLen) {
    if (std::memcmp(in.data(), kMpaRequestKey, kMpaKeyLen) == 0) {
      f.kind = MpaKind::kRequest;
    } else if (std::memcmp(in.data(), kMpaReplyKey, kMpaKeyLen) == 0) {
      f.kind = MpaKind::kReply;
    } else {
      return Error::kBadKey;
    }
  } else if (!mpa_key_prefix(in, MpaKind::kRequest) && !mpa_key_prefix(in, MpaKind::kReply)) {
    return Error::kBadKey;
  }
  if (in.size() < kMpaHeaderLen) return Error::kTruncated;
  const std::uint8_t flags = load8(&in[16]);
  f.markers = (flags & kMpaFlagMarkers) != 0;
  f.crc = (flags & kMpaFlagCrc) != 0;
  f.reject = (flags & kMpaFlagReject) != 0;
  f.enhanced = (flags & kMpaFlagEnhanced) != 0;
  f.revision = load8(&in[17]);
  f.pd_length = load16(&in[18]);
  f.reserved = static_cast<std::uint8_t>(flags & kMpaFlagReserved);
  if (f.revision != 1 && f.revision != 2) return Error::kBadVersion;
  if (f.pd_length > kMpaMaxPrivateData) return Error::kBadLength;
  if (in.size() - kMpaHeaderLen < f.pd_length) return Error::kTruncated;
  Bytes pd = in.subspan(kMpaHeaderLen, f.pd_length);
  if (f.enhanced) {
    if (f.revision != 2) return Error::kBadVersion;
    if (pd.size() < kMpaIrdOrdLen) return Error::kBadLength;
    const std::uint16_t ird = load16(&pd[0]);
    const std::uint16_t ord = load16(&pd[2]);
    f.ird_ord.peer_to_peer = (ird & kBit15) != 0;
    f.ird_ord.zero_send_rtr = (ird & kBit14) != 0;
    f.ird_ord.ird = static_cast<std::uint16_t>(ird & kDepthMask);
    f.ird_ord.zero_write_rtr = (ord & kBit15) != 0;
    f.ird_ord.zero_read_rtr = (ord & kBit14) != 0;
    f.ird_ord.ord = static_cast<std::uint16_t>(ord & kDepthMask);
    pd = pd.subspan(kMpaIrdOrdLen);
  }
  f.private_data = pd;
  return f;
}

Expected<std::size_t> build_mpa(MutBytes out, const MpaFrame& f) {
  const std::size_t extra = f.enhanced ? kMpaIrdOrdLen : 0;
  const std::size_t pd_len = f.private_data.size() + extra;
  if (pd_len > kMpaMaxPrivateData) return Error::kBadLength;
  if (f.revision != 1 && f.revision != 2) return Error::kBadVersion;
  if (f.enhanced && f.revision != 2) return Error::kBadVersion;
  if (f.enhanced && (f.ird_ord.ird > kDepthMask || f.ird_ord.ord > kDepthMask)) {
    return Error::kBadValue;
  }
  const std::size_t total = kMpaHeaderLen + pd_len;
  if (out.size() < total) return Error::kNoRoom;
  std::memcpy(out.data(), f.kind == MpaKind::kRequest ? kMpaRequestKey : kMpaReplyKey, kMpaKeyLen);
  std::uint8_t flags = 0;
  if (f.markers) flags |= kMpaFlagMarkers;
  if (f.crc) flags |= kMpaFlagCrc;
  if (f.reject) flags |= kMpaFlagReject;
  if (f.enhanced) flags |= kMpaFlagEnhanced;
  store8(&out[16], flags);
  store8(&out[17], f.revision);
  store16(&out[18], static_cast<std::uint16_t>(pd_len));
  std::size_t off = kMpaHeaderLen;
  if (f.enhanced) {
    std::uint16_t ird = f.ird_ord.ird;
    if (f.ird_ord.peer_to_peer) ird |= kBit15;
    if (f.ird_ord.zero_send_rtr) ird |= kBit14;
    std::uint16_t ord = f.ird_ord.ord;
    if (f.ird_ord.zero_write_rtr) ord |= kBit15;
    if (f.ird_ord.zero_read_rtr) ord |= kBit14;
    store16(&out[off], ird);
    store16(&out[off + 2], ord);
    off += kMpaIrdOrdLen;
  }
  if (!f.private_data.empty()) {
    std::memcpy(&out[off], f.private_data.data(), f.private_data.size());
  }
  return total;
}

}  // namespace softrdma::wire
