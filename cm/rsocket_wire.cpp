#include "cm/rsocket_wire.h"

#include <cstring>
#include <limits>

namespace softrdma::cm::rs {

Hello parse_hello(const void* pdata, std::size_t len, std::uint32_t default_slots) {
  Hello h;
  if (pdata && len >= kHelloBytes) {
    const auto* p = static_cast<const std::uint8_t*>(pdata);
    std::memcpy(&h.credit_addr, p, 8);
    std::memcpy(&h.credit_rkey, p + 8, 4);
    std::memcpy(&h.slots, p + 12, 4);
  }
  if (h.slots == 0) h.slots = default_slots;
  return h;
}

void encode_window(const Window& w, std::uint8_t (&out)[kWindowBytes]) {
  std::memset(out, 0, kWindowBytes);
  std::memcpy(out, &w.offset, 8);
  std::memcpy(out + 8, &w.addr, 8);
  std::memcpy(out + 16, &w.rkey, 4);
  std::memcpy(out + 24, &w.len, 8);
}

std::optional<Window> parse_window(const std::uint8_t* msg, std::size_t len) {
  if (!msg || len < kWindowBytes) return std::nullopt;
  Window w;
  std::memcpy(&w.offset, msg, 8);
  std::memcpy(&w.addr, msg + 8, 8);
  std::memcpy(&w.rkey, msg + 16, 4);
  std::memcpy(&w.len, msg + 24, 8);
  constexpr auto kMax = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  if (w.offset < 0 || w.len > kMax - static_cast<std::uint64_t>(w.offset)) return std::nullopt;
  return w;
}

bool window_covers(const Window& w, std::int64_t offset, std::uint64_t count,
                   std::uint64_t& remote) {
  if (offset < w.offset) return false;
  // Both non-negative here (a parsed window's offset is), so the difference cannot overflow.
  const auto into = static_cast<std::uint64_t>(offset) - static_cast<std::uint64_t>(w.offset);
  if (into > w.len || count > w.len - into) return false;
  remote = w.addr + into;
  return true;
}

std::uint64_t credits(std::uint64_t peer_reposted, std::uint32_t peer_slots,
                      std::uint64_t sent_chunks) {
  const std::uint64_t granted = peer_reposted + peer_slots;
  if (granted < peer_reposted || granted < sent_chunks) return 0;  // wrapped, or behind us
  return granted - sent_chunks;
}

}  // namespace softrdma::cm::rs
