#include "netdev/pause_frame.h"

#include <cstring>

namespace softrdma::netdev {

namespace {
constexpr std::size_t kBody = 12;  // the MAC-control body follows the BTH
}  // namespace

void build_pause(Packet& p, const PauseFrame& f) {
  std::uint8_t* b = p.data;
  std::memset(b, 0, kPauseFrameLen);
  b[0] = kPauseOpcode;
  b[2] = b[3] = 0xFF;  // the default P_Key; destination QP 0, PSN 0
  b[kBody] = kPfcOpcode >> 8;
  b[kBody + 1] = kPfcOpcode & 0xFF;
  b[kBody + 3] = f.enabled;
  for (std::size_t i = 0; i < 8; ++i) {
    b[kBody + 4 + 2 * i] = static_cast<std::uint8_t>(f.quanta[i] >> 8);
    b[kBody + 5 + 2 * i] = static_cast<std::uint8_t>(f.quanta[i] & 0xFF);
  }
  p.len = kPauseFrameLen;
}

std::optional<PauseFrame> parse_pause(const Packet& p) {
  if (p.len != kPauseFrameLen || p.data[0] != kPauseOpcode) return std::nullopt;
  const std::uint8_t* b = p.data + kBody;
  if (((b[0] << 8) | b[1]) != kPfcOpcode || b[2] != 0) return std::nullopt;
  PauseFrame f;
  f.enabled = b[3];
  for (std::size_t i = 0; i < 8; ++i) {
    f.quanta[i] = static_cast<std::uint16_t>((b[4 + 2 * i] << 8) | b[5 + 2 * i]);
  }
  return f;
}

std::chrono::nanoseconds pause_time(std::uint16_t quanta, double link_bps) {
  if (link_bps <= 0) return std::chrono::nanoseconds(0);
  return std::chrono::nanoseconds(static_cast<std::int64_t>(quanta * 512.0 * 1e9 / link_bps));
}

}  // namespace softrdma::netdev
