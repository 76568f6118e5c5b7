// The udp backend's host-local path: shared-memory rings between devices of this host.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <numeric>
#include <thread>

#include "helpers.h"
#include "netdev/icrc_pseudo.h"
#include "netdev/shm_ring.h"
#include "netdev/udp.h"
#include "tests/wait_until.h"

namespace softrdma::netdev {
namespace {

using Clock = std::chrono::steady_clock;
using softrdma::test::wait_until;
using namespace test;  // helpers.h

std::uint16_t test_port(int k) {
  return static_cast<std::uint16_t>(20000 + (getpid() * 11 + k * 5) % 20000);
}

std::unique_ptr<UdpNetdev> open_at(const char* addr, std::uint16_t& port, bool host_local = true,
                                   int base = 0) {
  std::string err;
  for (int k = base; k < base + 20; ++k) {
    port = test_port(k);
    if (auto d = UdpNetdev::open(ip(addr), err, {}, port, host_local)) return d;
  }
  ADD_FAILURE() << err;
  return nullptr;
}

OwnedPacket datagram(std::uint32_t seq, std::size_t len, const char* src, const char* dst,
                     std::uint16_t dst_port) {
  OwnedPacket p(make_datagram(seq, len), ip(src), ip(dst), 0xC000);
  p.pkt.dst_port = dst_port;
  p.pkt.traffic_class = static_cast<std::uint8_t>(seq % 64 << 2);
  p.pkt.hop_limit = static_cast<std::uint8_t>(64 - seq % 8);
  return p;
}

bool send_one(UdpNetdev& d, OwnedPacket& p) {
  Packet* ptr = &p.pkt;
  return d.send_batch(std::span(&ptr, 1)) == 1;
}

// Blocks as a progress thread does when a poll found nothing: asks for a wake-up, then waits on
// the wait fd for at most `ms`. False when that timed out.
bool sleep_on(UdpNetdev& d, int ms) {
  if (!d.prepare_sleep()) return true;  // something came meanwhile
  pollfd p{d.wait_fd(), POLLIN, 0};
  return poll(&p, 1, ms) != 0;
}

// Devices a (127.0.0.1) and b (127.0.0.2, with rings), each on a port of its own.
struct Pair {
  std::uint16_t pa = 0, pb = 0;
  std::unique_ptr<UdpNetdev> a, b;
  explicit Pair(bool a_rings = true)
      : a(open_at("127.0.0.1", pa, a_rings)), b(open_at("127.0.0.2", pb, true, 20)) {}
};

// Receives like a progress thread: poll the device, and block on its wait fd (after
// prepare_sleep) when there is nothing, for at most `ms` in all.
std::vector<std::uint32_t> receive(UdpNetdev& d, std::size_t want, int ms) {
  std::vector<std::uint32_t> seqs;
  RecvBatch rb(64);
  const auto until = Clock::now() + std::chrono::milliseconds(ms);
  while (seqs.size() < want && Clock::now() < until) {
    const std::size_t n = d.recv_batch(rb.span());
    for (std::size_t i = 0; i < n; ++i) seqs.push_back(seq_of(rb.ptrs[i]->data));
    if (n == 0) sleep_on(d, 50);
  }
  return seqs;
}

// Sends datagram 0 from `from` (device a) to `to` (device b) until one more of a's rings is in
// use (the first ones go through the kernel while b maps the ring), receiving each for up to
// wait_ms.
bool ring_up(UdpNetdev& a, const char* from, UdpNetdev& b, const char* to, std::uint16_t port,
             int wait_ms = 20) {
  const std::size_t before = a.host_local()->outbound_up();
  for (int i = 0; i < 100 && a.host_local()->outbound_up() == before; ++i) {
    auto p = datagram(0, 10, from, to, port);
    if (!send_one(a, p)) return false;
    receive(b, 1, wait_ms);
  }
  return a.host_local()->outbound_up() > before;
}

// a (127.0.0.1) to b (127.0.0.2): the ring is up, and b has read what came before it.
bool link_up(UdpNetdev& a, UdpNetdev& b, std::uint16_t pb) {
  const bool up = ring_up(a, "127.0.0.1", b, "127.0.0.2", pb, 100);
  receive(b, 100, 50);  // what is left
  return up && a.host_local()->outbound_up() == 1;
}

// Both of d's devices opened, and link_up from a to b.
bool linked(const Pair& d) {
  return d.a && d.b && link_up(*d.a, *d.b, d.pb);
}

// The switch to a ring after the receiver has long settled: a datagram that reaches the socket
// after the sender's first ring datagram was pushed still goes first, as a datagram of the same
// sender that the kernel delivered late would (loopback delivery may be deferred to a softirq).
// Without that, a UC message whose first packets came through the kernel lost its order and
// was dropped whole (ib_send_bw -c UC on a loaded host waited for it forever).
TEST(ShmLink, TheFirstDatagramOfARingWaitsForWhatTheSocketHolds) {
  Pair d;
  auto& [pa, pb, a, b] = d;
  std::uint16_t pc = 0;
  auto c = open_at("127.0.0.3", pc, false, 40);  // no rings: always the kernel's way
  ASSERT_TRUE(a && b && c);
  auto first = datagram(1, 100, "127.0.0.1", "127.0.0.2", pb);
  ASSERT_TRUE(send_one(*a, first));  // through the kernel; a asks b for a ring
  ASSERT_EQ(receive(*b, 1, 2000), std::vector<std::uint32_t>{1});
  // b attaches the ring and settles: its socket stays empty for longer than kSettle.
  RecvBatch rb(64);
  const auto until = Clock::now() + ShmLinks::kSettle * 3;
  while (Clock::now() < until) {
    ASSERT_EQ(b->recv_batch(rb.span()), 0u);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));  // time itself: a quiet window
  }
  ASSERT_EQ(b->host_local()->inbound(), 1u);
  ASSERT_FALSE(b->host_local()->settling());
  auto ring = datagram(2, 100, "127.0.0.1", "127.0.0.2", pb);
  ASSERT_TRUE(send_one(*a, ring));  // the first through the ring
  ASSERT_EQ(a->host_local()->outbound_up(), 1u);
  auto late = datagram(3, 100, "127.0.0.3", "127.0.0.2", pb);
  ASSERT_TRUE(send_one(*c, late));
  EXPECT_EQ(receive(*b, 2, 2000), (std::vector<std::uint32_t>{3, 2}));
}

