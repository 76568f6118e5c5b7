// Engine benchmark: RC WRITE bandwidth and SEND ping-pong latency through the
// rxe C++ API, over the in-memory fabric (engine cost alone) and over UDP
// sockets on loopback (engine + kernel). Many QPs: bench/rxe_scale_bench.cpp. Prints figures;
// asserts nothing.
//   rxe_bench [SECONDS]
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench/rxe_sides.h"
#include "netdev/memory.h"
#include "netdev/udp.h"

using namespace softrdma;
using namespace softrdma::bench;

namespace {

double write_bw(Side& a, Side& b, std::uint32_t size, double secs) {
  const WriteWr write(a, b, size);
  const SendWr& w = write.wr;
  constexpr int kDepth = 64;
  std::uint64_t done = 0;
  int inflight = 0;
  const auto start = Clock::now();
  const auto end = start + std::chrono::duration<double>(secs);
  while (Clock::now() < end) {
    while (inflight < kDepth && a.qp->post_send(w) == 0) ++inflight;
    if (poll(a, 1) != 0) return -1;
    --inflight;
    ++done;
  }
  poll(a, static_cast<std::size_t>(inflight));
  const double s = std::chrono::duration<double>(Clock::now() - start).count();
  return static_cast<double>(done) * size / s / 1e6;
}

double send_lat(Side& a, Side& b, int iters) {
  const Sge sa{reinterpret_cast<std::uint64_t>(a.buf.data()), 2, a.mr->lkey};
  const Sge sb{reinterpret_cast<std::uint64_t>(b.buf.data()), 2, b.mr->lkey};
  SendWr wa, wb;
  wa.sg_list = std::span(&sa, 1);
  wa.send_flags = kSendSignaled | kSendInline;
  wb = wa;
  wb.sg_list = std::span(&sb, 1);
  RecvWr ra, rb;
  ra.sg_list = std::span(&sa, 1);
  rb.sg_list = std::span(&sb, 1);
  std::thread echo([&] {
    for (int i = 0; i < iters; ++i) {
      if (poll(b, 1) != 0) return;  // the ping
      b.qp->post_recv(rb);
      b.qp->post_send(wb);
      if (poll(b, 1) != 0) return;  // our send
    }
  });
  b.qp->post_recv(rb);
  a.qp->post_recv(ra);
  const auto start = Clock::now();
  for (int i = 0; i < iters; ++i) {
    a.qp->post_send(wa);
    if (poll(a, 2) != 0) break;  // our send and the pong
    a.qp->post_recv(ra);
  }
  const double us = std::chrono::duration<double, std::micro>(Clock::now() - start).count();
  echo.join();
  return us / iters / 2;  // one way
}

void run(const char* name, Side a, Side b, double secs) {
  connect(a, b);
  std::printf("%-8s write bw 64 KiB: %8.1f MB/s   4 KiB: %8.1f MB/s   send latency 2 B: %6.2f us\n",
              name, write_bw(a, b, 65536, secs), write_bw(a, b, 4096, secs), send_lat(a, b, 5000));
}

}  // namespace

int main(int argc, char** argv) {
  const double secs = argc > 1 ? std::atof(argv[1]) : 2.0;
  auto fabric = std::make_shared<netdev::MemoryFabric>();
  run("memory",
      make_side(
          std::make_unique<netdev::MemoryNetdev>(fabric, netdev::IpAddr::v4(0xC0000201), 9000),
          1 << 20),
      make_side(
          std::make_unique<netdev::MemoryNetdev>(fabric, netdev::IpAddr::v4(0xC0000202), 9000),
          1 << 20),
      secs);
  std::string err;
  const auto port = static_cast<std::uint16_t>(30000 + getpid() % 20000);
  auto ua = netdev::UdpNetdev::open(netdev::IpAddr::v4(0x7F000001), err, {}, port);
  auto ub = netdev::UdpNetdev::open(netdev::IpAddr::v4(0x7F000002), err, {}, port);
  if (!ua || !ub) {
    std::fprintf(stderr, "udp: %s\n", err.c_str());
    return 1;
  }
  run("udp", make_side(std::move(ua), 1 << 20), make_side(std::move(ub), 1 << 20), secs);
  return 0;
}
