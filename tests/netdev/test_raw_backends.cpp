// The raw Ethernet backends (AF_PACKET, AF_XDP, DPDK) across two network namespaces joined by a
// veth pair that the test creates (and always deletes): each against itself, and against the UDP
// backend and each other both ways (wire compatibility). Each side runs in a forked child that
// has entered its namespace. A side that cannot open its backend for want of a privilege or a
// kernel feature reports "skip: REASON", and the test is skipped with it.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <string>

#include "helpers.h"
#include "netdev/backends.h"
#include "tests/run_command.h"

namespace softrdma::netdev {
namespace {

using namespace test;  // helpers.h

constexpr const char* kAddrA = "10.97.1.1";
constexpr const char* kAddrB = "10.97.1.2";
constexpr const char* kVlanAddrA = "10.97.11.1";
constexpr const char* kVlanAddrB = "10.97.11.2";
constexpr const char* kOwnAddrA = "10.97.12.1";  // configured on no interface
constexpr const char* kOwnAddrB = "10.97.12.2";
constexpr const char* kAddr6A = "fd97:1::1";  // on the veth ends (no duplicate detection)
constexpr const char* kAddr6B = "fd97:1::2";
constexpr const char* kOwnAddr6A = "fd97:12::1";  // configured on no interface
constexpr const char* kOwnAddr6B = "fd97:12::2";
constexpr std::uint16_t kVlan = 5;
constexpr std::uint32_t kCount = 10;  // datagrams of several sizes, one per send_batch
constexpr std::uint32_t kRun = 8;     // then equal ones in one batch (UDP GSO on the UDP backend)
constexpr std::uint32_t kRunFirst = 50;

// Set by exchange() for a jumbo run (MTU 9000 on the veth), before the sides fork.
bool g_jumbo = false;

// Datagram i: several sizes, then equal ones; on a jumbo link up to 8 KiB, which an AF_XDP frame
// carries in three UMEM chunks, and the run in two (an RoCE packet of MTU 4096).
std::size_t size_of(std::uint32_t i) {
  if (g_jumbo) return i < kCount ? 16 + 911 * i : 4096 + 28;
  return i < kCount ? 16 + 97 * i : 256;
}
std::uint16_t port_of(std::uint32_t i) {
  return static_cast<std::uint16_t>(0xC100 + (i < kCount ? i : kRunFirst));
}

bool run(const std::string& cmd) {
  return softrdma::test::succeeds(cmd);
}

// Two namespaces, "<prefix>-a" and "<prefix>-b", with veth0 (10.97.1.1/24) in a and veth1
// (10.97.1.2/24) in b. Deleting the namespaces (in the destructor) deletes the pair.
struct VethPair {
  std::string a, b, error;
  // `segment`: the kernel segments UDP GSO datagrams before the veth, as a NIC would on the
  // wire (DPDK's af_packet PMD cannot split them).
  // `vlan`: also a VLAN interface of that ID over each end (veth0.ID with kVlanAddrA, veth1.ID
  // with kVlanAddrB), the kernel's own 802.1Q.
  // `mtu`: the veth ends' MTU.
  explicit VethPair(bool segment = false, std::optional<std::uint16_t> vlan = {},
                    std::uint32_t mtu = 1500) {
    const std::string prefix = "sr7-raw-" + std::to_string(getpid());
    a = prefix + "-a";
    b = prefix + "-b";
    if (!run("ip netns add " + a) || !run("ip netns add " + b)) {
      error = "cannot create network namespaces";
      return;
    }
    bool ok = run("ip link add veth0 netns " + a + " type veth peer name veth1 netns " + b) &&
              run("ip -n " + a + " addr add " + kAddrA + "/24 dev veth0") &&
              run("ip -n " + b + " addr add " + kAddrB + "/24 dev veth1") &&
              run("ip -n " + a + " addr add " + kAddr6A + "/64 dev veth0 nodad") &&
              run("ip -n " + b + " addr add " + kAddr6B + "/64 dev veth1 nodad") &&
              run("ip -n " + a + " link set veth0 mtu " + std::to_string(mtu)) &&
              run("ip -n " + b + " link set veth1 mtu " + std::to_string(mtu)) &&
              run("ip -n " + a + " link set veth0 up") &&
              run("ip -n " + b + " link set veth1 up") && run("ip -n " + a + " link set lo up") &&
              run("ip -n " + b + " link set lo up");
    if (ok && vlan) {
      const std::string id = std::to_string(*vlan);
      ok = run("ip -n " + a + " link add link veth0 name veth0." + id + " type vlan id " + id) &&
           run("ip -n " + b + " link add link veth1 name veth1." + id + " type vlan id " + id) &&
           run("ip -n " + a + " addr add " + kVlanAddrA + "/24 dev veth0." + id) &&
           run("ip -n " + b + " addr add " + kVlanAddrB + "/24 dev veth1." + id) &&
           run("ip -n " + a + " link set veth0." + id + " up") &&
           run("ip -n " + b + " link set veth1." + id + " up");
      if (!ok) error = "cannot create VLAN interfaces (no 802.1Q in this kernel?)";
      if (!ok) return;
    }
    if (ok && segment) {
      // gso_max_size too: a packet socket's GSO frames carry no segment count.
      ok = run("ip -n " + a + " link set dev veth0 gso_max_segs 1 gso_max_size 512") &&
           run("ip -n " + b + " link set dev veth1 gso_max_segs 1 gso_max_size 512");
    }
    if (!ok) error = "cannot create the veth pair";
  }
  ~VethPair() {
    run("ip netns del " + a);
    run("ip netns del " + b);
  }
};

enum class Kind { kAfPacket, kAfXdp, kDpdk, kUdp };

// What Netdev::backend() says for each kind, in Kind's order.
constexpr const char* kBackendNames[] = {"af_packet", "af_xdp", "dpdk", "udp"};

const char* backend_of(Kind k) {
  return kBackendNames[static_cast<int>(k)];
}

// An open failure the machine, not the code, is to blame for.
bool environmental(const std::string& error) {
  for (const char* why :
       {"needs CAP_", "does not support", "a kernel without", "EAL could not start"}) {
    if (error.find(why) != std::string::npos) return true;
  }
  return false;
}

// Waits on `d` until `done` says so or `ms` pass, servicing it and handing received packets to
// `got`.
void pump(Netdev& d, int ms, const std::function<void(const Packet&)>& got,
          const std::function<bool()>& done) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  RecvBatch batch(16);
  while (!done() && std::chrono::steady_clock::now() < end) {
    int t = d.next_timeout_ms();
    t = t < 0 || t > 20 ? 20 : t;
    pollfd p{d.wait_fd(), POLLIN, 0};
    poll(&p, 1, t);
    d.service();
    const std::size_t n = d.recv_batch(batch.span());
    for (std::size_t i = 0; i < n; ++i) got(*batch.ptrs[i]);
  }
}

// Set by exchange() for a VLAN run, before the sides fork: the raw backends tag their frames
// with this VLAN ID, and use the VLAN interfaces' addresses.
std::optional<std::uint16_t> g_vlan;

std::unique_ptr<Netdev> open_dev(Kind kind, const std::string& ifname, const IpAddr& me,
                                 std::string& error, FaultConfig faults = {}) {
  if (kind == Kind::kUdp) return UdpNetdev::open(me, error, faults);
  IpAddr found;
  if (!AfPacketNetdev::interface_ipv4(ifname, found, error)) return nullptr;
  if (found != me && me.is_v4() && !g_vlan) {
    error = "interface_ipv4 found " + found.str();
    return nullptr;
  }
  if (kind == Kind::kDpdk) {
#ifdef SOFTRDMA_HAVE_DPDK
    return DpdkNetdev::open("net_af_packet0,iface=" + ifname, me, error, faults, g_vlan);
#else
    error = "this build has no DPDK backend (needs libdpdk-dev): does not support";
    return nullptr;
#endif
  }
  if (kind == Kind::kAfXdp) {
#ifdef SOFTRDMA_HAVE_AF_XDP
    return AfXdpNetdev::open(ifname, me, error, faults, g_vlan);
#else
    error =
        "this build has no AF_XDP backend (needs libxdp-dev, libbpf-dev, clang): does not support";
    return nullptr;
#endif
  }
  return AfPacketNetdev::open(ifname, me, error, faults, g_vlan);
}

// One side: open the device, say ready, wait for go, send kCount datagrams (PSN base + i) one by
// one and kRun in one batch to the peer, receive the peer's, checking content and addressing. With
// `corrupt`, then reopen with every packet corrupted and send 3 more, which the peer must count as
// ICRC errors.
std::string side(Kind kind, const std::string& ifname, const IpAddr& me, const IpAddr& peer,
                 std::uint32_t base, std::uint32_t peer_base, bool send_corrupt,
                 std::uint32_t expect_icrc_errors, int ready_fd, int go_fd) {
  std::string error;
  auto d = open_dev(kind, ifname, me, error);
  if (!d) return (environmental(error) ? "skip: " : "open: ") + error;
  if (d->backend() != backend_of(kind)) return "backend " + d->backend();
#ifdef SOFTRDMA_HAVE_AF_XDP
  // veth has no zero-copy AF_XDP: the socket must have fallen back to copy mode.
  if (kind == Kind::kAfXdp && static_cast<AfXdpNetdev&>(*d).zero_copy()) return "zero-copy on veth";
  if (g_jumbo && kind == Kind::kAfXdp && !static_cast<AfXdpNetdev&>(*d).multi_buffer()) {
    return "skip: a kernel without multi-buffer AF_XDP (XDP_USE_SG, Linux 6.6)";
  }
#endif
  if (g_jumbo && d->mtu() < 9000) return "MTU " + std::to_string(d->mtu()) + " on a jumbo link";
  (void)!write(ready_fd, "r", 1);
  char c;
  if (read(go_fd, &c, 1) != 1) return "no go";
  for (std::uint32_t i = 0; i < kCount; ++i) {
    OwnedPacket p(make_datagram(base + i, size_of(i)), me, peer, port_of(i));
    p.pkt.traffic_class = 0x20;
    p.pkt.hop_limit = 33;
    Packet* one = &p.pkt;
    if (d->send_batch(std::span<Packet* const>(&one, 1)) != 1) return "send refused";
  }
  std::vector<OwnedPacket> run;
  std::vector<Packet*> ptrs;
  run.reserve(kRun);
  for (std::uint32_t i = kRunFirst; i < kRunFirst + kRun; ++i) {
    run.emplace_back(make_datagram(base + i, size_of(i)), me, peer, port_of(i));
    run.back().pkt.traffic_class = 0x20;
    run.back().pkt.hop_limit = 33;
  }
  for (auto& o : run) ptrs.push_back(&o.pkt);
  if (d->send_batch(ptrs) != kRun) return "batch refused";
  constexpr std::uint32_t kWant = kCount + kRun;
  std::uint32_t got = 0;
  std::string bad;
  auto check = [&](const Packet& p) {
    const std::uint32_t seq = seq_of(p.data);
    const std::uint32_t i = seq - peer_base;
    if (i >= kCount && (i < kRunFirst || i >= kRunFirst + kRun)) {
      bad = "unexpected PSN " + std::to_string(seq);
      return;
    }
    const auto want = make_datagram(seq, size_of(i));
    if (p.len != want.size() || std::memcmp(p.data, want.data(), want.size() - 4) != 0) {
      bad = "datagram " + std::to_string(i) + " differs";
    } else if (p.src != peer || p.dst != me) {
      bad = "addresses " + p.src.str() + " -> " + p.dst.str();
    } else if (p.src_port != port_of(i) || p.dst_port != kRoceV2Port) {
      bad = "ports " + std::to_string(p.src_port) + " -> " + std::to_string(p.dst_port);
    } else if (p.traffic_class != 0x20 || p.hop_limit != 33) {
      bad = "tos/ttl " + std::to_string(p.traffic_class) + "/" + std::to_string(p.hop_limit);
    }
    ++got;
  };
  // Until ours have gone too: a backend resolving its peer through the kernel's table may still
  // hold them when the peer's have all arrived.
  pump(*d, 5000, check, [&] { return got >= kWant && d->counters().tx_packets >= kWant; });
  if (!bad.empty()) return bad;
  if (got != kWant) {
    const Counters k = d->counters();
    return "received " + std::to_string(got) + " of " + std::to_string(kWant) + " (rx_malformed " +
           std::to_string(k.rx_malformed) + ", rx_icrc_errors " + std::to_string(k.rx_icrc_errors) +
           ", rx_not_ours " + std::to_string(k.rx_not_ours) + ", tx_dropped " +
           std::to_string(k.tx_dropped) + ", tx_packets " + std::to_string(k.tx_packets) + ")";
  }
  if (send_corrupt) {
    d.reset();
    FaultConfig f;
    f.corrupt = 1;
    f.seed = 7;
    f.seeded = true;
    d = open_dev(kind, ifname, me, error, f);
    if (!d) return "reopen: " + error;
    for (std::uint32_t i = 0; i < 3; ++i) {
      OwnedPacket p(make_datagram(base + 100 + i, 64), me, peer);
      Packet* one = &p.pkt;
      if (d->send_batch(std::span<Packet* const>(&one, 1)) != 1) return "corrupt send refused";
    }
    pump(
        *d, 300, [](const Packet&) {}, [] { return false; });  // answers ARP meanwhile
  }
  if (expect_icrc_errors > 0) {
    pump(*d, 3000, check, [&] { return d->counters().rx_icrc_errors >= expect_icrc_errors; });
    if (d->counters().rx_icrc_errors != expect_icrc_errors) {
      return "rx_icrc_errors " + std::to_string(d->counters().rx_icrc_errors);
    }
    if (got != kWant) return "a corrupted datagram was delivered";
  } else if (d->counters().rx_icrc_errors != 0) {
    return "rx_icrc_errors " + std::to_string(d->counters().rx_icrc_errors);
  }
  // Stay a little so the peer's last packets and ARP get answered.
  pump(
      *d, 300, [](const Packet&) {}, [] { return false; });
  return "";
}

struct Child {
  pid_t pid = -1;
  int report = -1, ready = -1, go = -1;
};

Child start(const std::string& ns, const std::function<std::string(int, int)>& body) {
  Child c;
  int rep[2], rdy[2], go[2];
  if (pipe2(rep, O_CLOEXEC) != 0 || pipe2(rdy, O_CLOEXEC) != 0 || pipe2(go, O_CLOEXEC) != 0) {
    return c;
  }
  const int nsfd = open(("/run/netns/" + ns).c_str(), O_RDONLY | O_CLOEXEC);
  c.pid = fork();
  if (c.pid == 0) {
    close(rep[0]);
    close(rdy[0]);
    close(go[1]);
    std::string result = nsfd >= 0 && setns(nsfd, CLONE_NEWNET) == 0
                             ? body(rdy[1], go[0])
                             : std::string("setns: ") + std::strerror(errno);
    if (result.empty()) result = "ok";
    (void)!write(rep[1], result.data(), result.size());
    _exit(result == "ok" ? 0 : 1);
  }
  if (nsfd >= 0) close(nsfd);
  close(rep[1]);
  close(rdy[1]);
  close(go[0]);
  c.report = rep[0];
  c.ready = rdy[0];
  c.go = go[1];
  return c;
}

std::string finish(Child& c) {
  std::string report;
  char buf[512];
  ssize_t r;
  while ((r = read(c.report, buf, sizeof buf)) > 0) report.append(buf, static_cast<std::size_t>(r));
  for (int fd : {c.report, c.ready, c.go}) close(fd);
  int status = 0;
  waitpid(c.pid, &status, 0);
  if (report.empty()) report = "exited without a report";
  return report;
}

// Runs side A (in namespace a, on veth0) and side B (in b, on veth1) at once.
// Runs `body_a` in namespace a and `body_b` in b at once, each in a forked child, starting both
// once both are ready (their first argument is written when ready, the second read for go);
// returns their reports ("ok", or what went wrong).
std::pair<std::string, std::string> run_sides(const VethPair& net,
                                              const std::function<std::string(int, int)>& body_a,
                                              const std::function<std::string(int, int)>& body_b) {
  Child a = start(net.a, body_a);
  Child b = start(net.b, body_b);
  if (a.pid <= 0 || b.pid <= 0) return {"fork failed", "fork failed"};
  char c;
  if (read(a.ready, &c, 1) == 1 && read(b.ready, &c, 1) == 1) {
    (void)!write(a.go, "g", 1);
    (void)!write(b.go, "g", 1);
  }
  close(a.go);
  close(b.go);
  a.go = b.go = -1;
  std::string ra = finish(a);
  return {ra, finish(b)};
}

// How the sides are addressed: with `vlan`, the raw backends tag their frames; with
// `kernel_vlan` too, the addresses are those of the kernel's VLAN interfaces (a UDP side uses
// one), else of no interface at all (softrdma answers ARP or ND for them itself). `ipv6`: IPv6
// addresses (those of the veth ends, or of no interface with `own_addresses`).
struct Addressing {
  std::optional<std::uint16_t> vlan;
  bool kernel_vlan = false;
  bool ipv6 = false;
  bool own_addresses = false;
  bool jumbo = false;  // MTU 9000 on the veth, datagrams up to 8 KiB
};

void exchange(Kind kind_a, Kind kind_b, bool corrupt_from_a, Addressing how = {}) {
  const auto vlan = how.vlan;
  const bool kernel_vlan = how.kernel_vlan;
  if (geteuid() != 0) GTEST_SKIP() << "needs root to create network namespaces and a veth pair";
  if (!run("ip -V")) GTEST_SKIP() << "the ip command (iproute2) is missing";
  VethPair net(kind_a == Kind::kDpdk || kind_b == Kind::kDpdk, kernel_vlan ? vlan : std::nullopt,
               how.jumbo ? 9000 : 1500);
  if (!net.error.empty()) GTEST_SKIP() << net.error;
  g_vlan = vlan;
  g_jumbo = how.jumbo;
  const char* a_addr = !vlan ? kAddrA : kernel_vlan ? kVlanAddrA : kOwnAddrA;
  const char* b_addr = !vlan ? kAddrB : kernel_vlan ? kVlanAddrB : kOwnAddrB;
  if (how.ipv6) {
    a_addr = how.own_addresses ? kOwnAddr6A : kAddr6A;
    b_addr = how.own_addresses ? kOwnAddr6B : kAddr6B;
  }
  const IpAddr addr_a = ip(a_addr), addr_b = ip(b_addr);
  const auto [ra, rb] = run_sides(
      net,
      [&](int ready, int go) {
        return side(kind_a, "veth0", addr_a, addr_b, 1000, 2000, corrupt_from_a, 0, ready, go);
      },
      [&](int ready, int go) {
        return side(kind_b, "veth1", addr_b, addr_a, 2000, 1000, false, corrupt_from_a ? 3 : 0,
                    ready, go);
      });
  g_vlan.reset();
  g_jumbo = false;
  for (const std::string& r : {ra, rb}) {
    if (r.rfind("skip: ", 0) == 0) GTEST_SKIP() << r.substr(6);
  }
  EXPECT_EQ(ra, "ok") << "side A";
  EXPECT_EQ(rb, "ok") << "side B";
}

TEST(AfPacket, OpenErrors) {
  std::string error;
  EXPECT_EQ(AfPacketNetdev::open("no-such-if0", ip(kAddrA), error), nullptr);
  EXPECT_NE(error.find("no such interface"), std::string::npos) << error;
  IpAddr a;
  EXPECT_FALSE(AfPacketNetdev::interface_ipv4("no-such-if0", a, error));
  EXPECT_NE(error.find("no such interface"), std::string::npos) << error;
}

TEST(AfPacket, AfPacketToAfPacketAcrossVeth) {
  exchange(Kind::kAfPacket, Kind::kAfPacket, true);
}

TEST(AfPacket, AfPacketAndUdpInteroperate) {
  exchange(Kind::kAfPacket, Kind::kUdp, false);
}

TEST(AfPacket, UdpAndAfPacketInteroperate) {
  exchange(Kind::kUdp, Kind::kAfPacket, false);
}

// Opens a device of `kind` on `ifname` for `me` into `d`, says ready and waits for go: "" then,
// else what went wrong ("skip: ..." when the environment lacks something).
std::string open_ready(Kind kind, const std::string& ifname, const IpAddr& me, int ready_fd,
                       int go_fd, std::unique_ptr<Netdev>& d) {
  std::string error;
  d = open_dev(kind, ifname, me, error);
  if (!d) return (environmental(error) ? "skip: " : "open: ") + error;
  (void)!write(ready_fd, "r", 1);
  char c;
  return read(go_fd, &c, 1) == 1 ? "" : "no go";
}

// A peer whose frames arrive one by one (the kernel cuts its GSO frames before the veth, as a
// NIC's link carries them) sends 2,048 datagrams of 1 KiB while the receiver does not read: the
// receive ring, with slots of the link's MTU, holds them all. With slots sized for a veth's
// 64 KiB GSO frames it held 256 and dropped the rest (a go-back-N resend each time an RC
// sender's window was larger).
TEST(AfPacket, RingHoldsABurstOfMtuFramesUnread) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to create network namespaces and a veth pair";
  if (!run("ip -V")) GTEST_SKIP() << "the ip command (iproute2) is missing";
  VethPair net(true);
  if (!net.error.empty()) GTEST_SKIP() << net.error;
  constexpr std::uint32_t kBurst = 2048, kBatch = 32, kPayload = 1024, kPrime = 5000;
  const std::size_t size = make_datagram(0, kPayload).size();
  const IpAddr addr_a = ip(kAddrA), addr_b = ip(kAddrB);
  int sent[2];
  ASSERT_EQ(pipe2(sent, O_CLOEXEC), 0);
  const auto [ra, rb] = run_sides(
      net,
      [&](int ready, int go) -> std::string {
        std::unique_ptr<Netdev> d;
        if (std::string e = open_ready(Kind::kAfPacket, "veth0", addr_a, ready, go, d);
            !e.empty()) {
          return e;
        }
        // One datagram first, until the neighbour is known (frames wait for it in a short queue).
        OwnedPacket first(make_datagram(kPrime, kPayload), addr_a, addr_b);
        Packet* one = &first.pkt;
        if (d->send_batch(std::span<Packet* const>(&one, 1)) != 1) return "send refused";
        pump(
            *d, 5000, [](const Packet&) {}, [&] { return d->counters().tx_packets >= 1; });
        if (d->counters().tx_packets < 1) return "no neighbour";
        std::vector<OwnedPacket> batch;
        std::vector<Packet*> ptrs;
        for (std::uint32_t i = 0; i < kBurst; i += kBatch) {
          batch.clear();
          ptrs.clear();
          for (std::uint32_t k = i; k < i + kBatch; ++k) {
            batch.emplace_back(make_datagram(k, kPayload), addr_a, addr_b);
          }
          for (auto& o : batch) ptrs.push_back(&o.pkt);
          if (d->send_batch(ptrs) != kBatch) return "batch refused";
        }
        // Until the neighbour is known and every frame has gone.
        pump(
            *d, 5000, [](const Packet&) {}, [&] { return d->counters().tx_packets >= kBurst + 1; });
        (void)!write(sent[1], "s", 1);
        if (d->counters().tx_packets < kBurst + 1) {
          return "sent " + std::to_string(d->counters().tx_packets) + " of " +
                 std::to_string(kBurst);
        }
        pump(
            *d, 300, [](const Packet&) {}, [] { return false; });
        return "";
      },
      [&](int ready, int go) -> std::string {
        std::unique_ptr<Netdev> d;
        if (std::string e = open_ready(Kind::kAfPacket, "veth1", addr_b, ready, go, d);
            !e.empty()) {
          return e;
        }
        char c;
        pollfd pf{sent[0], POLLIN, 0};
        if (poll(&pf, 1, 20000) != 1 || read(sent[0], &c, 1) != 1) return "the sender never said";
        std::uint32_t got = 0;
        std::string bad;
        pump(
            *d, 5000,
            [&](const Packet& p) {
              if (seq_of(p.data) == kPrime) return;
              if (p.len != size || seq_of(p.data) >= kBurst) {
                bad = "datagram " + std::to_string(seq_of(p.data)) + " of " +
                      std::to_string(p.len) + " bytes, not " + std::to_string(size);
              }
              ++got;
            },
            [&] { return got >= kBurst; });
        if (!bad.empty()) return bad;
        if (got != kBurst) {
          return "received " + std::to_string(got) + " of " + std::to_string(kBurst) +
                 " (rx_dropped " + std::to_string(d->counters().rx_dropped) + ")";
        }
        return "";
      });
  close(sent[0]);
  close(sent[1]);
  for (const std::string& r : {ra, rb}) {
    if (r.rfind("skip: ", 0) == 0) GTEST_SKIP() << r.substr(6);
  }
  EXPECT_EQ(ra, "ok") << "sender";
  EXPECT_EQ(rb, "ok") << "receiver";
}