TEST(ShmLink, DevicesOfThisHostSwitchToARingAndKeepEveryByte) {
  Pair d;
  auto& [pa, pb, a, b] = d;
  ASSERT_TRUE(a && b && a->host_local() && b->host_local());
  // The first datagram goes the kernel's way while the receiver maps the ring. Datagrams sent
  // meanwhile keep their order across the switch.
  for (std::uint32_t s = 0; s < 300; ++s) {
    auto p = datagram(s, 1000, "127.0.0.1", "127.0.0.2", pb);
    ASSERT_TRUE(send_one(*a, p));
    // Spread over the time the receiver takes to map the ring.
    if (s % 10 == 0) std::this_thread::sleep_for(std::chrono::microseconds(300));  // time itself
    if (s == 0) {
      EXPECT_EQ(receive(*b, 1, 2000), std::vector<std::uint32_t>{0});
    }
  }
  std::vector<std::uint32_t> in_order(299);
  std::iota(in_order.begin(), in_order.end(), 1);
  EXPECT_EQ(receive(*b, 299, 2000), in_order);
  EXPECT_EQ(b->host_local()->inbound(), 1u);
  EXPECT_EQ(a->host_local()->outbound_up(), 1u);
  const std::uint64_t before = b->counters().rx_packets;

  std::atomic<bool> rx_done{false};
  constexpr std::uint32_t kTotal = 20000;  // about 40 MiB: the 4 MiB ring wraps many times
  std::thread rx([&] {
    std::uint32_t next = 300;
    RecvBatch rb(64);
    const auto until = Clock::now() + std::chrono::seconds(20);
    while (next < kTotal && Clock::now() < until) {
      const std::size_t n = b->recv_batch(rb.span());
      for (std::size_t i = 0; i < n; ++i) {
        const Packet& p = *rb.ptrs[i];
        const std::uint32_t seq = seq_of(p.data);
        ASSERT_EQ(seq, next) << "rings keep order";
        const auto want = make_datagram(seq, seq % 4097);
        ASSERT_EQ(p.len, want.size());
        ASSERT_TRUE(std::equal(want.begin(), want.end() - 4, p.data)) << seq;
        EXPECT_EQ(p.src, ip("127.0.0.1"));
        EXPECT_EQ(p.dst, ip("127.0.0.2"));
        EXPECT_EQ(p.dst_port, pb);
        EXPECT_EQ(p.traffic_class, static_cast<std::uint8_t>(seq % 64 << 2));
        EXPECT_EQ(p.hop_limit, 64 - seq % 8);
        ++next;
      }
      if (n == 0) sleep_on(*b, 100);
    }
    EXPECT_EQ(next, kTotal);
    rx_done = true;
  });
  for (std::uint32_t s = 300; s < kTotal; s += 32) {
    std::vector<OwnedPacket> pkts;
    std::vector<Packet*> ptrs;
    pkts.reserve(32);
    for (std::uint32_t k = s; k < std::min(s + 32, kTotal); ++k) {
      pkts.push_back(datagram(k, k % 4097, "127.0.0.1", "127.0.0.2", pb));
    }
    for (auto& p : pkts) ptrs.push_back(&p.pkt);
    ASSERT_EQ(a->send_batch(ptrs), ptrs.size());
  }
  const auto until = Clock::now() + std::chrono::seconds(25);  // rx gives up after 20 s
  while (!rx_done && Clock::now() < until) {  // as a's progress thread: held datagrams go out
    a->service();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  rx.join();
  EXPECT_EQ(a->host_local()->outbound_up(), 1u);
  const Counters ca = a->counters(), cb = b->counters();
  EXPECT_EQ(ca.tx_packets, kTotal);
  EXPECT_EQ(cb.rx_packets - before, kTotal - 300);
  EXPECT_EQ(ca.tx_dropped + cb.rx_icrc_errors + cb.rx_malformed, 0u);
}

TEST(ShmLink, ASleepingReceiverIsWokenForEachDatagram) {
  Pair d;
  auto& [pa, pb, a, b] = d;
  ASSERT_TRUE(linked(d));
  // Now the receiver blocks on its wait fd with no timeout to speak of; every datagram must
  // wake it (a missed wake-up shows as a 10 s wait).
  std::atomic<int> got{0};
  std::thread rx([&] {
    RecvBatch rb(8);
    while (got < 200) {
      const std::size_t n = b->recv_batch(rb.span());
      got += static_cast<int>(n);
      if (n == 0 && !sleep_on(*b, 10000)) break;
    }
  });
  for (std::uint32_t s = 1; s <= 200; ++s) {
    auto p = datagram(s, 2, "127.0.0.1", "127.0.0.2", pb);
    const auto t0 = Clock::now();
    ASSERT_TRUE(send_one(*a, p));
    while (got < static_cast<int>(s) && Clock::now() - t0 < std::chrono::seconds(5)) {
      std::this_thread::yield();
    }
    ASSERT_EQ(got.load(), static_cast<int>(s)) << "datagram " << s << " did not wake the receiver";
  }
  rx.join();
  EXPECT_EQ(b->host_local()->inbound(), 1u);
}

// Sends datagrams first..first+n-1 of `len` bytes from a to b in batches of 32.
void send_run(UdpNetdev& a, std::uint16_t pb, std::uint32_t first, std::uint32_t n,
              std::size_t len) {
  for (std::uint32_t s = first; s < first + n; s += 32) {
    std::vector<OwnedPacket> pkts;
    std::vector<Packet*> ptrs;
    pkts.reserve(32);
    for (std::uint32_t k = s; k < std::min(s + 32, first + n); ++k) {
      pkts.push_back(datagram(k, len, "127.0.0.1", "127.0.0.2", pb));
    }
    for (auto& p : pkts) ptrs.push_back(&p.pkt);
    ASSERT_EQ(a.send_batch(ptrs), ptrs.size());
  }
}

// Reads b (in a thread) while a's progress thread would service a, until `want` datagrams came
// or 20 s passed.
std::vector<std::uint32_t> drain(UdpNetdev& a, UdpNetdev& b, std::size_t want) {
  std::atomic<bool> done{false};
  std::vector<std::uint32_t> seqs;
  std::thread rx([&] {
    seqs = receive(b, want, 20000);
    done = true;
  });
  while (!done) {
    a.service();
    const int ms = a.next_timeout_ms();
    std::this_thread::sleep_for(std::chrono::milliseconds(ms < 0 ? 1 : ms));  // a's poll timeout
  }
  rx.join();
  return seqs;
}

// A receiver that reads nothing for a while (descheduled, busy elsewhere) loses nothing: what
// its full ring cannot take waits in the sender, and goes out in order as room comes. A full
// wire would drop it, but a host-local link has no wire to blame, and RC would pay a retry
// timeout for every such loss.
TEST(ShmLink, AFullRingHoldsDatagramsUntilTheReceiverMakesRoom) {
  Pair d;
  auto& [pa, pb, a, b] = d;
  ASSERT_TRUE(linked(d));
  constexpr std::uint32_t kTotal = 12000;  // 12 MB of 1000-byte datagrams: three 4 MiB rings
  send_run(*a, pb, 1, kTotal, 1000);
  Counters ca = a->counters();
  EXPECT_GT(ca.tx_held, 0u) << "the ring should have filled";
  EXPECT_EQ(ca.tx_dropped, 0u);
  ASSERT_TRUE(a->host_local()->holding());
  EXPECT_GE(a->next_timeout_ms(), 0) << "held datagrams need service";
  EXPECT_LE(a->next_timeout_ms(), 1);

  const auto seqs = drain(*a, *b, kTotal);
  std::vector<std::uint32_t> in_order(kTotal);
  std::iota(in_order.begin(), in_order.end(), 1);
  EXPECT_EQ(seqs, in_order);
  EXPECT_FALSE(a->host_local()->holding());
  EXPECT_EQ(a->next_timeout_ms(), -1);
  ca = a->counters();
  EXPECT_EQ(ca.tx_dropped, 0u);
  EXPECT_EQ(b->counters().rx_malformed, 0u);
}

// What waits for one receiver is bounded (ShmLinks::kMaxHeld): past it, a datagram that finds
// no room within 10 ms is dropped and counted, never lost silently, and the rest keep order.
TEST(ShmLink, HeldDatagramsAreBoundedAndTheirDropsCounted) {
  Pair d;
  auto& [pa, pb, a, b] = d;
  ASSERT_TRUE(linked(d));
  constexpr std::size_t kLen = 8000;
  // The ring (4 MiB) and the cap (32 MiB), then 12 MiB more.
  constexpr std::uint32_t kTotal =
      (ShmRing::kDefaultBytes + ShmLinks::kMaxHeld + (std::size_t{12} << 20)) / kLen;
  send_run(*a, pb, 1, kTotal, kLen);
  const Counters ca = a->counters();
  EXPECT_GT(ca.tx_held, 0u);
  ASSERT_GT(ca.tx_dropped, 0u) << "past the cap, datagrams are dropped";
  EXPECT_LT(ca.tx_dropped, kTotal - ShmLinks::kMaxHeld / kLen) << "up to the cap, none";

  const auto seqs = drain(*a, *b, kTotal - ca.tx_dropped);
  EXPECT_EQ(seqs.size() + a->counters().tx_dropped, kTotal) << "every datagram came or counted";
  EXPECT_TRUE(std::is_sorted(seqs.begin(), seqs.end()));
  EXPECT_EQ(std::adjacent_find(seqs.begin(), seqs.end()), seqs.end()) << "no duplicates";
}

// A receiver that goes while datagrams wait for it: they are counted as dropped.
TEST(ShmLink, DatagramsHeldForAReceiverThatWentAreCountedAsDropped) {
  Pair d;
  auto& [pa, pb, a, b] = d;
  ASSERT_TRUE(linked(d));
  send_run(*a, pb, 1, 8000, 1000);  // 8 MB: the 4 MiB ring is full, the rest held
  const std::uint64_t held = a->counters().tx_held;
  ASSERT_GT(held, 0u);
  ASSERT_TRUE(a->host_local()->holding());
  b.reset();
  ASSERT_TRUE(wait_until(
      [&] {
        a->service();
        return !a->host_local()->holding();
      },
      std::chrono::seconds(5), std::chrono::milliseconds(1)));
  const Counters ca = a->counters();
  EXPECT_GT(ca.tx_dropped, 0u);
  EXPECT_LE(ca.tx_dropped, held);
}

// A datagram that takes a ring needs no kernel socket for its source port: QPs each with their
// own port (1,000 of them) would churn through the 64 sockets the kernel's path keeps, a
// socket made and closed for every ACK. The ports still arrive as sent.
TEST(ShmLink, RingsNeedNoSocketPerSourcePort) {
  Pair d;
  auto& [pa, pb, a, b] = d;
  ASSERT_TRUE(linked(d));
  const std::size_t before = a->send_sockets();
  std::vector<OwnedPacket> pkts;
  std::vector<Packet*> ptrs;
  for (std::uint32_t s = 0; s < 200; ++s) {
    pkts.push_back(datagram(s, 20, "127.0.0.1", "127.0.0.2", pb));
    pkts.back().pkt.src_port = static_cast<std::uint16_t>(0xE000 + s);
  }
  for (auto& p : pkts) ptrs.push_back(&p.pkt);
  ASSERT_EQ(a->send_batch(ptrs), 200u);
  EXPECT_EQ(a->send_sockets(), before);
  RecvBatch rb(64);
  std::size_t got = 0;
  ASSERT_TRUE(wait_until(
      [&] {
        const std::size_t n = b->recv_batch(rb.span());
        for (std::size_t i = 0; i < n; ++i, ++got) {
          EXPECT_EQ(rb.ptrs[i]->src_port, 0xE000 + seq_of(rb.ptrs[i]->data));
        }
        return got == 200;
      },
      std::chrono::seconds(10), std::chrono::milliseconds(1)));
}

TEST(ShmLink, WhenTheReceiverGoesTheSenderFallsBackToTheKernel) {
  Pair d;
  auto& [pa, pb, a, b] = d;
  ASSERT_TRUE(linked(d));
  auto p1 = datagram(1, 10, "127.0.0.1", "127.0.0.2", pb);
  ASSERT_TRUE(send_one(*a, p1));
  ASSERT_EQ(receive(*b, 1, 2000), std::vector<std::uint32_t>{1});
  ASSERT_EQ(a->host_local()->outbound_up(), 1u);
  b.reset();
  // A device that does not use rings takes the address: datagrams reach it through the kernel.
  std::string err;
  auto c = UdpNetdev::open(ip("127.0.0.2"), err, {}, pb, false);
  ASSERT_TRUE(c) << err;
  auto p2 = datagram(2, 10, "127.0.0.1", "127.0.0.2", pb);
  ASSERT_TRUE(send_one(*a, p2));
  EXPECT_EQ(receive(*c, 1, 2000), std::vector<std::uint32_t>{2});
  EXPECT_EQ(a->host_local()->outbound_up(), 0u);
}

// Nothing corrupts a datagram in a ring: without a trace (or faults) the sender leaves the ICRC
// out and the receiver does not check it, as with a NIC's offload. A receiver that traces gets
// it filled in; a sender that traces computes it.
TEST(ShmLink, TheIcrcIsLeftOutUnlessATraceWantsIt) {
  Pair d;
  auto& [pa, pb, a, b] = d;
  ASSERT_TRUE(linked(d));
  auto recv_one = [&](std::uint32_t seq) {
    RecvBatch rb(4);
    if (!wait_until([&] { return b->recv_batch(rb.span()) == 1; }, std::chrono::seconds(10),
                    std::chrono::milliseconds(1))) {
      ADD_FAILURE() << "datagram " << seq << " did not arrive";
      return false;
    }
    EXPECT_EQ(seq_of(rb.ptrs[0]->data), seq);
    return check_icrc(*rb.ptrs[0]);
  };
  auto p1 = datagram(1, 100, "127.0.0.1", "127.0.0.2", pb);  // its ICRC bytes are zero
  ASSERT_TRUE(send_one(*a, p1));
  EXPECT_FALSE(recv_one(1)) << "left out, and accepted all the same";
  b->require_icrc();
  auto p2 = datagram(2, 100, "127.0.0.1", "127.0.0.2", pb);
  ASSERT_TRUE(send_one(*a, p2));
  EXPECT_TRUE(recv_one(2)) << "filled in for the receiver's trace";
  a->require_icrc();
  auto p3 = datagram(3, 100, "127.0.0.1", "127.0.0.2", pb);
  ASSERT_TRUE(send_one(*a, p3));
  EXPECT_TRUE(check_icrc(p3.pkt)) << "computed by a tracing sender";
  EXPECT_TRUE(recv_one(3));
  EXPECT_EQ(b->counters().rx_icrc_errors, 0u);
}

TEST(ShmLink, OffMeansTheKernelOnly) {
  Pair d(false);
  auto& [pa, pb, a, b] = d;
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->host_local(), nullptr);
  for (std::uint32_t s = 0; s < 5; ++s) {
    auto p = datagram(s, 10, "127.0.0.1", "127.0.0.2", pb);
    ASSERT_TRUE(send_one(*a, p));
  }
  EXPECT_EQ(receive(*b, 5, 2000).size(), 5u);
  EXPECT_EQ(b->host_local()->inbound(), 0u);
}

