// lwIP loaded at run time (dlopen of Debian's liblwip.so.0, package liblwip0), so that softrdma's
// binaries do not need the library unless softiwarp0 runs over a raw backend. lwip_loader.cpp
// defines each lwIP function lwtcp calls as a forwarder to the library's own; load_lwip() must
// have succeeded before any of them is called (open_stack calls it first).
#pragma once

#include <cstdint>
#include <string>

struct tcp_pcb;  // lwIP's (lwip/tcp.h)

namespace softrdma::lwtcp {

// The library's soname.
inline constexpr const char* kLwipLibrary = "liblwip.so.0";

// Loads the library and finds every function once (thread-safe); false with `error` set, e.g.
// "softiwarp0's userspace TCP needs liblwip.so.0 (Debian's liblwip0): liblwip.so.0: cannot open
// shared object file: No such file or directory".
bool load_lwip(std::string& error);

// lwIP checks the checksum of every TCP segment it takes, which lwtcp has checked already
// (classify) or completed itself. Until forget_checked_segment(), the sum lwIP asks of exactly
// the `len` bytes at `segment` (this thread, once) is not computed: the one returned makes the
// check pass, given `pseudo_sum`, the segment's pseudo-header sum (tcp_pseudo). Effective where
// lwip_standard_chksum is ours (libibverbs.so.1); elsewhere lwIP sums the segment itself.
void note_checked_segment(const void* segment, int len, std::uint16_t pseudo_sum);
void forget_checked_segment();

// The library's list of connections in a synchronised state or closing (lwIP's tcp_active_pcbs),
// once load_lwip() has succeeded.
::tcp_pcb* lwip_active_pcbs();

// lwip_init(), so that this process's connections neither start from the same local port nor
// carry the same initial sequence numbers as every other process's. Unseeded, lwIP takes its
// first port from rand() (the same in each process) and every ISN is 6510 plus tcp_ticks (0 at
// start): a new process reused the last one's port and ISN, and a peer still holding the old
// connection (TIME_WAIT) answered its SYN with an ACK rather than a SYN-ACK. Here rand() is
// seeded for lwIP alone and tcp_ticks starts at a random count.
void lwip_init_unpredictably();

}  // namespace softrdma::lwtcp