TEST(AfXdp, AfXdpToAfXdpAcrossVeth) {
  exchange(Kind::kAfXdp, Kind::kAfXdp, true);
}

TEST(AfXdp, AfXdpAndUdpInteroperate) {
  exchange(Kind::kAfXdp, Kind::kUdp, true);
}

TEST(AfXdp, UdpAndAfXdpInteroperate) {
  exchange(Kind::kUdp, Kind::kAfXdp, false);
}

TEST(AfXdp, AfXdpAndAfPacketInteroperate) {
  exchange(Kind::kAfXdp, Kind::kAfPacket, false);
}

// On a jumbo link a frame spans several UMEM chunks (multi-buffer AF_XDP) both ways: between two
// AF_XDP devices, corrupted ones included, and against the kernel's UDP.
TEST(AfXdp, JumboFramesSpanChunks) {
  exchange(Kind::kAfXdp, Kind::kAfXdp, true, {.vlan = {}, .jumbo = true});
}

TEST(AfXdp, JumboFramesToAndFromUdp) {
  exchange(Kind::kAfXdp, Kind::kUdp, false, {.vlan = {}, .jumbo = true});
}

// Tagged frames built by softrdma against the kernel's 802.1Q on the other side (a UDP device on
// the VLAN interface), and between two raw backends.
TEST(Vlan, AfPacketTagsAndUdpOverVlanInterface) {
  exchange(Kind::kAfPacket, Kind::kUdp, true, {.vlan = kVlan, .kernel_vlan = true});
}

