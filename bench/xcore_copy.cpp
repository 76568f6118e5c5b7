// The host's cross-core hand-off rate: one thread copies 64 KiB blocks into a 4 MiB ring, another
// copies them out, as a sender and a receiver do through softrdma's host-local rings (or the
// kernel through a loopback socket). Printed next to bandwidth figures, it tells the machine's
// state: on the 2-core development VM it moves between about 30 and 58 GB/s from minute to
// minute, and ib_write_bw with it (docs/sharing-a-host.md).
//   xcore_copy [MILLISECONDS]
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

int main(int argc, char** argv) {
  const int ms = argc > 1 ? std::atoi(argv[1]) : 700;
  if (ms <= 0 || ms > 60000) {
    std::fprintf(stderr, "usage: xcore_copy [MILLISECONDS (1-60000)]\n");
    return 2;
  }
  constexpr std::size_t kBlock = 64 << 10, kSlots = 64, kSources = 16;
  std::vector<char> ring(kBlock * kSlots), src(kBlock * kSources, 1), dst(kBlock * kSources);
  alignas(64) std::atomic<std::size_t> head{0};
  alignas(64) std::atomic<std::size_t> tail{0};
  std::atomic<bool> stop{false};
  std::thread producer([&] {
    for (std::size_t t = 0; !stop.load(std::memory_order_relaxed);) {
      if (t - head.load(std::memory_order_acquire) >= kSlots) continue;  // full
      std::memcpy(&ring[(t % kSlots) * kBlock], &src[(t % kSources) * kBlock], kBlock);
      tail.store(++t, std::memory_order_release);
    }
  });
  const auto start = std::chrono::steady_clock::now();
  const auto end = start + std::chrono::milliseconds(ms);
  std::size_t h = 0;
  while (std::chrono::steady_clock::now() < end) {
    if (h == tail.load(std::memory_order_acquire)) continue;  // empty
    std::memcpy(&dst[(h % kSources) * kBlock], &ring[(h % kSlots) * kBlock], kBlock);
    head.store(++h, std::memory_order_release);
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  stop = true;
  producer.join();
  std::printf("cross-core hand-off: %.1f GB/s\n", static_cast<double>(h * kBlock) / s / 1e9);
  return 0;
}
