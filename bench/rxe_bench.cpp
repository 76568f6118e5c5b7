// Engine benchmark: RC WRITE bandwidth and SEND ping-pong latency through the
// rxe C++ API, over the in-memory fabric (engine cost alone) and over UDP
// sockets on loopback (engine + kernel); then what idle RC QPs cost (memory each, and the
// time of a progress pass with 1 and with 10,000 of them). Prints figures; asserts nothing.
//   rxe_bench [SECONDS]
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "netdev/memory.h"
#include "netdev/udp.h"
#include "rxe/device.h"

using namespace softrdma;
using namespace softrdma::rxe;
using Clock = std::chrono::steady_clock;

namespace {

constexpr std::uint32_t kAccess =
    kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic;

struct Side {
  std::vector<std::uint8_t> buf;  // first: it outlives the device, which may still write to it
  std::unique_ptr<Device> dev;
  Pd* pd;
  Cq* cq;
  Qp* qp;
  std::shared_ptr<Mr> mr;
};

Side make_side(std::unique_ptr<netdev::Netdev> nd, std::size_t bytes) {
  Side s;
  s.dev = std::make_unique<Device>(std::move(nd));
  s.pd = s.dev->alloc_pd();
  int err = 0;
  s.cq = s.dev->create_cq(65536, &err);
  QpCap cap{4096, 4096, 4, 4, 64};
  s.qp = s.dev->create_qp(s.pd, QpType::kRc, s.cq, s.cq, nullptr, cap, false, &err);
  s.buf.assign(bytes, 1);
  s.mr = s.dev->reg_mr(s.pd, s.buf.data(), bytes, reinterpret_cast<std::uint64_t>(s.buf.data()),
                       kAccess, &err);
  return s;
}

// Takes `q` to RTS toward QP `dest_qpn` at `dgid`.
void connect_qp(Qp* q, std::uint32_t dest_qpn, const Gid& dgid, std::uint32_t psn) {
  QpAttr x;
  x.qp_state = QpState::kInit;
  x.port_num = 1;
  x.qp_access_flags = kAccess;
  q->modify(x, kQpState | kQpPkeyIndex | kQpPort | kQpAccessFlags);
  x.qp_state = QpState::kRtr;
  x.path_mtu = Mtu::k4096;
  x.dest_qp_num = dest_qpn;
  x.rq_psn = psn;
  x.max_dest_rd_atomic = 16;
  x.min_rnr_timer = 1;
  x.ah_attr.dgid = dgid;
  q->modify(x, kQpState | kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn | kQpMaxDestRdAtomic |
                   kQpMinRnrTimer);
  x.qp_state = QpState::kRts;
  x.sq_psn = psn;
  x.timeout = 14;
  x.retry_cnt = 7;
  x.rnr_retry = 7;
  x.max_rd_atomic = 16;
  q->modify(x, kQpState | kQpSqPsn | kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpMaxQpRdAtomic);
}

void connect(Side& a, Side& b) {
  connect_qp(a.qp, b.qp->qpn(), b.dev->gids()[0], 100);
  connect_qp(b.qp, a.qp->qpn(), a.dev->gids()[0], 100);
}

int poll(Side& s, std::size_t n) {
  Wc wc[64];
  std::size_t got = 0;
  while (got < n) {
    s.dev->poll_progress();
    const int r = s.cq->poll(std::span(wc, std::min<std::size_t>(64, n - got)));
    if (r < 0) return -1;
    for (int i = 0; i < r; ++i)
      if (wc[i].status != WcStatus::kSuccess) return -1;
    got += static_cast<std::size_t>(r);
  }
  return 0;
}

double write_bw(Side& a, Side& b, std::uint32_t size, double secs) {
  const Sge sge{reinterpret_cast<std::uint64_t>(a.buf.data()), size, a.mr->lkey};
  SendWr w;
  w.opcode = WrOpcode::kRdmaWrite;
  w.sg_list = std::span(&sge, 1);
  w.remote_addr = reinterpret_cast<std::uint64_t>(b.buf.data());
  w.rkey = b.mr->rkey;
  w.send_flags = kSendSignaled;
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

// Resident memory of this process in bytes (/proc/self/statm).
std::size_t rss_bytes() {
  std::ifstream f("/proc/self/statm");
  std::size_t pages = 0, resident = 0;
  f >> pages >> resident;
  return resident * static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
}

// N RC QPs in RTS toward a peer that never answers, all idle: memory per QP, and how long a
// progress pass (poll_progress, which also fires timers) takes with them.
void idle_qps(std::size_t n) {
  auto fabric = std::make_shared<netdev::MemoryFabric>();
  Side s = make_side(
      std::make_unique<netdev::MemoryNetdev>(fabric, netdev::IpAddr::v4(0xC0000301), 9000), 4096);
  auto pass_ns = [&] {
    constexpr int kPasses = 2000;
    const auto t0 = Clock::now();
    for (int i = 0; i < kPasses; ++i) s.dev->poll_progress();
    return std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / kPasses;
  };
  const double one = pass_ns();
  const std::size_t before = rss_bytes();
  std::vector<Qp*> qps;
  int err = 0;
  for (std::size_t i = 0; i < n; ++i) {
    QpCap cap{128, 128, 1, 1, 0};
    Qp* q = s.dev->create_qp(s.pd, QpType::kRc, s.cq, s.cq, nullptr, cap, false, &err);
    if (!q) {
      std::printf("idle QPs: create_qp %zu failed (errno %d)\n", i, err);
      break;
    }
    // Toward QPs nobody has: they stay idle.
    connect_qp(q, 0x100 + static_cast<std::uint32_t>(i), s.dev->gids()[0], 100);
    qps.push_back(q);
  }
  const std::size_t after = rss_bytes();
  const double many = pass_ns();
  std::printf(
      "idle RC QPs: %zu in RTS, %.1f KiB resident each (send/recv queues of 128); "
      "progress pass %.0f ns with 1 QP, %.0f ns with %zu\n",
      qps.size(),
      qps.empty() ? 0.0
                  : static_cast<double>(after - before) / 1024.0 / static_cast<double>(qps.size()),
      one, many, qps.size());
  for (Qp* q : qps) s.dev->destroy_qp(q);
}

// RDMA WRITE bandwidth (64 KiB) over `n` RC QP pairs between two devices, 1024 writes in flight
// in all, spread evenly: what many active QPs cost against one.
double many_qps_bw(Side& a, Side& b, std::size_t n, double secs) {
  std::vector<Qp*> qa{a.qp}, qb{b.qp};
  int err = 0;
  for (std::size_t i = 1; i < n; ++i) {
    QpCap cap{1024, 16, 1, 1, 0};
    qa.push_back(a.dev->create_qp(a.pd, QpType::kRc, a.cq, a.cq, nullptr, cap, false, &err));
    qb.push_back(b.dev->create_qp(b.pd, QpType::kRc, b.cq, b.cq, nullptr, cap, false, &err));
    if (!qa.back() || !qb.back()) {
      std::printf("  create_qp %zu: errno %d\n", i, err);
      return -1;
    }
    connect_qp(qa.back(), qb.back()->qpn(), b.dev->gids()[0], 100);
    connect_qp(qb.back(), qa.back()->qpn(), a.dev->gids()[0], 100);
  }
  constexpr std::uint32_t kSize = 65536;
  const Sge sge{reinterpret_cast<std::uint64_t>(a.buf.data()), kSize, a.mr->lkey};
  SendWr w;
  w.opcode = WrOpcode::kRdmaWrite;
  w.sg_list = std::span(&sge, 1);
  w.remote_addr = reinterpret_cast<std::uint64_t>(b.buf.data());
  w.rkey = b.mr->rkey;
  w.send_flags = kSendSignaled;
  const std::size_t depth = std::max<std::size_t>(1, 1024 / n);
  std::vector<std::size_t> inflight(n, 0);
  std::unordered_map<std::uint32_t, std::size_t> index;
  for (std::size_t k = 0; k < n; ++k) index[qa[k]->qpn()] = k;
  std::uint64_t done = 0;
  Wc wc[64];
  const auto start = Clock::now();
  const auto end = start + std::chrono::duration<double>(secs);
  std::size_t next = 0;
  while (Clock::now() < end) {
    for (std::size_t k = 0; k < n; ++k, next = (next + 1) % n) {
      while (inflight[next] < depth && qa[next]->post_send(w) == 0) ++inflight[next];
    }
    a.dev->poll_progress();
    b.dev->poll_progress();
    const int r = a.cq->poll(std::span(wc, 64));
    if (r < 0) return -1;
    for (int i = 0; i < r; ++i) {
      if (wc[i].status != WcStatus::kSuccess) {
        std::printf("  QP %#x: completion status %d after %llu writes\n", wc[i].qp_num,
                    static_cast<int>(wc[i].status), static_cast<unsigned long long>(done));
        return -1;
      }
      --inflight[index.at(wc[i].qp_num)];
    }
    done += static_cast<std::uint64_t>(r);
  }
  const double s = std::chrono::duration<double>(Clock::now() - start).count();
  std::size_t left = 0;
  for (std::size_t k : inflight) left += k;
  if (poll(a, left) != 0) return -1;  // none still writing into b when the sides go
  return static_cast<double>(done) * kSize / s / 1e6;
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
  for (std::size_t n : {1, 1000}) {
    auto ma = netdev::UdpNetdev::open(netdev::IpAddr::v4(0x7F000003), err, {}, port);
    auto mb = netdev::UdpNetdev::open(netdev::IpAddr::v4(0x7F000004), err, {}, port);
    if (!ma || !mb) {
      std::fprintf(stderr, "udp: %s\n", err.c_str());
      return 1;
    }
    Side a = make_side(std::move(ma), 1 << 20), b = make_side(std::move(mb), 1 << 20);
    connect(a, b);
    std::printf("udp      write bw 64 KiB over %4zu RC QPs, 1024 writes in flight: %8.1f MB/s\n", n,
                many_qps_bw(a, b, n, secs));
  }
  idle_qps(10000);
  return 0;
}