// --- the ring itself

Packet view_of(OwnedPacket& p) {
  return p.pkt;
}

// A memfd of 4096 bytes starting with `text`, sealed against resizing unless !sealed.
int directory_file(const char* text, bool sealed = true) {
  const int fd = memfd_create("test-directory", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(ftruncate(fd, 4096), 0);
  EXPECT_EQ(pwrite(fd, text, std::strlen(text), 0), static_cast<ssize_t>(std::strlen(text)));
  if (sealed) {
    EXPECT_EQ(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW), 0);
  }
  return fd;
}

TEST(ShmLink, AWindowShowsTheReceiversDirectoryAndIsWaitedFor) {
  std::uint16_t port = 0;
  auto a = open_at("127.0.0.1", port);
  std::string err;
  auto b = UdpNetdev::open(ip("127.0.0.2"), err, {}, port);  // the port that a sends to
  ASSERT_TRUE(a && b) << err;
  const int fd = directory_file("directory!");
  ASSERT_TRUE(b->placement()->share_directory(fd));
  EXPECT_FALSE(b->placement()->share_directory(fd));  // once
  close(fd);
  PeerWindow w;
  EXPECT_FALSE(a->placement()->open_peer_window(ip("127.0.0.2"), w));  // no ring yet
  ASSERT_TRUE(link_up(*a, *b, port));
  ASSERT_TRUE(a->placement()->open_peer_window(ip("127.0.0.2"), w));
  EXPECT_EQ(w.pid(), getpid());
  ASSERT_EQ(w.directory().size(), 4096u);
  EXPECT_EQ(std::memcmp(w.directory().data(), "directory!", 10), 0);
  EXPECT_FALSE(a->placement()->open_peer_window(ip("127.0.0.3"), w));  // nobody there

  // The receiver's quiesce waits for the open window.
  ASSERT_TRUE(a->placement()->open_peer_window(ip("127.0.0.2"), w));
  std::atomic<bool> done{false};
  std::thread t([&] {
    b->placement()->quiesce_peer_writes();
    done = true;
  });
  std::this_thread::sleep_for(
      std::chrono::milliseconds(50));  // time itself: it does not return meanwhile
  EXPECT_FALSE(done);
  w.close();
  t.join();
  EXPECT_TRUE(done);

  // A refused write closes the way for good on that link.
  ASSERT_TRUE(a->placement()->open_peer_window(ip("127.0.0.2"), w));
  w.refuse();
  w.close();
  EXPECT_FALSE(a->placement()->open_peer_window(ip("127.0.0.2"), w));
  b->placement()->quiesce_peer_writes();  // returns at once: nothing open
}

