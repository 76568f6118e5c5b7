// iWARP QP against plain TCP on loopback, in one run: RDMA WRITE bandwidth with 64 KiB
// messages against a 64 KiB write()/read() stream, and 2-byte ping-pong latency (RDMA WRITE
// polled in memory, as ib_write_lat) against a 2-byte TCP ping-pong (as qperf tcp_lat).
// Prints figures and ratios; asserts nothing.  usage: iwarp_bench [SECONDS] [crc]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "iwarp/device.h"

using namespace softrdma;
using Clock = std::chrono::steady_clock;

namespace {

struct Pair {
  int a = -1, b = -1;
};

Pair tcp_pair() {
  Pair p;
  const int l = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  ::bind(l, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  ::listen(l, 1);
  ::getsockname(l, reinterpret_cast<sockaddr*>(&addr), &len);
  p.a = ::socket(AF_INET, SOCK_STREAM, 0);
  if (::connect(p.a, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) std::exit(1);
  p.b = ::accept(l, nullptr, nullptr);
  ::close(l);
  const int one = 1;
  setsockopt(p.a, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  setsockopt(p.b, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return p;
}

double secs(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

double tcp_bw(double seconds) {
  Pair p = tcp_pair();
  std::atomic<bool> stop{false};
  std::uint64_t received = 0;
  std::thread rx([&] {
    std::vector<char> buf(65536);
    ssize_t n;
    while ((n = ::read(p.b, buf.data(), buf.size())) > 0) received += static_cast<std::uint64_t>(n);
  });
  std::vector<char> buf(65536, 'x');
  const auto t0 = Clock::now();
  while (secs(Clock::now() - t0) < seconds) {
    std::size_t off = 0;
    while (off < buf.size()) {
      const ssize_t n = ::write(p.a, buf.data() + off, buf.size() - off);
      if (n <= 0) std::exit(1);
      off += static_cast<std::size_t>(n);
    }
  }
  ::shutdown(p.a, SHUT_WR);
  rx.join();
  const double t = secs(Clock::now() - t0);
  ::close(p.a);
  ::close(p.b);
  return static_cast<double>(received) / t;
}

double tcp_lat(int iters) {
  Pair p = tcp_pair();
  std::thread echo([&] {
    char c[2];
    for (int i = 0; i < iters; ++i) {
      if (::read(p.b, c, 2) != 2 || ::write(p.b, c, 2) != 2) std::exit(1);
    }
  });
  char c[2] = {1, 2};
  const auto t0 = Clock::now();
  for (int i = 0; i < iters; ++i) {
    if (::write(p.a, c, 2) != 2 || ::read(p.a, c, 2) != 2) std::exit(1);
  }
  const double t = secs(Clock::now() - t0);
  echo.join();
  ::close(p.a);
  ::close(p.b);
  return t / iters / 2 * 1e6;  // one way, µs
}

struct Side {
  std::unique_ptr<iwarp::Device> dev;
  core::Pd* pd = nullptr;
  core::Cq* cq = nullptr;
  iwarp::Qp* qp = nullptr;
  std::vector<std::uint8_t> buf;
  std::shared_ptr<core::Mr> mr;
  void init(std::size_t bytes) {
    dev = std::make_unique<iwarp::Device>();
    pd = dev->alloc_pd();
    int err = 0;
    cq = dev->create_cq(8192, &err);
    core::QpCap cap{1024, 16, 1, 1, 0};
    qp = dev->create_qp(pd, core::QpType::kRc, cq, cq, nullptr, cap, false, &err);
    buf.assign(bytes, 0);
    mr = dev->reg_mr(pd, buf.data(), bytes, reinterpret_cast<std::uintptr_t>(buf.data()),
                     core::kAccessLocalWrite | core::kAccessRemoteWrite | core::kAccessRemoteRead,
                     &err);
  }
  ~Side() { dev.reset(); }
};

bool connect(Side& a, Side& b, bool crc) {
  Pair p = tcp_pair();
  std::atomic<int> state{0};
  iwarp::MpaParams params;
  params.crc = crc;
  b.dev->read_request(p.b, std::chrono::seconds(5), [&](const iwarp::RequestResult& r) {
    if (r.error == 0) b.dev->accept(b.qp, p.b, params, [&](int e) { state += e == 0 ? 1 : 100; });
  });
  a.dev->connect(a.qp, p.a, params, [&](const iwarp::ConnectResult& r) {
    state += r.kind == iwarp::ConnectResult::Kind::kAccepted ? 1 : 100;
  });
  const auto t0 = Clock::now();
  while (state.load() < 2 && secs(Clock::now() - t0) < 5)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return state.load() == 2;
}

void post_write(Side& s, std::uint64_t id, std::size_t off, std::uint32_t len, std::uint64_t raddr,
                std::uint32_t rkey, bool signaled) {
  core::Sge sge{reinterpret_cast<std::uintptr_t>(s.buf.data()) + off, len, s.mr->lkey};
  core::SendWr wr;
  wr.wr_id = id;
  wr.opcode = core::WrOpcode::kRdmaWrite;
  wr.send_flags = signaled ? core::kSendSignaled : 0u;
  if (len <= 64) wr.send_flags |= core::kSendInline;
  wr.sg_list = std::span<const core::Sge>(&sge, 1);
  wr.remote_addr = raddr;
  wr.rkey = rkey;
  while (s.qp->post_send(std::span<const core::SendWr>(&wr, 1)) == ENOMEM) {
    core::Wc wc[16];
    s.cq->poll(wc);
    s.dev->poll_progress();
  }
}

double iwarp_bw(double seconds, bool crc) {
  constexpr std::uint32_t kMsg = 65536;
  Side a, b;
  a.init(64 * kMsg);
  b.init(64 * kMsg);
  if (!connect(a, b, crc)) return 0;
  const std::uint64_t raddr = reinterpret_cast<std::uintptr_t>(b.buf.data());
  std::uint64_t posted = 0, completed = 0;
  constexpr std::uint64_t kWindow = 128, kSignal = 16;
  const auto t0 = Clock::now();
  while (secs(Clock::now() - t0) < seconds) {
    while (posted - completed < kWindow) {
      const bool sig = (posted + 1) % kSignal == 0;
      post_write(a, posted, (posted % 64) * kMsg, kMsg, raddr + (posted % 64) * kMsg, b.mr->rkey,
                 sig);
      ++posted;
    }
    core::Wc wc[16];
    const int n = a.cq->poll(wc);
    for (int i = 0; i < n; ++i) completed += kSignal;
    if (n == 0) a.dev->poll_progress();
  }
  // Delivery, not just hand-over to TCP: a READ completes after every WRITE before it.
  core::Sge sge{reinterpret_cast<std::uintptr_t>(a.buf.data()), 1, a.mr->lkey};
  core::SendWr rd;
  rd.wr_id = ~0ull;
  rd.opcode = core::WrOpcode::kRdmaRead;
  rd.send_flags = core::kSendSignaled;
  rd.sg_list = std::span<const core::Sge>(&sge, 1);
  rd.remote_addr = raddr;
  rd.rkey = b.mr->rkey;
  while (a.qp->post_send(std::span<const core::SendWr>(&rd, 1)) == ENOMEM) {
    core::Wc wc[16];
    a.cq->poll(wc);
  }
  for (bool done = false; !done;) {
    core::Wc wc[16];
    const int n = a.cq->poll(wc);
    for (int i = 0; i < n; ++i) done = done || wc[i].wr_id == ~0ull;
    if (n == 0) a.dev->poll_progress();
  }
  const double t = secs(Clock::now() - t0);
  return static_cast<double>(posted) * kMsg / t;
}

double iwarp_lat(int iters, bool crc) {
  Side a, b;
  a.init(4096);
  b.init(4096);
  if (!connect(a, b, crc)) return 0;
  const std::uint64_t aaddr = reinterpret_cast<std::uintptr_t>(a.buf.data());
  const std::uint64_t baddr = reinterpret_cast<std::uintptr_t>(b.buf.data());
  std::thread echo([&] {
    volatile std::uint8_t* in = b.buf.data() + 1;
    for (int i = 1; i <= iters; ++i) {
      while (*in != static_cast<std::uint8_t>(i)) b.dev->poll_progress();
      b.buf[2049] = static_cast<std::uint8_t>(i);
      post_write(b, i, 2048, 2, aaddr, a.mr->rkey, i % 64 == 0);
      core::Wc wc[4];
      b.cq->poll(wc);
    }
  });
  volatile std::uint8_t* in = a.buf.data() + 1;
  const auto t0 = Clock::now();
  for (int i = 1; i <= iters; ++i) {
    a.buf[2049] = static_cast<std::uint8_t>(i);
    post_write(a, i, 2048, 2, baddr, b.mr->rkey, i % 64 == 0);
    while (*in != static_cast<std::uint8_t>(i)) a.dev->poll_progress();
    core::Wc wc[4];
    a.cq->poll(wc);
  }
  const double t = secs(Clock::now() - t0);
  echo.join();
  return t / iters / 2 * 1e6;
}

}  // namespace

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? std::atof(argv[1]) : 2.0;
  const bool crc = argc > 2 && std::strcmp(argv[2], "crc") == 0;
  const int iters = static_cast<int>(20000 * seconds);
  const double tbw = tcp_bw(seconds);
  const double ibw = iwarp_bw(seconds, crc);
  const double tlat = tcp_lat(iters);
  const double ilat = iwarp_lat(iters, crc);
  std::printf("iWARP over loopback TCP (CRC %s), %.1f s per measure\n", crc ? "on" : "off",
              seconds);
  std::printf("%-34s %12s %12s %8s %s\n", "measure", "iwarp", "tcp", "ratio", "target");
  std::printf("%-34s %9.2f GB/s %7.2f GB/s %8.2f %s\n", "64 KiB RDMA WRITE bw / tcp_bw", ibw / 1e9,
              tbw / 1e9, ibw / tbw, ">= 0.9");
  std::printf("%-34s %10.1f us %10.1f us %8.2f %s\n", "2 B WRITE ping-pong / tcp_lat (1-way)", ilat,
              tlat, ilat / tlat, "<= 1.2");
  return 0;
}
