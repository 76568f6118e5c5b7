#pragma once
// The Internet checksum's one's-complement sum (RFC 1071) of a byte range, computed eight bytes
// at a time in host order: the hot part of every TCP and UDP checksum softrdma and its
// userspace TCP compute. Same result as summing big-endian 16-bit words, byte-swapped.

#include <cstddef>
#include <cstdint>

namespace softrdma::wire {

// The one's-complement sum of `len` bytes at `p` (any alignment), folded to 16 bits, as the
// 16-bit words are read in host order (a trailing odd byte is the first byte of a word padded
// with zero). On a little-endian host, byte-swap it to get the big-endian sum.
std::uint16_t ones_sum_host(const void* p, std::size_t len);

}  // namespace softrdma::wire
