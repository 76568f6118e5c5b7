// Engine scale benchmark: 10,000 RC QPs in one process (5,000 connected pairs between two
// devices on the in-memory fabric), all idle: resident memory and heap per QP, the time of a
// progress pass and the process's CPU while idle, with 1 pair and with all; then RDMA WRITE
// bandwidth (64 KiB, round-robin) over 1 and over 1,000 active QP pairs, on the in-memory fabric
// and over UDP on loopback. Prints figures; asserts nothing.
//   rxe_scale_bench [SECONDS] [IDLE_QPS] [ACTIVE_QPS]   (0 skips that part)
#include <malloc.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "bench/rxe_sides.h"
#include "netdev/memory.h"
#include "netdev/udp.h"

using namespace softrdma;
using namespace softrdma::bench;

namespace {

// The pairs beyond the sides' own QPs: created, connected, destroyed with the object.
struct Pairs {
  Side& a;
  Side& b;
  std::vector<Qp*> qa, qb;
  // Adds pairs until there are n in all (the sides' own QPs are the first); false on a failure.
  bool grow(std::size_t n, const QpCap& cap) {
    if (qa.empty()) {
      qa.push_back(a.qp);
      qb.push_back(b.qp);
    }
    int err = 0;
    while (qa.size() < n) {
      QpCap c = cap;
      Qp* x = a.dev->create_qp(a.pd, QpType::kRc, a.cq, a.cq, nullptr, c, false, &err);
      c = cap;
      Qp* y =
          x ? b.dev->create_qp(b.pd, QpType::kRc, b.cq, b.cq, nullptr, c, false, &err) : nullptr;
      if (!y) {
        std::printf("  create_qp %zu: errno %d\n", 2 * qa.size(), err);
        if (x) a.dev->destroy_qp(x);
        return false;
      }
      connect_qp(x, y->qpn(), b.dev->gids()[0], 100);
      connect_qp(y, x->qpn(), a.dev->gids()[0], 100);
      qa.push_back(x);
      qb.push_back(y);
    }
    return true;
  }
  ~Pairs() {
    for (std::size_t i = 1; i < qa.size(); ++i) {
      a.dev->destroy_qp(qa[i]);
      b.dev->destroy_qp(qb[i]);
    }
  }
};

double cpu_seconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

// ns per progress pass (poll_progress on a: receive, the active QPs, timers, transmit).
double pass_ns(Side& s) {
  constexpr int kPasses = 20000;
  const auto t0 = Clock::now();
  for (int i = 0; i < kPasses; ++i) s.dev->poll_progress();
  return std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / kPasses;
}

// The CPU this process's threads (the two progress threads) use while the main thread sleeps.
double idle_cpu_percent(double secs) {
  const double c0 = cpu_seconds();
  std::this_thread::sleep_for(std::chrono::duration<double>(secs));
  return (cpu_seconds() - c0) / secs * 100.0;
}

void idle_qps(std::size_t n, double secs) {
  auto fabric = std::make_shared<netdev::MemoryFabric>();
  Side a = make_side(
      std::make_unique<netdev::MemoryNetdev>(fabric, netdev::IpAddr::v4(0xC0000301), 9000), 4096);
  Side b = make_side(
      std::make_unique<netdev::MemoryNetdev>(fabric, netdev::IpAddr::v4(0xC0000302), 9000), 4096);
  connect(a, b);
  const double one_ns = pass_ns(a);
  const double one_cpu = idle_cpu_percent(secs);
  const std::size_t rss0 = rss_bytes();
  const std::size_t heap0 = mallinfo2().uordblks;
  Pairs p{a, b, {}, {}};
  if (!p.grow(n / 2, QpCap{128, 128, 1, 1, 0})) return;
  const std::size_t heap1 = mallinfo2().uordblks;
  const std::size_t rss1 = rss_bytes();
  const double many_ns = pass_ns(a);
  const double many_cpu = idle_cpu_percent(secs);
  const double qps = static_cast<double>(2 * (p.qa.size() - 1));
  std::printf(
      "idle RC QPs: %zu connected in RTS (queues of 128 WRs): %.2f KiB resident, %.2f KiB heap "
      "each\n",
      2 * p.qa.size(), static_cast<double>(rss1 - rss0) / 1024.0 / qps,
      static_cast<double>(heap1 - heap0) / 1024.0 / qps);
  std::printf(
      "idle progress pass: %.0f ns with 2 QPs, %.0f ns with %zu; process CPU while idle: "
      "%.1f%% with 2 QPs, %.1f%% with %zu\n",
      one_ns, many_ns, 2 * p.qa.size(), one_cpu, many_cpu, 2 * p.qa.size());
}

// The devices' non-zero counters, a's then b's: why a run failed.
void print_counters(Side& a, Side& b) {
  for (Side* s : {&a, &b}) {
    for (const auto& [k, v] : s->dev->hw_counters()) {
      if (v != 0) std::printf(" %s=%llu", k.c_str(), static_cast<unsigned long long>(v));
    }
    std::printf(s == &a ? " |" : "\n");
  }
}

// RDMA WRITE bandwidth (64 KiB) over n RC QP pairs, 1024 writes in flight in all, spread evenly
// and posted round-robin; MB/s, or -1 on an error (printed).
double active_bw(Side& a, Side& b, std::size_t n, double secs) {
  Pairs p{a, b, {}, {}};
  if (!p.grow(n, QpCap{1024, 16, 1, 1, 0})) return -1;
  constexpr std::uint32_t kSize = 65536;
  const WriteWr write(a, b, kSize);
  const SendWr& w = write.wr;
  const std::size_t depth = std::max<std::size_t>(1, 1024 / n);
  std::vector<std::size_t> inflight(n, 0);
  std::unordered_map<std::uint32_t, std::size_t> index;
  for (std::size_t k = 0; k < n; ++k) index[p.qa[k]->qpn()] = k;
  std::uint64_t done = 0;
  Wc wc[64];
  const auto start = Clock::now();
  const auto end = start + std::chrono::duration<double>(secs);
  while (Clock::now() < end) {
    for (std::size_t k = 0; k < n; ++k) {
      while (inflight[k] < depth && p.qa[k]->post_send(w) == 0) ++inflight[k];
    }
    a.dev->poll_progress();
    b.dev->poll_progress();
    const int r = a.cq->poll(std::span(wc, 64));
    if (r < 0) return -1;
    for (int i = 0; i < r; ++i) {
      if (wc[i].status != WcStatus::kSuccess) {
        std::printf("  QP %#x: completion status %d after %llu writes;", wc[i].qp_num,
                    static_cast<int>(wc[i].status), static_cast<unsigned long long>(done));
        print_counters(a, b);
        return -1;
      }
      --inflight[index.at(wc[i].qp_num)];
    }
    done += static_cast<std::uint64_t>(r);
  }
  const double s = std::chrono::duration<double>(Clock::now() - start).count();
  std::size_t left = 0;
  for (std::size_t k : inflight) left += k;
  while (left > 0) {  // none still writing into b when the pairs go
    a.dev->poll_progress();
    b.dev->poll_progress();
    const int r = a.cq->poll(std::span(wc, 64));
    for (int i = 0; i < r; ++i) {
      if (wc[i].status != WcStatus::kSuccess) {
        std::printf("  QP %#x: completion status %d after the end;", wc[i].qp_num,
                    static_cast<int>(wc[i].status));
        print_counters(a, b);
        return -1;
      }
    }
    if (r < 0) return -1;
    left -= static_cast<std::size_t>(r);
  }
  return static_cast<double>(done) * kSize / s / 1e6;
}

template <typename MakeNetdev>
void active_qps(const char* name, MakeNetdev make, std::size_t n, double secs) {
  double bw[2] = {0, 0};
  const std::size_t counts[2] = {1, n};
  for (int i = 0; i < 2; ++i) {
    Side a = make_side(make(0), 1 << 20), b = make_side(make(1), 1 << 20);
    if (!a.dev || !b.dev) return;
    connect(a, b);
    bw[i] = active_bw(a, b, counts[i], secs);
  }
  std::printf(
      "%-7s write bw 64 KiB, 1024 in flight: %8.1f MB/s over 1 QP, %8.1f MB/s over %zu "
      "(%.2fx)\n",
      name, bw[0], bw[1], n, bw[0] > 0 ? bw[1] / bw[0] : 0.0);
}

}  // namespace