TEST(Vlan, AfXdpTagsAndUdpOverVlanInterface) {
  exchange(Kind::kUdp, Kind::kAfXdp, false, {.vlan = kVlan, .kernel_vlan = true});
}

// Addresses of no interface: tagged ARP requests and replies are softrdma's own.
TEST(Vlan, AfPacketTagsBothWays) {
  exchange(Kind::kAfPacket, Kind::kAfPacket, true, {.vlan = kVlan});
}

// Another VLAN's frames are not ours: B (VLAN 6) neither answers A's (VLAN 5) ARP nor takes its
// datagrams, and A drops what waited for B. With equal IDs the same exchange goes through (above).
TEST(Vlan, OtherVlanIsIgnored) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to create network namespaces and a veth pair";
  VethPair net;
  if (!net.error.empty()) GTEST_SKIP() << net.error;
  const IpAddr addr_a = ip(kOwnAddrA), addr_b = ip(kOwnAddrB);
  // Each side opens its device on its VLAN, then waits for go.
  auto open_and_wait = [](const char* ifname, const IpAddr& me, std::uint16_t vlan, int ready,
                          int go, std::string& error) -> std::unique_ptr<AfPacketNetdev> {
    auto d = AfPacketNetdev::open(ifname, me, error, {}, vlan);
    if (!d) return nullptr;
    (void)!write(ready, "r", 1);
    char c;
    if (read(go, &c, 1) != 1) error = "no go";
    return error.empty() ? std::move(d) : nullptr;
  };
  const auto [ra, rb] = run_sides(
      net,
      [&](int ready, int go) -> std::string {
        std::string error;
        auto d = open_and_wait("veth0", addr_a, 5, ready, go, error);
        if (!d) return "open: " + error;
        for (std::uint32_t i = 0; i < 3; ++i) {
          OwnedPacket p(make_datagram(1000 + i, 64), addr_a, addr_b);
          Packet* one = &p.pkt;
          if (d->send_batch(std::span<Packet* const>(&one, 1)) != 1) return "send refused";
        }
        pump(
            *d, 3000, [](const Packet&) {}, [&] { return d->counters().tx_dropped >= 3; });
        const Counters k = d->counters();
        if (k.tx_dropped != 3 || k.tx_packets != 0 || d->resolved(addr_b)) {
          return "tx_dropped " + std::to_string(k.tx_dropped) + ", tx_packets " +
                 std::to_string(k.tx_packets);
        }
        return "";
      },
      [&](int ready, int go) -> std::string {
        std::string error;
        auto d = open_and_wait("veth1", addr_b, 6, ready, go, error);
        if (!d) return "open: " + error;
        std::uint32_t got = 0;
        pump(
            *d, 1500, [&](const Packet&) { ++got; }, [] { return false; });
        const Counters k = d->counters();
        if (got != 0 || k.rx_packets != 0 || k.rx_not_ours != 0 || d->resolved(addr_a)) {
          return "received " + std::to_string(got);
        }
        return "";
      });
  EXPECT_EQ(ra, "ok") << "side A";
  EXPECT_EQ(rb, "ok") << "side B";
}