TEST(ShmLink, PlacementOnlyWithTheRings) {
  std::uint16_t port = 0;
  auto a = open_at("127.0.0.1", port);
  std::string err;
  auto kernel_only = UdpNetdev::open(ip("127.0.0.2"), err, {}, port, /*host_local=*/false);
  ASSERT_TRUE(a && kernel_only) << err;
  EXPECT_NE(a->placement(), nullptr);
  EXPECT_EQ(kernel_only->placement(), nullptr);
}

TEST(ShmLink, NoWindowOntoAnUnsealedDirectoryOrWithFaults) {
  std::uint16_t port = 0;
  auto a = open_at("127.0.0.1", port);
  std::string err;
  auto b = UdpNetdev::open(ip("127.0.0.2"), err, {}, port);
  auto d = UdpNetdev::open(ip("127.0.0.4"), err, {}, port);
  FaultConfig faults;
  ASSERT_TRUE(parse_faults("delay=0.5,delay_ms=1", faults, err)) << err;
  auto c = UdpNetdev::open(ip("127.0.0.3"), err, faults, port);
  ASSERT_TRUE(a && b && c && d) << err;
  const int unsealed = directory_file("directory!", false);  // could shrink under a mapping
  ASSERT_TRUE(b->placement()->share_directory(unsealed));
  close(unsealed);
  const int sealed = directory_file("directory!");
  ASSERT_TRUE(d->placement()->share_directory(sealed));
  close(sealed);
  PeerWindow w;
  ASSERT_TRUE(ring_up(*a, "127.0.0.1", *b, "127.0.0.2", port));
  EXPECT_FALSE(a->placement()->open_peer_window(ip("127.0.0.2"), w));
  ASSERT_TRUE(ring_up(*a, "127.0.0.1", *d, "127.0.0.4", port));
  EXPECT_TRUE(a->placement()->open_peer_window(ip("127.0.0.4"), w));
  w.close();
  // With faults configured, a sender opens no window: an injected loss must lose the payload.
  ASSERT_TRUE(ring_up(*c, "127.0.0.3", *d, "127.0.0.4", port));
  EXPECT_FALSE(c->placement()->open_peer_window(ip("127.0.0.4"), w));
}