int main(int argc, char** argv) {
  const double secs = argc > 1 ? std::atof(argv[1]) : 2.0;
  const std::size_t idle = argc > 2 ? std::strtoul(argv[2], nullptr, 10) : 10000;
  const std::size_t active = argc > 3 ? std::strtoul(argv[3], nullptr, 10) : 1000;
  if (idle > 0) idle_qps(idle, secs);
  if (active == 0) return 0;  // the idle figures only
  auto fabric = std::make_shared<netdev::MemoryFabric>();
  active_qps(
      "memory",
      [&](int i) {
        return std::make_unique<netdev::MemoryNetdev>(
            fabric, netdev::IpAddr::v4(0xC0000201 + static_cast<std::uint32_t>(i)), 9000);
      },
      active, secs);
  const auto port = static_cast<std::uint16_t>(30000 + getpid() % 20000);
  active_qps(
      "udp",
      [&](int i) -> std::unique_ptr<netdev::Netdev> {
        std::string err;
        auto nd = netdev::UdpNetdev::open(
            netdev::IpAddr::v4(0x7F000003 + static_cast<std::uint32_t>(i)), err, {}, port);
        if (!nd) {
          std::fprintf(stderr, "udp: %s\n", err.c_str());
          std::exit(1);
        }
        return nd;
      },
      active, secs);
  return 0;
}