TEST(Vlan, DpdkTagsAndAfPacketTags) {
  exchange(Kind::kDpdk, Kind::kAfPacket, false, {.vlan = kVlan});
}

// IPv6: neighbour discovery from the kernel's table or our own solicitations, the UDP checksum
// the kernel's receiver checks, the ICRC over the IPv6 pseudo-header.
TEST(Ipv6, AfPacketToAfPacket) {
  exchange(Kind::kAfPacket, Kind::kAfPacket, true, {.vlan = std::nullopt, .ipv6 = true});
}

TEST(Ipv6, AfPacketAndUdpInteroperate) {
  exchange(Kind::kAfPacket, Kind::kUdp, true, {.vlan = std::nullopt, .ipv6 = true});
}

TEST(Ipv6, UdpAndAfXdpInteroperate) {
  exchange(Kind::kUdp, Kind::kAfXdp, false, {.vlan = std::nullopt, .ipv6 = true});
}

TEST(Ipv6, AfXdpAndAfPacketInteroperate) {
  exchange(Kind::kAfXdp, Kind::kAfPacket, false, {.vlan = std::nullopt, .ipv6 = true});
}

TEST(Ipv6, DpdkAndUdpInteroperate) {
  exchange(Kind::kDpdk, Kind::kUdp, true, {.vlan = std::nullopt, .ipv6 = true});
}