TEST(ShmRing, KeepsOrderAcrossWrapsAndRefusesWhenFull) {
  std::string err;
  auto prod = ShmRing::create(ShmRing::kMinBytes, err);
  ASSERT_TRUE(prod) << err;
  auto cons = ShmRing::attach(dup(prod->fd()), err);
  ASSERT_TRUE(cons) << err;
  std::uint32_t pushed = 0, popped = 0;
  for (int round = 0; round < 50; ++round) {
    while (true) {
      auto p = datagram(pushed, pushed * 37 % 3000, "10.0.0.1", "10.0.0.2", 4791);
      if (!prod->push(view_of(p), pushed % 3 != 0)) break;
      ++pushed;
    }
    EXPECT_GT(pushed, popped) << "an empty ring takes a datagram";
    EXPECT_FALSE(prod->publish()) << "nobody asked for a wake-up";
    Packet v;
    bool icrc_filled = false;
    // Read half of what is there, so the next round writes across the end.
    const std::uint32_t stop = popped + (pushed - popped) / 2 + 1;
    while (popped < stop && cons->peek(v, icrc_filled)) {
      ASSERT_EQ(seq_of(v.data), popped);
      ASSERT_EQ(icrc_filled, popped % 3 != 0);
      ASSERT_EQ(v.len, make_datagram(popped, popped * 37 % 3000).size());
      cons->consume();
      ++popped;
    }
    cons->release();
  }
  EXPECT_FALSE(cons->broken());
}

