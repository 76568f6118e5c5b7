#include "wire/icrc.h"

#include <array>
#include <cstring>

#include "wire/crc.h"
#include "wire/net.h"
#include "wire/roce_opcode.h"

namespace softrdma::wire {

std::uint32_t compute_icrc(Bytes ip_header, Bytes udp_header, Bytes roce, Error* err) {
  const bool v6 = !ip_header.empty() && (ip_header[0] >> 4) == 6;
  const std::size_t ip_len = v6 ? kIpv6Len : kIpv4MinLen;
  if (ip_header.size() < ip_len || ip_header.size() > 60 || udp_header.size() < kUdpLen ||
      roce.size() < kBthLen) {
    if (err) *err = Error::kTruncated;
    return 0;
  }
  // 8 x 0xFF | IP header (≤ 60) | UDP (8) | BTH (12): masked copy on the stack.
  std::array<std::uint8_t, 8 + 60 + kUdpLen + kBthLen> buf;
  std::memset(buf.data(), 0xFF, 8);
  std::uint8_t* ip = buf.data() + 8;
  std::memcpy(ip, ip_header.data(), ip_header.size());
  if (v6) {
    ip[0] |= 0x0F;  // traffic class and flow label
    ip[1] = ip[2] = ip[3] = 0xFF;
    ip[7] = 0xFF;  // hop limit
  } else {
    ip[1] = 0xFF;            // TOS
    ip[8] = 0xFF;            // TTL
    ip[10] = ip[11] = 0xFF;  // header checksum
  }
  std::uint8_t* udp = ip + ip_header.size();
  std::memcpy(udp, udp_header.data(), kUdpLen);
  udp[6] = udp[7] = 0xFF;
  std::uint8_t* bth = udp + kUdpLen;
  std::memcpy(bth, roce.data(), kBthLen);
  bth[4] = 0xFF;  // FECN, BECN and reserved bits
  const std::size_t head = 8 + ip_header.size() + kUdpLen + kBthLen;
  std::uint32_t crc = crc32_ieee_refl(0, Bytes(buf.data(), head));
  crc = crc32_ieee_refl(crc, roce.subspan(kBthLen));
  if (err) *err = Error::kNone;
  return crc;
}

namespace {

// The CRC register (reflected, polynomial 0xEDB88320) moved over one zero byte is a linear map
// Z(r) = (r >> 8) ^ T[r & 0xFF]; T's top bytes are all different, so Z is invertible. Kept as
// the columns of Z^-(2^k), k = 0..16: enough for any distance within a datagram.
struct ZeroStepInverse {
  std::array<std::array<std::uint32_t, 32>, 17> pow;

  static std::uint32_t apply(const std::array<std::uint32_t, 32>& m, std::uint32_t x) {
    std::uint32_t v = 0;
    for (int j = 0; x != 0; ++j, x >>= 1) {
      if (x & 1) v ^= m[static_cast<std::size_t>(j)];
    }
    return v;
  }

  ZeroStepInverse() {
    std::array<std::uint32_t, 256> table{};
    std::array<std::uint8_t, 256> by_top{};
    for (std::uint32_t i = 0; i < 256; ++i) {
      std::uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0xEDB88320u : c >> 1;
      table[i] = c;
      by_top[c >> 24] = static_cast<std::uint8_t>(i);
    }
    for (std::uint32_t j = 0; j < 32; ++j) {
      const std::uint32_t r = 1u << j;  // Z(prev) = r: the low byte of prev is by_top[r >> 24]
      const std::uint8_t low = by_top[r >> 24];
      pow[0][j] = ((r ^ table[low]) << 8) | low;
    }
    for (std::size_t k = 1; k < pow.size(); ++k) {
      for (std::size_t j = 0; j < 32; ++j) pow[k][j] = apply(pow[k - 1], pow[k - 1][j]);
    }
  }

  std::uint32_t unshift(std::uint32_t x, std::size_t n) const {
    for (std::size_t k = 0; n != 0 && k < pow.size(); ++k, n >>= 1) {
      if (n & 1) x = apply(pow[k], x);
    }
    return x;
  }
};

}  // namespace

Ipv4IdFlags icrc_solve_ipv4_id(Bytes ip_header, Bytes udp_header, Bytes roce, std::uint32_t icrc,
                               bool* ok) {
  Ipv4IdFlags out;
  if (ok) *ok = false;
  if (ip_header.size() < kIpv4MinLen || ip_header.size() > 60 || (ip_header[0] >> 4) != 4) {
    return out;
  }
  std::array<std::uint8_t, 60> ip{};
  std::memcpy(ip.data(), ip_header.data(), ip_header.size());
  ip[4] = ip[5] = ip[6] = ip[7] = 0;
  Error err = Error::kNone;
  const std::uint32_t guess =
      compute_icrc(Bytes(ip.data(), ip_header.size()), udp_header, roce, &err);
  if (err != Error::kNone || roce.size() > 0xFFFF) return out;
  // The CRC runs over 8 bytes of ones, the IP header, UDP, and `roce`; the 4 bytes start 12
  // bytes in. A change d of them (as a little-endian word) changes the register, and so the
  // ICRC, by Z^n(d), n being the bytes from their start to the end.
  static const ZeroStepInverse inverse;
  const std::size_t n = ip_header.size() + kUdpLen + roce.size() + 8 - 12;
  const std::uint32_t d = inverse.unshift(icrc ^ guess, n);
  out.id = static_cast<std::uint16_t>(((d & 0xFF) << 8) | ((d >> 8) & 0xFF));
  out.flags_frag = static_cast<std::uint16_t>((((d >> 16) & 0xFF) << 8) | (d >> 24));
  if (ok) *ok = true;
  return out;
}

}  // namespace softrdma::wire