// Addresses of no interface: solicitations and advertisements are softrdma's own.
TEST(Ipv6, OwnAddressesAnswerNeighbourDiscovery) {
  exchange(Kind::kAfPacket, Kind::kDpdk, false,
           {.vlan = std::nullopt, .ipv6 = true, .own_addresses = true});
}

TEST(Dpdk, DpdkAndUdpInteroperate) {
  exchange(Kind::kDpdk, Kind::kUdp, true);
}

TEST(Dpdk, UdpAndDpdkInteroperate) {
  exchange(Kind::kUdp, Kind::kDpdk, false);
}

TEST(Dpdk, DpdkAndAfPacketInteroperate) {
  exchange(Kind::kDpdk, Kind::kAfPacket, false);
}

#ifdef SOFTRDMA_HAVE_AF_XDP
TEST(AfXdp, OpenErrors) {
  std::string error;
  EXPECT_EQ(AfXdpNetdev::open("no-such-if0", ip(kAddrA), error), nullptr);
  EXPECT_NE(error.find("af_xdp:no-such-if0: no such interface"), std::string::npos) << error;
  EXPECT_EQ(AfXdpNetdev::open("lo", ip("127.0.0.1"), error), nullptr);
  EXPECT_NE(error.find("not an Ethernet interface"), std::string::npos) << error;
}
#endif

}  // namespace
}  // namespace softrdma::netdev
