// Fault-safe access to memory that may be unmapped under the engine: the pages of on-demand
// paging (ODP) regions, which nothing pins. The copies go through process_vm_readv/writev on
// the calling process, so an unmapped or write-protected page is an error (false), never a
// SIGSEGV/SIGBUS. Ordinary regions keep memcpy (docs/verbs-abi.md#on-demand-paging).
#pragma once

#include <cstddef>

namespace softrdma::core {

// Whether the kernel lets this process use the calls (a seccomp filter may refuse them): ODP is
// offered only when it does. Probed once.
bool fault_safe_available();
// Copies `n` bytes from `src`, which may be unmapped, to `dst` (mapped). False on a fault.
bool fault_safe_read(void* dst, const void* src, std::size_t n);
// Copies `n` bytes from `src` (mapped) to `dst`, which may be unmapped or read-only.
bool fault_safe_write(void* dst, const void* src, std::size_t n);
// Whether the 4-byte aligned word at `p` is mapped readable and writable: an atomic add of 0
// by the kernel (futex FUTEX_WAKE_OP), which changes nothing and races with no writer.
bool fault_safe_probe_writable(void* p);

}  // namespace softrdma::core
