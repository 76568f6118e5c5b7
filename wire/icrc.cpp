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

}  // namespace softrdma::wire
