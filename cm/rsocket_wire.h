// What two rsockets peers (cm/rsocket.cpp) send each other, read without trusting it: the hello
// in the connection's private data, the window a riomap announces in a control message, and the
// credits a peer's credit word grants. No verbs here: the checks alone.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

namespace softrdma::cm::rs {

// The connection's private data: where the peer's credit word is, and its receive slots.
struct Hello {
  std::uint64_t credit_addr = 0;
  std::uint32_t credit_rkey = 0;
  std::uint32_t slots = 0;
};
inline constexpr std::size_t kHelloBytes = 16;
// A hello shorter than kHelloBytes (or none) reads as zeros; slots 0 means `default_slots`.
Hello parse_hello(const void* pdata, std::size_t len, std::uint32_t default_slots);

// A riomap'd window of the peer: stream offsets [offset, offset+len) map to addr through rkey.
struct Window {
  std::int64_t offset = 0;
  std::uint64_t addr = 0;
  std::uint32_t rkey = 0;
  std::uint64_t len = 0;
};
// The announcement's layout: offset, addr, rkey (then 4 bytes pad), len, 16 bytes unused.
inline constexpr std::size_t kWindowBytes = 48;
void encode_window(const Window& w, std::uint8_t (&out)[kWindowBytes]);
// nullopt when shorter than kWindowBytes, or the window is not one riomap can make: a negative
// offset, or offset + len beyond the largest off_t.
std::optional<Window> parse_window(const std::uint8_t* msg, std::size_t len);
// Whether a write of `count` bytes at stream offset `offset` lies in `w`; then `remote` is where
// it starts in the peer's memory.
bool window_covers(const Window& w, std::int64_t offset, std::uint64_t count,
                   std::uint64_t& remote);

// The chunks a sender may still send: the slots the peer has re-posted (its credit word) plus
// its initial slots, less what was sent; 0 when a bogus credit word would make that negative.
std::uint64_t credits(std::uint64_t peer_reposted, std::uint32_t peer_slots,
                      std::uint64_t sent_chunks);

}  // namespace softrdma::cm::rs
