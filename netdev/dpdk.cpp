#include "netdev/dpdk.h"

#include <pthread.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_ring.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "netdev/open.h"

namespace softrdma::netdev {

namespace {

constexpr std::uint16_t kRxDesc = 512, kTxDesc = 512;
constexpr std::uint32_t kPerQp = 64;  // mbufs in flight per QP (a send window's worth)
constexpr std::uint32_t kPoolCache = 32;
// What the pool holds beyond its users' needs: the caches of up to kCachedThreads threads, each
// of which may hold up to 1.5 times the cache size before it flushes.
constexpr std::uint32_t kCachedThreads = 8, kPoolCacheMax = kPoolCache * 3 / 2;
constexpr std::uint32_t kRingSize = 1024;
constexpr std::uint16_t kBurst = 32;
constexpr auto kIdleSleepMax = std::chrono::microseconds(1000);

std::mutex eal_mu;
bool eal_up = false;
int pool_serial = 0;

// A thread that is not one of EAL's has no lcore, and so no mempool cache: every mbuf it takes
// or gives back goes through the pool's shared ring (a compare-and-swap each, the cache line
// bouncing between the cores). Each thread that touches the pool (the receive thread, the
// progress thread, an application's that sends) registers as an lcore on its first touch and
// gets one; unregistered at its exit (its cache flushed). Without a free lcore slot it goes on
// without a cache.
struct LcoreSlot {
  bool tried = false;
  bool registered = false;
  ~LcoreSlot() {
    if (registered) rte_thread_unregister();
  }
};
thread_local LcoreSlot t_lcore;

void ensure_lcore() {
  if (t_lcore.tried) return;
  t_lcore.tried = true;
  if (rte_lcore_id() != LCORE_ID_ANY) return;  // EAL's own thread
  t_lcore.registered = rte_thread_register() == 0;
}

long free_hugepages() {
  std::ifstream in("/proc/meminfo");
  for (std::string key; in >> key;) {
    long v = 0;
    if (key == "HugePages_Free:" && in >> v) return v;
    in.ignore(1 << 10, '\n');
  }
  return 0;
}

bool is_vdev(const std::string& device) {
  return device.rfind("net_", 0) == 0 || device.rfind("eth_", 0) == 0;
}

// Starts the EAL with `device` (or, when it is up already, hot-plugs `device`). The calling
// thread keeps its CPU affinity.
bool start_eal(const std::string& where, const std::string& device, std::string& error) {
  std::lock_guard lock(eal_mu);
  if (eal_up) {
    if (int r = rte_dev_probe(device.c_str()); r < 0 && r != -EEXIST) {
      error = where + ": adding the device: " + rte_strerror(-r);
      return false;
    }
    return true;
  }
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  const bool have_cpus = pthread_getaffinity_np(pthread_self(), sizeof cpus, &cpus) == 0;
  int first_cpu = 0;
  while (have_cpus && first_cpu < CPU_SETSIZE && !CPU_ISSET(first_cpu, &cpus)) ++first_cpu;
  std::vector<std::string> args = {"softrdma", "-l",
                                   std::to_string(first_cpu < CPU_SETSIZE ? first_cpu : 0),
                                   "--no-telemetry", "--log-level=error"};
  // Without free hugepages: plain memory, and no shared files (--in-memory implies hugepages).
  if (free_hugepages() == 0) {
    args.insert(args.end(), {"--no-huge", "--no-shconf", "-m", "256"});
  } else {
    args.push_back("--in-memory");
  }
  if (is_vdev(device)) {
    args.insert(args.end(), {"--no-pci", "--vdev", device});
  } else {
    args.insert(args.end(), {"-a", device});
  }
  if (const char* extra = std::getenv("SOFTRDMA_DPDK_ARGS")) {
    std::istringstream in(extra);
    for (std::string a; in >> a;) args.push_back(a);
  }
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const int r = rte_eal_init(static_cast<int>(argv.size() - 1), argv.data());
  if (have_cpus) pthread_setaffinity_np(pthread_self(), sizeof cpus, &cpus);
  if (r < 0) {
    error = where + ": EAL could not start: " + rte_strerror(rte_errno);
    return false;
  }
  eal_up = true;
  return true;
}

// The port of `device`: the vdev's name (devargs before the first comma) or the PCI address.
bool find_port(const std::string& device, std::uint16_t& port) {
  const std::string name = device.substr(0, device.find(','));
  if (rte_eth_dev_get_port_by_name(name.c_str(), &port) == 0) return true;
  for (std::uint16_t p = 0; p < RTE_MAX_ETHPORTS; ++p) {
    if (!rte_eth_dev_is_valid_port(p)) continue;
    rte_eth_dev_info info{};
    if (rte_eth_dev_info_get(p, &info) == 0 && info.device && name == rte_dev_name(info.device)) {
      port = p;
      return true;
    }
  }
  return false;
}

}  // namespace

std::unique_ptr<DpdkNetdev> DpdkNetdev::open(const std::string& device, std::optional<IpAddr> local,
                                             std::string& error, FaultConfig faults,
                                             std::optional<std::uint16_t> vlan_tci,
                                             std::uint32_t expected_qps, Steering steer) {
  std::unique_ptr<DpdkNetdev> d(new DpdkNetdev());
  d->device_ = device;
  d->steer_ = steer;
  const std::string where = "dpdk:" + device;
  const std::string iface = dpdk_vdev_iface(device);
  if (steers_tcp(steer) &&
      (!local || (steer == Steering::kTcp && !interface_with(*local).empty()))) {
    // The kernel would answer our segments with resets: a userspace TCP needs an address of
    // its own.
    error = where + ": a userspace TCP needs an address no interface holds" +
            (local ? ", not " + local->str() : " (dpdk:DEVICE@ADDRESS)");
    return nullptr;
  }
  IpAddr addr;
  if (local) {
    addr = *local;
  } else if (iface.empty()) {
    error = where + ": give the address (dpdk:DEVICE@ADDRESS)";
    return nullptr;
  } else if (!interface_ipv4(where, iface, addr, error)) {
    return nullptr;
  }
  if (!start_eal(where, device, error)) return nullptr;
  if (!find_port(device, d->port_)) {
    error = where + ": no DPDK port for it (a PCI NIC must be bound to vfio-pci)";
    return nullptr;
  }
  const int socket = rte_eth_dev_socket_id(d->port_);
  rte_ether_addr mac{};
  rte_eth_macaddr_get(d->port_, &mac);
  std::memcpy(d->link_.mac.data(), mac.addr_bytes, 6);
  std::uint16_t mtu = 1500;
  rte_eth_dev_get_mtu(d->port_, &mtu);
  d->link_.mtu = mtu;
  d->link_.vlan_tci = vlan_tci;
  if (!iface.empty()) {
    d->link_.ifname = iface;
    RawLink kernel;
    if (read_link(where, iface, kernel, error)) {
      d->link_.ifindex = kernel.ifindex;
      d->link_.mtu = std::min(d->link_.mtu, kernel.mtu);
    }
  }

  // The pool: a window of mbufs per QP, plus what the rings and caches hold.
  const std::uint32_t qps = std::max<std::uint32_t>(1, expected_qps);
  d->pool_size_ = qps * kPerQp + kRxDesc + kTxDesc + kRingSize + kCachedThreads * kPoolCacheMax;
  const std::uint32_t frame_max =
      d->link_.mtu + wire::kEthernetLen + wire::kVlanTagLen + 4 /* FCS */;
  const std::string pool_name =
      "softrdma" + std::to_string(getpid()) + "_" + std::to_string(pool_serial++);
  d->pool_ = rte_pktmbuf_pool_create(
      pool_name.c_str(), d->pool_size_, kPoolCache, 0,
      static_cast<std::uint16_t>(std::max<std::uint32_t>(frame_max, 2048) + RTE_PKTMBUF_HEADROOM),
      socket);
  if (!d->pool_) {
    error =
        where + ": mbuf pool of " + std::to_string(d->pool_size_) + ": " + rte_strerror(rte_errno);
    return nullptr;
  }
  d->ring_ =
      rte_ring_create((pool_name + "r").c_str(), kRingSize, socket, RING_F_SP_ENQ | RING_F_SC_DEQ);
  if (!d->ring_) {
    error = where + ": ring: " + rte_strerror(rte_errno);
    return nullptr;
  }
  rte_eth_conf conf{};
  if (int r = rte_eth_dev_configure(d->port_, 1, 1, &conf); r < 0) {
    error = where + ": configuring the port: " + rte_strerror(-r);
    return nullptr;
  }
  std::uint16_t rx_desc = kRxDesc, tx_desc = kTxDesc;
  rte_eth_dev_adjust_nb_rx_tx_desc(d->port_, &rx_desc, &tx_desc);
  if (int r = rte_eth_rx_queue_setup(d->port_, 0, rx_desc, static_cast<unsigned>(socket), nullptr,
                                     d->pool_);
      r < 0) {
    error = where + ": receive queue: " + rte_strerror(-r);
    return nullptr;
  }
  if (int r = rte_eth_tx_queue_setup(d->port_, 0, tx_desc, static_cast<unsigned>(socket), nullptr);
      r < 0) {
    error = where + ": send queue: " + rte_strerror(-r);
    return nullptr;
  }
  // IPv6 neighbour solicitations go to a solicited-node group: let multicast in.
  if (!addr.is_v4()) rte_eth_allmulticast_enable(d->port_);
  if (int r = rte_eth_dev_start(d->port_); r < 0) {
    error = where + ": starting the port: " + rte_strerror(-r);
    return nullptr;
  }
  d->started_ = true;
  d->event_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (d->event_fd_ < 0) {
    error = where + ": eventfd: " + std::strerror(errno);
    return nullptr;
  }

  NeighbourTable::Config nc;
  // The kernel answers ARP for an address of its own on the vdev's interface (or a VLAN
  // interface over it); on a NIC of DPDK's, or for an address it does not have, we do.
  nc.answer_arp = iface.empty() || interface_with(addr).empty();
  nc.resolver = NeighbourTable::Resolver::kOwnArp;
  if (steers_tcp(steer)) d->tcp_addr_ = addr;
  if (!d->start(where, addr, nc, faults, error, steer == Steering::kRoce)) return nullptr;
  d->poller_ = std::thread([p = d.get()] {
    pthread_setname_np(pthread_self(), "softrdma-dpdk");
    p->poll_loop();
  });
  return d;
}

DpdkNetdev::~DpdkNetdev() {
  flush_faults();
  stop_ = true;
  if (poller_.joinable()) poller_.join();
  if (ring_) {
    void* m = nullptr;
    while (rte_ring_sc_dequeue(ring_, &m) == 0) rte_pktmbuf_free(static_cast<rte_mbuf*>(m));
    rte_ring_free(ring_);
  }
  if (started_) {
    rte_eth_dev_stop(port_);
    rte_eth_dev_info info{};
    const bool have = rte_eth_dev_info_get(port_, &info) == 0 && info.device;
    rte_eth_dev_close(port_);
    if (have) rte_dev_remove(info.device);  // so that the device can be added again
  }
  if (pool_) rte_mempool_free(pool_);
  if (event_fd_ >= 0) close(event_fd_);
}

void DpdkNetdev::poll_loop() {
  pthread_setname_np(pthread_self(), "softrdma-dpdk");
  ensure_lcore();
  std::array<rte_mbuf*, kBurst> burst;
  auto idle = std::chrono::microseconds(0);
  while (!stop_.load(std::memory_order_relaxed)) {
    const std::uint16_t got = rte_eth_rx_burst(port_, 0, burst.data(), kBurst);
    if (got == 0) {
      // Nothing: sleep, longer each time, up to 1 ms (polling mode without a core to burn).
      idle = std::min(kIdleSleepMax, idle + std::chrono::microseconds(20));
      std::this_thread::sleep_for(idle);
      continue;
    }
    idle = std::chrono::microseconds(0);
    std::uint16_t n = got;
    if (steers_tcp(steer_)) {  // keep ours, free the rest (left to the kernel)
      n = 0;
      for (std::uint16_t i = 0; i < got; ++i) {
        rte_mbuf* m = burst[i];
        if (keeps_for_tcp(rte_pktmbuf_mtod(m, const std::uint8_t*), m->data_len)) {
          burst[n++] = m;
        } else {
          rte_pktmbuf_free(m);
        }
      }
      if (n == 0) continue;
    }
    const unsigned put =
        rte_ring_sp_enqueue_burst(ring_, reinterpret_cast<void**>(burst.data()), n, nullptr);
    if (put < n) {
      bump(counters_.rx_dropped, n - put);  // the progress thread is behind: lost
      rte_pktmbuf_free_bulk(burst.data() + put, n - put);
    }
    const std::uint64_t one = 1;
    if (put > 0) (void)!write(event_fd_, &one, sizeof one);
  }
}

std::size_t DpdkNetdev::recv_batch(std::span<Packet* const> pkts) {
  ensure_lcore();
  std::uint64_t ignored;
  (void)!read(event_fd_, &ignored, sizeof ignored);
  std::array<rte_mbuf*, kBurst> got;
  std::size_t n = 0;
  while (n < pkts.size()) {
    const unsigned want = static_cast<unsigned>(std::min<std::size_t>(kBurst, pkts.size() - n));
    const unsigned k =
        rte_ring_sc_dequeue_burst(ring_, reinterpret_cast<void**>(got.data()), want, nullptr);
    for (unsigned i = 0; i < k; ++i) {
      rte_mbuf* m = got[i];
      bool more = false;
      // One segment holds a whole frame (the mbufs are sized for the MTU); a chained one is
      // malformed, and take_frame counts it so (len != orig_len).
      if (take_frame(rte_pktmbuf_mtod(m, const std::uint8_t*), m->data_len, m->pkt_len, 0, *pkts[n],
                     more)) {
        ++n;
      }
    }
    rte_pktmbuf_free_bulk(got.data(), k);
    if (k < want) break;
  }
  signal_if_waiting();
  return n;
}

void DpdkNetdev::signal_if_waiting() {
  if (rte_ring_count(ring_) > 0) {
    const std::uint64_t one = 1;
    (void)!write(event_fd_, &one, sizeof one);  // more is waiting: stay readable
  }
}

bool DpdkNetdev::keeps_for_tcp(const std::uint8_t* f, std::uint32_t len) const {
  auto be16 = [&f](std::size_t at) { return static_cast<std::uint32_t>(f[at] << 8 | f[at + 1]); };
  auto be32 = [&](std::size_t at) { return be16(at) << 16 | be16(at + 2); };
  constexpr std::size_t kL3 = wire::kEthernetLen;
  if (link_.vlan_tci) {  // our VLAN's frames only, read as if untagged
    const auto eth = wire::parse_ethernet(wire::Bytes(f, len));
    if (!eth || !eth->vlan_tci || !vlan_ours(eth->vlan_tci)) return false;
    f += wire::kVlanTagLen;
    len -= static_cast<std::uint32_t>(wire::kVlanTagLen);
  }
  if (len < kL3 + 28) return false;  // shorter than an ARP packet or an IPv4 header and 8
  if (tcp_addr_.is_v4()) {
    const std::uint32_t ours = tcp_addr_.v4_host();
    if (be16(12) == 0x0806) return be32(kL3 + 24) == ours;  // ARP: its target address
    return be16(12) == 0x0800 && f[kL3 + 9] == 6 /* TCP */ && be32(kL3 + 16) == ours;
  }
  // IPv6: TCP, fragments and ICMPv6 (neighbour discovery) to our address, and ICMPv6 to our
  // solicited-node group (ff02::1:ffXX:XXXX, the address's last 24 bits).
  if (be16(12) != 0x86DD || len < kL3 + wire::kIpv6Len) return false;
  const std::uint8_t next = f[kL3 + 6];
  const std::uint8_t* dst = f + kL3 + 24;
  if (std::memcmp(dst, tcp_addr_.bytes.data(), 16) == 0) {
    return next == 6 || next == 44 || next == 58;
  }
  static constexpr std::uint8_t kSolicited[13] = {0xFF, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xFF};
  return next == 58 && std::memcmp(dst, kSolicited, 13) == 0 &&
         std::memcmp(dst + 13, tcp_addr_.bytes.data() + 13, 3) == 0;
}

std::size_t DpdkNetdev::recv_frames(const FrameSink& sink, std::size_t max) {
  ensure_lcore();
  std::uint64_t ignored;
  (void)!read(event_fd_, &ignored, sizeof ignored);
  std::array<rte_mbuf*, kBurst> got;
  std::size_t n = 0;
  while (n < max) {
    const unsigned want = static_cast<unsigned>(std::min<std::size_t>(kBurst, max - n));
    const unsigned k =
        rte_ring_sc_dequeue_burst(ring_, reinterpret_cast<void**>(got.data()), want, nullptr);
    for (unsigned i = 0; i < k; ++i) {
      rte_mbuf* m = got[i];
      auto* frame = rte_pktmbuf_mtod(m, std::uint8_t*);
      if (m->nb_segs != 1 || m->pkt_len != m->data_len) {
        bump(counters_.rx_malformed);  // longer than an mbuf: the sender's link has a larger MTU
        continue;
      }
      std::uint32_t len = m->data_len;
      if (!untag(frame, len)) continue;  // (the receive thread keeps only our VLAN's)
      // A kernel TCP on this host (a vdev on a veth) leaves its checksum partial.
      const bool completed = complete_partial_tcp(frame, len);
      bump(counters_.rx_packets);
      bump(counters_.rx_bytes, len);
      sink(frame, len, completed);
      ++n;
    }
    rte_pktmbuf_free_bulk(got.data(), k);
    if (k < want) break;
  }
  signal_if_waiting();
  return n;
}

std::vector<std::pair<std::string, std::uint64_t>> DpdkNetdev::frame_counters() {
  return {{"tcp_ring_dropped", counters().rx_dropped}};
}

std::size_t DpdkNetdev::send_mbufs(std::span<const TxFrame> frames) {
  ensure_lcore();
  std::array<rte_mbuf*, kBurst> out;
  std::size_t sent = 0;
  std::lock_guard lock(tx_mu_);
  for (std::size_t i = 0; i < frames.size();) {
    const std::size_t m = std::min<std::size_t>(kBurst, frames.size() - i);
    if (rte_pktmbuf_alloc_bulk(pool_, out.data(), static_cast<unsigned>(m)) != 0) break;
    for (std::size_t k = 0; k < m; ++k) {
      const TxFrame& f = frames[i + k];
      auto* p = reinterpret_cast<std::uint8_t*>(
          rte_pktmbuf_append(out[k], static_cast<std::uint16_t>(f.hdr_len + f.len)));
      if (!p) continue;  // cannot happen: the mbufs hold an MTU-sized frame
      std::memcpy(p, f.hdr, f.hdr_len);
      if (f.len > 0) std::memcpy(p + f.hdr_len, f.data, f.len);
    }
    std::uint16_t done = 0;
    for (int tries = 0; tries < 100 && done < m; ++tries) {
      done =
          static_cast<std::uint16_t>(done + rte_eth_tx_burst(port_, 0, out.data() + done,
                                                             static_cast<std::uint16_t>(m - done)));
    }
    if (done < m) rte_pktmbuf_free_bulk(out.data() + done, static_cast<unsigned>(m - done));
    sent += done;
    if (done < m) break;
    i += m;
  }
  return sent;
}

void DpdkNetdev::put_frames(std::span<const TxFrame> frames) {
  count_sent(frames, send_mbufs(frames));
}

bool DpdkNetdev::put_frame(const std::uint8_t* frame, std::size_t len) {
  const TxFrame f{frame, static_cast<std::uint32_t>(len), nullptr, 0};
  return send_mbufs(std::span<const TxFrame>(&f, 1)) == 1;
}

}  // namespace softrdma::netdev
