// The cost of the fault-safe copies of on-demand paging regions (core/safe_copy.h) against
// memcpy: 1, 4 and 64 KiB blocks, read (gather) and write (scatter), in ns per block and GB/s,
// plus the atomic's page probe. Figures for docs/verbs-abi.md#on-demand-paging, never assertions.
//   safe_copy_bench [ITERATIONS]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/safe_copy.h"

namespace {

template <class Fn>
double ns_per(int n, Fn&& fn) {
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) fn();
  const std::chrono::duration<double, std::nano> d = std::chrono::steady_clock::now() - t0;
  return d.count() / n;
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 20000;
  if (n <= 0) {
    std::fprintf(stderr, "usage: safe_copy_bench [ITERATIONS (>0)]\n");
    return 2;
  }
  using softrdma::core::fault_safe_probe_writable;
  using softrdma::core::fault_safe_read;
  using softrdma::core::fault_safe_write;
  if (!softrdma::core::fault_safe_available()) {
    std::fprintf(stderr, "safe_copy_bench: process_vm_readv/writev refused here\n");
    return 77;
  }
  std::vector<char> a(64 << 10, 1), b(64 << 10, 2);
  volatile char sink = 0;
  // Per block of each size: a packet's payload (1 KiB, 4 KiB MTU) and a 64 KiB message.
  for (const std::size_t block :
       {std::size_t{1} << 10, std::size_t{4} << 10, std::size_t{64} << 10}) {
    const double mc = ns_per(n, [&] {
      std::memcpy(b.data(), a.data(), block);
      asm volatile("" : : "r"(b.data()) : "memory");  // the copy is not optimised away
      sink = b[block - 1];
    });
    const double rd = ns_per(n, [&] { fault_safe_read(b.data(), a.data(), block); });
    const double wr = ns_per(n, [&] { fault_safe_write(b.data(), a.data(), block); });
    const auto gbs = [block](double ns) { return static_cast<double>(block) / ns; };
    std::printf(
        "%2zu KiB memcpy %8.0f ns %5.1f GB/s | process_vm_readv %8.0f ns %5.1f GB/s | "
        "process_vm_writev %8.0f ns %5.1f GB/s\n",
        block >> 10, mc, gbs(mc), rd, gbs(rd), wr, gbs(wr));
  }
  alignas(8) static unsigned word = 0;
  const double probe = ns_per(n, [&] { fault_safe_probe_writable(&word); });
  std::printf("atomic probe (futex WAKE_OP) %8.0f ns\n", probe);
  (void)sink;
  return 0;
}
