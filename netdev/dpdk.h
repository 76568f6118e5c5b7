// DPDK backend (DPDK 22.11 from Debian): RoCEv2 through a DPDK port, either a virtual device
// given by its devargs (net_af_packet0,iface=veth0 / net_tap0,iface=tap0 / net_af_xdp0,iface=…)
// or a NIC given by its PCI address (bound to vfio-pci). The EAL starts once per process, in
// memory and without hugepages when none are configured (--in-memory --no-huge), and the
// calling thread's CPU affinity is given back afterwards. Frames are built by RawEthNetdev;
// neighbours by our own ARP or ND (and the kernel's table for an interface it knows), and we
// answer ARP / solicitations for our address when the kernel does not have it. DPDK ports have no
// file descriptor to wait on: a receive thread polls the port (backing off to 1 ms sleeps when
// idle), hands mbufs over through a single-producer ring and signals an eventfd. The mbuf pool is
// sized from the number of QPs expected. Built only when pkg-config finds libdpdk
// (SOFTRDMA_HAVE_DPDK is then defined).
//
// Steering kTcp opens the port for a userspace TCP (lwtcp/) instead: the receive thread keeps
// TCP to `local` (an IPv4 or IPv6 address no interface holds, so the kernel of a vdev's interface
// neither answers nor resets our connections) and ARP or neighbour discovery for it, frees every
// other frame, and the frames go
// whole through FramePort.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "netdev/raw_frame_port.h"

struct rte_mempool;
struct rte_ring;

namespace softrdma::netdev {

class DpdkNetdev : public RawFramePortNetdev {
 public:
  static constexpr std::uint32_t kDefaultQps = 64;
  // Opens `device` (devargs of a vdev, or a PCI address) for `local`; without `local`, the first
  // IPv4 address of the vdev's iface= interface (IPv6 must be given). nullptr with `error` set,
  // e.g. "dpdk:DEV: EAL could not start: …" or "dpdk:DEV: no port (a PCI NIC must be bound to
  // vfio-pci)". Extra EAL arguments may come from SOFTRDMA_DPDK_ARGS (space-separated).
  static std::unique_ptr<DpdkNetdev> open(const std::string& device, std::optional<IpAddr> local,
                                          std::string& error, FaultConfig faults = {},
                                          std::optional<std::uint16_t> vlan_tci = {},
                                          std::uint32_t expected_qps = kDefaultQps,
                                          Steering steer = Steering::kRoce);
  ~DpdkNetdev() override;
  DpdkNetdev(const DpdkNetdev&) = delete;
  DpdkNetdev& operator=(const DpdkNetdev&) = delete;

  std::string name() const override { return "dpdk:" + device_; }
  std::string backend() const override { return "dpdk"; }
  std::size_t recv_batch(std::span<Packet* const> pkts) override;
  // An eventfd the receive thread signals when it has handed frames over.
  int wait_fd() const override { return event_fd_; }
  // The number of mbufs in the pool (sized from the expected QP count).
  std::uint32_t pool_size() const { return pool_size_; }

  // FramePort (Steering::kTcp): the eventfd, and the frames the receive thread kept (a chained
  // mbuf, a frame longer than one, is counted malformed and dropped).
  int frame_fd() const override { return event_fd_; }
  std::size_t recv_frames(const FrameSink& sink, std::size_t max) override;
  // tcp_ring_dropped: frames the hand-over ring had no room for.
  std::vector<std::pair<std::string, std::uint64_t>> frame_counters() override;

 protected:
  void put_frames(std::span<const TxFrame> frames) override;
  bool put_frame(const std::uint8_t* frame, std::size_t len) override;

 private:
  DpdkNetdev() = default;
  void poll_loop();
  std::size_t send_mbufs(std::span<const TxFrame> frames);
  // Steering kTcp: whether the receive thread keeps `frame` (TCP, and ARP or neighbour
  // discovery, for our address).
  bool keeps_for_tcp(const std::uint8_t* frame, std::uint32_t len) const;
  void signal_if_waiting();  // the eventfd stays readable while the ring holds mbufs

  std::string device_;
  std::uint16_t port_ = 0;
  bool started_ = false;
  rte_mempool* pool_ = nullptr;
  rte_ring* ring_ = nullptr;  // received mbufs, receive thread → recv_batch
  std::uint32_t pool_size_ = 0;
  int event_fd_ = -1;
  std::atomic<bool> stop_{false};
  std::thread poller_;
  std::mutex tx_mu_;  // one TX queue: senders take turns
  Steering steer_ = Steering::kRoce;
  IpAddr tcp_addr_;  // Steering kTcp: our address
};

}  // namespace softrdma::netdev
