// Multicast groups: on the in-memory fabric, and over UDP on lo inside a network namespace the
// test creates (and always deletes) itself, so the host's own lo is never reconfigured.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "helpers.h"
#include "netdev/memory.h"
#include "netdev/trace.h"
#include "netdev/udp.h"
#include "tests/run_command.h"

namespace softrdma::netdev {
namespace {

using namespace test;  // helpers.h

// Sends datagrams seq [first, first+count) to `to`; returns how many were accepted.
std::size_t send_seq(Netdev& from, const IpAddr& to, std::uint32_t first, std::uint32_t count) {
  std::vector<OwnedPacket> pkts;
  pkts.reserve(count);
  for (std::uint32_t i = 0; i < count; ++i) {
    pkts.emplace_back(make_datagram(first + i, 100), from.addresses()[0], to);
    pkts.back().pkt.dst_port = from.roce_port();
  }
  std::vector<Packet*> ptrs;
  for (auto& p : pkts) ptrs.push_back(&p.pkt);
  return from.send_batch(ptrs);
}

// Receives until `want` datagrams came or none arrived for `quiet_ms`. Each must be addressed to
// `dst` from `src`; their seqs are returned in order.
std::vector<std::uint32_t> receive(Netdev& dev, std::size_t want, const IpAddr& src,
                                   const IpAddr& dst, std::string& error, int quiet_ms = 1000) {
  RecvBatch rb(64);
  std::vector<std::uint32_t> seqs;
  while (seqs.size() < want || want == 0) {
    const std::size_t n = dev.recv_batch(rb.span());
    for (std::size_t i = 0; i < n; ++i) {
      const Packet& p = *rb.ptrs[i];
      if (p.dst != dst || p.src != src) {
        error += "datagram " + p.src.str() + " -> " + p.dst.str() + " (expected " + src.str() +
                 " -> " + dst.str() + "); ";
      }
      seqs.push_back(seq_of(p.data));
    }
    if (n == 0 && !readable(dev.wait_fd(), quiet_ms)) break;
  }
  return seqs;
}

TEST(MemoryMulticast, DeliversToEveryMemberWithTheGroupAsDestination) {
  auto fabric = std::make_shared<MemoryFabric>();
  MemoryNetdev a(fabric, ip("10.0.0.1"));
  MemoryNetdev b(fabric, ip("10.0.0.2"));
  MemoryNetdev c(fabric, ip("10.0.0.3"));
  const IpAddr g = ip("239.0.0.7");
  EXPECT_EQ(b.join_group(g), 0);
  EXPECT_EQ(b.join_group(g), 0);  // again: nothing changes
  EXPECT_EQ(c.join_group(g), 0);
  EXPECT_EQ(b.join_group(ip("10.0.0.9")), EINVAL);
  EXPECT_EQ(b.join_group(ip("ff02::1")), EINVAL);  // the other family
  ASSERT_EQ(send_seq(a, g, 0, 20), 20u);
  std::string err;
  EXPECT_EQ(receive(b, 20, a.addresses()[0], g, err, 100).size(), 20u);
  EXPECT_EQ(receive(c, 20, a.addresses()[0], g, err, 100).size(), 20u);
  EXPECT_EQ(receive(a, 0, a.addresses()[0], g, err, 10).size(), 0u);  // not a member
  EXPECT_EQ(err, "");
  EXPECT_EQ(b.counters().rx_icrc_errors, 0u);  // the ICRC covered the group address

  // The sender's own device receives once it joins (IP_MULTICAST_LOOP); a member that left
  // does not; a group with no member is a counted loss.
  EXPECT_EQ(a.join_group(g), 0);
  EXPECT_EQ(b.leave_group(g), 0);
  ASSERT_EQ(send_seq(a, g, 20, 5), 5u);
  EXPECT_EQ(receive(a, 5, a.addresses()[0], g, err, 100).size(), 5u);
  EXPECT_EQ(receive(c, 5, a.addresses()[0], g, err, 100).size(), 5u);
  EXPECT_EQ(receive(b, 0, a.addresses()[0], g, err, 10).size(), 0u);
  const auto dropped = a.counters().tx_dropped;
  ASSERT_EQ(send_seq(a, ip("239.0.0.8"), 0, 3), 3u);
  EXPECT_EQ(a.counters().tx_dropped, dropped + 3);
}

TEST(MemoryMulticast, CorruptionIsCaughtByEveryMember) {
  auto fabric = std::make_shared<MemoryFabric>();
  FaultConfig f;
  f.corrupt = 1.0;
  f.seed = 1;
  f.seeded = true;
  MemoryNetdev a(fabric, ip("10.0.0.1"), 1500, f);
  MemoryNetdev b(fabric, ip("10.0.0.2"));
  MemoryNetdev c(fabric, ip("10.0.0.3"));
  const IpAddr g = ip("239.0.0.7");
  ASSERT_EQ(b.join_group(g), 0);
  ASSERT_EQ(c.join_group(g), 0);
  ASSERT_EQ(send_seq(a, g, 0, 10), 10u);
  std::string err;
  EXPECT_EQ(receive(b, 0, a.addresses()[0], g, err, 10).size(), 0u);
  EXPECT_EQ(receive(c, 0, a.addresses()[0], g, err, 10).size(), 0u);
  EXPECT_EQ(b.counters().rx_icrc_errors + b.counters().rx_malformed, 10u);
  EXPECT_EQ(c.counters().rx_icrc_errors + c.counters().rx_malformed, 10u);
}

TEST(MemoryMulticast, TracingNetdevForwardsJoinAndLeave) {
  auto fabric = std::make_shared<MemoryFabric>();
  MemoryNetdev a(fabric, ip("10.0.0.1"));
  TraceConfig cfg;
  cfg.path = "/tmp/softrdma-mc-trace-" + std::to_string(getpid()) + ".pcapng";
  TracingNetdev b(std::make_unique<MemoryNetdev>(fabric, ip("10.0.0.2")), cfg);
  const IpAddr g = ip("239.0.0.9");
  EXPECT_EQ(b.join_group(g), 0);
  ASSERT_EQ(send_seq(a, g, 0, 3), 3u);
  std::string err;
  EXPECT_EQ(receive(b, 3, a.addresses()[0], g, err, 100).size(), 3u);
  EXPECT_EQ(err, "");
  EXPECT_EQ(b.leave_group(g), 0);
  ASSERT_EQ(send_seq(a, g, 3, 1), 1u);
  EXPECT_EQ(receive(b, 0, a.addresses()[0], g, err, 10).size(), 0u);
  std::remove(cfg.path.c_str());
}

TEST(UdpMulticast, RefusesWhatIsNotAGroupOfItsFamily) {
  std::string error;
  auto d = UdpNetdev::open(ip("127.0.0.1"), error, {},
                           static_cast<std::uint16_t>(20000 + getpid() % 20000));
  if (!d) GTEST_SKIP() << error;
  EXPECT_EQ(d->join_group(ip("127.0.0.5")), EINVAL);
  EXPECT_EQ(d->join_group(ip("ff0e::1")), EINVAL);
  EXPECT_EQ(d->leave_group(ip("10.1.1.1")), EINVAL);
  EXPECT_EQ(d->leave_group(ip("239.1.1.1")), 0);  // not joined: nothing to do
  EXPECT_EQ(d->groups(), 0u);
}

// --- UDP over lo in a network namespace of our own

bool run(const std::string& cmd) {
  return softrdma::test::succeeds(cmd);
}

// The scenario, run inside the namespace: two devices on 127.0.0.1 and 127.0.0.2 (port 4791,
// nobody else uses it in there) exchange datagrams through the group 239.1.2.3. "" when all
// went as expected, else what did not.
std::string scenario() {
  std::string error;
  auto a = UdpNetdev::open(ip("127.0.0.1"), error);
  if (!a) return "open a: " + error;
  auto b = UdpNetdev::open(ip("127.0.0.2"), error);
  if (!b) return "open b: " + error;
  const IpAddr g = ip("239.1.2.3");
  if (int e = b->join_group(g)) return std::string("b joins: ") + std::strerror(e);
  if (int e = a->join_group(g)) return std::string("a joins: ") + std::strerror(e);
  if (b->groups() != 1) return "b is not in one group";
  // A third device in the same group on the same port: SO_REUSEPORT lets it bind too.
  auto c = UdpNetdev::open(ip("127.0.0.3"), error);
  if (!c) return "open c: " + error;
  if (int e = c->join_group(g)) return std::string("c joins: ") + std::strerror(e);

  if (send_seq(*a, g, 0, 20) != 20) return "a did not send 20";
  std::string why;
  auto got_b = receive(*b, 20, a->addresses()[0], g, why);
  auto got_c = receive(*c, 20, a->addresses()[0], g, why);
  auto got_a = receive(*a, 20, a->addresses()[0], g, why);  // IP_MULTICAST_LOOP to itself
  if (got_b.size() != 20) return "b received " + std::to_string(got_b.size()) + " of 20; " + why;
  if (got_c.size() != 20) return "c received " + std::to_string(got_c.size()) + " of 20; " + why;
  if (got_a.size() != 20) return "a received " + std::to_string(got_a.size()) + " of 20; " + why;
  if (!why.empty()) return why;
  for (std::uint32_t i = 0; i < 20; ++i) {
    if (got_b[i] != i) return "b: out of order";
  }
  if (b->counters().rx_icrc_errors != 0) return "ICRC errors at b";
  if (a->counters().tx_errors != 0) return "send errors at a";

  // b leaves: it receives nothing more; c still does; unicast to b still works.
  if (b->leave_group(g) != 0 || b->groups() != 0) return "b could not leave";
  if (send_seq(*a, g, 20, 5) != 5) return "a did not send 5";
  if (auto n = receive(*c, 5, a->addresses()[0], g, why).size(); n != 5) {
    return "c received " + std::to_string(n) + " of 5 after b left";
  }
  if (auto n = receive(*b, 0, a->addresses()[0], g, why, 200).size(); n != 0) {
    return "b received " + std::to_string(n) + " after leaving";
  }
  if (send_seq(*a, b->addresses()[0], 100, 3) != 3) return "unicast send";
  why.clear();
  if (auto n = receive(*b, 3, a->addresses()[0], b->addresses()[0], why).size(); n != 3) {
    return "b received " + std::to_string(n) + " of 3 unicast; " + why;
  }
  return "";
}

TEST(UdpMulticast, LoopbackGroupInANetworkNamespace) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to create a network namespace";
  if (!run("ip -V")) GTEST_SKIP() << "the ip command (iproute2) is missing";
  const std::string ns = "softrdma-mc-" + std::to_string(getpid());
  if (!run("ip netns add " + ns)) GTEST_SKIP() << "cannot create network namespace " << ns;
  struct Cleanup {
    std::string ns;
    ~Cleanup() { run("ip netns del " + ns); }
  } cleanup{ns};
  const std::string exec = "ip netns exec " + ns + " ";
  ASSERT_TRUE(run(exec + "ip link set lo up"));
  ASSERT_TRUE(run(exec + "ip link set lo multicast on"));
  ASSERT_TRUE(run(exec + "ip route add 224.0.0.0/4 dev lo"));
  const int nsfd = open(("/run/netns/" + ns).c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(nsfd, 0) << "/run/netns/" << ns << ": " << std::strerror(errno);
  int pipefd[2];
  ASSERT_EQ(pipe2(pipefd, O_CLOEXEC), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // The child: enter the namespace (this thread is the child's only one), run, report.
    close(pipefd[0]);
    std::string result =
        setns(nsfd, CLONE_NEWNET) == 0 ? scenario() : std::string("setns: ") + strerror(errno);
    if (result.empty()) result = "ok";
    (void)!write(pipefd[1], result.data(), result.size());
    _exit(result == "ok" ? 0 : 1);
  }
  close(nsfd);
  close(pipefd[1]);
  std::string report;
  char buf[512];
  ssize_t r;
  while ((r = read(pipefd[0], buf, sizeof buf)) > 0)
    report.append(buf, static_cast<std::size_t>(r));
  close(pipefd[0]);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << report;
  EXPECT_EQ(report, "ok");
}

}  // namespace
}  // namespace softrdma::netdev
