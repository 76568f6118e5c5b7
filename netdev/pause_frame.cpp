#include "netdev/pause_frame.h"

#include <cstring>

namespace softrdma::netdev {

namespace {
constexpr std::size_t kBody = wire::kPauseBody;
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
  if (!wire::is_pfc_pause(wire::Bytes(p.data, p.len))) return std::nullopt;
  const std::uint8_t* b = p.data + kBody;
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
