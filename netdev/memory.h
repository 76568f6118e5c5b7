// In-memory backend for tests: devices attached to one MemoryFabric exchange datagrams
// through bounded per-device queues, with the same ICRC handling and faults as a real wire.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <vector>

#include "netdev/faults.h"
#include "netdev/netdev.h"

namespace softrdma::netdev {

class MemoryNetdev;

// The "wire" between MemoryNetdevs in one process: maps each address to its device, and each
// multicast group to the devices that joined it. Thread-safe. Devices register themselves on
// construction and leave on destruction.
class MemoryFabric {
 public:
  // Datagrams a device queues before further arrivals are dropped (counted rx_dropped).
  static constexpr std::size_t kDefaultQueueLimit = 65536;
  explicit MemoryFabric(std::size_t queue_limit = kDefaultQueueLimit) : queue_limit_(queue_limit) {}
  std::size_t queue_limit() const { return queue_limit_; }

 private:
  friend class MemoryNetdev;
  bool attach(const IpAddr& addr, MemoryNetdev* dev);
  void detach(const IpAddr& addr);
  // Hands a copy of `p` to the device owning p.dst, or to every member of the group p.dst;
  // false when there is none.
  bool deliver(const Packet& p);
  // Group membership (a device is in a group's list at most once). join: 0, or ENOBUFS when
  // `dev` is already in `limit` groups.
  int join(const IpAddr& group, MemoryNetdev* dev, std::size_t limit);
  void leave(const IpAddr& group, MemoryNetdev* dev);
  void leave_all(MemoryNetdev* dev);

  std::size_t queue_limit_;
  std::shared_mutex mu_;
  std::map<IpAddr, MemoryNetdev*> devices_;
  std::map<IpAddr, std::vector<MemoryNetdev*>> groups_;
};

class MemoryNetdev : public Netdev {
 public:
  // Throws std::invalid_argument when `addr` is already attached to the fabric, and
  // std::system_error when the eventfd cannot be created.
  MemoryNetdev(std::shared_ptr<MemoryFabric> fabric, IpAddr addr, std::uint32_t mtu = 1500,
               FaultConfig faults = {});
  ~MemoryNetdev() override;
  MemoryNetdev(const MemoryNetdev&) = delete;
  MemoryNetdev& operator=(const MemoryNetdev&) = delete;

  std::string name() const override { return "mem:" + addrs_[0].str(); }
  std::string backend() const override { return "mem"; }
  std::uint32_t mtu() const override { return mtu_; }
  std::span<const IpAddr> addresses() const override { return addrs_; }

  // Refuses (and stops at) a packet shorter than BTH + ICRC or larger than the MTU allows.
  // A packet to an address no device owns (or to a group nobody joined) is accepted and counted
  // in tx_dropped. A packet to a group goes to every member, this device too if it joined (as
  // with IP_MULTICAST_LOOP).
  std::size_t send_batch(std::span<Packet* const> pkts) override;
  std::size_t recv_batch(std::span<Packet* const> pkts) override;
  int wait_fd() const override { return efd_; }
  int next_timeout_ms() const override;
  void service() override;
  void set_fault_observer(FaultObserver observer) override;
  // Groups of the same address family as the device's address; at most kMaxGroups per device.
  int join_group(const IpAddr& group) override;
  int leave_group(const IpAddr& group) override;
  static constexpr std::size_t kMaxGroups = 1024;
  // Datagrams waiting in the receive queue.
  std::size_t queued() const;

 private:
  friend class MemoryFabric;
  struct Datagram {
    IpAddr src, dst;
    std::uint16_t src_port = 0, dst_port = 0;
    std::uint8_t traffic_class = 0, hop_limit = 0;
    std::vector<std::uint8_t> bytes;
  };
  void transmit(std::span<const Packet> pkts);
  void enqueue(const Packet& p);  // called by the fabric

  std::shared_ptr<MemoryFabric> fabric_;
  std::array<IpAddr, 1> addrs_;
  std::uint32_t mtu_;
  std::unique_ptr<FaultInjector> faults_;  // null when no fault is configured
  FaultObserver observer_;                 // receive drops
  int efd_ = -1;
  mutable std::mutex qmu_;
  std::deque<Datagram> queue_;
  std::vector<std::vector<std::uint8_t>> spare_;  // recycled buffers
};

}  // namespace softrdma::netdev