TEST(ShmRing, WakeUpIsAskedOnlyByASleepingConsumer) {
  std::string err;
  auto prod = ShmRing::create(ShmRing::kMinBytes, err);
  auto cons = ShmRing::attach(dup(prod->fd()), err);
  ASSERT_TRUE(prod && cons) << err;
  EXPECT_TRUE(cons->arm());
  auto p = datagram(1, 10, "10.0.0.1", "10.0.0.2", 4791);
  ASSERT_TRUE(prod->push(view_of(p), true));
  EXPECT_TRUE(prod->publish()) << "the consumer sleeps: ring its bell";
  EXPECT_TRUE(cons->wake_taken());
  EXPECT_FALSE(cons->wake_taken());
  EXPECT_FALSE(cons->arm()) << "a datagram is waiting: do not sleep";
  ASSERT_TRUE(prod->push(view_of(p), true));
  EXPECT_TRUE(prod->publish()) << "the request stood";
  EXPECT_FALSE(prod->publish()) << "and was taken once";
  Packet v;
  bool icrc_filled = false;
  while (cons->peek(v, icrc_filled)) cons->consume();
  cons->release();
  EXPECT_TRUE(cons->wake_taken());
  EXPECT_TRUE(cons->arm()) << "empty: sleep";
}

TEST(ShmRing, ACorruptRecordBreaksTheRingWithoutReadingOutsideIt) {
  std::string err;
  auto prod = ShmRing::create(ShmRing::kMinBytes, err);
  auto cons = ShmRing::attach(dup(prod->fd()), err);
  ASSERT_TRUE(prod && cons) << err;
  auto p = datagram(1, 100, "10.0.0.1", "10.0.0.2", 4791);
  ASSERT_TRUE(prod->push(view_of(p), true));
  prod->publish();
  // Overwrite the record's size with one reaching past the end of the ring.
  const std::size_t map_len = 256 + prod->bytes();
  void* m = mmap(nullptr, map_len, PROT_READ | PROT_WRITE, MAP_SHARED, prod->fd(), 0);
  ASSERT_NE(m, MAP_FAILED);
  const std::uint32_t huge = 0x7FFFFFC0;
  std::memcpy(static_cast<std::uint8_t*>(m) + 256, &huge, sizeof huge);
  Packet v;
  bool icrc_filled = false;
  EXPECT_FALSE(cons->peek(v, icrc_filled));
  EXPECT_TRUE(cons->broken());
  munmap(m, map_len);
}

TEST(ShmRing, AttachRefusesAnUnsealedOrForeignFile) {
  std::string err;
  const int fd = memfd_create("not-a-ring", MFD_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, 256 + ShmRing::kMinBytes), 0);
  EXPECT_EQ(ShmRing::attach(fd, err), nullptr);
  EXPECT_NE(err.find("sealed"), std::string::npos) << err;
  const int fd2 = memfd_create("zeros", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  ASSERT_EQ(ftruncate(fd2, 256 + ShmRing::kMinBytes), 0);
  ASSERT_EQ(fcntl(fd2, F_ADD_SEALS, F_SEAL_SHRINK), 0);
  EXPECT_EQ(ShmRing::attach(fd2, err), nullptr);
  EXPECT_NE(err.find("bad header"), std::string::npos) << err;
}

}  // namespace
}  // namespace softrdma::netdev
