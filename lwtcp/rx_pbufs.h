// Received frames go to lwIP in pbufs whose memory softrdma reuses (lwIP custom pbufs, PBUF_REF)
// rather than in PBUF_RAM pbufs, which Debian's lwIP takes from malloc: a freed block of 64 KiB
// at the heap's top is trimmed back to the kernel and the next one faulted in again, page by
// page, so every received byte cost a page fault. Blocks come in size classes of 4 to 64 KiB; up
// to kKeep freed blocks a class wait for reuse, the rest go back to the heap. Thread-safe (lwIP
// frees a pbuf on whichever thread drops it); the pool lives as long as the process, since lwIP
// may free a pbuf after its stack is gone.
#pragma once

#include <cstddef>
#include <cstdint>

struct pbuf;  // lwIP's

namespace softrdma::lwtcp {

// Frames up to this long take a PBUF_RAM pbuf (small allocations are not trimmed).
inline constexpr std::size_t kRxPbufSmall = 2048;

// A pbuf holding a copy of the `len` bytes at `frame` (0 < len <= 0xFFFF), freed by pbuf_free:
// PBUF_RAM up to kRxPbufSmall bytes, else PBUF_REF in a block of the pool (given back to it);
// nullptr when out of memory or for another length.
pbuf* rx_pbuf(const std::uint8_t* frame, std::size_t len);

// Blocks waiting for reuse now, over all classes (for tests).
std::size_t rx_pbufs_kept();

}  // namespace softrdma::lwtcp
