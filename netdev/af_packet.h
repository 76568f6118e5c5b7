// AF_PACKET backend: RoCEv2 over a named Ethernet interface through a raw packet socket. The
// backend builds whole Ethernet/IPv4/UDP frames itself (IPv4 ID 0 with DF, header checksum, UDP
// checksum 0), sends them with PACKET_QDISC_BYPASS, and receives through a TPACKET_V3 mmap ring
// behind a classic BPF filter that takes only UDP to port 4791 for our address and ARP for our
// address; every other frame is left to the kernel (a packet socket only gets copies).
//
// Neighbours (IPv4 only): a destination MAC comes from our cache, else from the kernel's table
// (/proc/net/arp), else from an ARP request we send ourselves; the reply (or any ARP request for
// our address) fills the cache. Entries live kNeighbourTtl; packets waiting for resolution are
// queued (at most kMaxQueued) and dropped (tx_dropped) when resolution fails. We answer ARP
// requests for our address only when the address is not configured on the interface; when it is
// (the usual case) the kernel answers them.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "netdev/faults.h"
#include "netdev/netdev.h"
#include "wire/net.h"

namespace softrdma::netdev {

class AfPacketNetdev : public Netdev {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::seconds kNeighbourTtl{60};
  static constexpr std::chrono::milliseconds kArpRetry{200};
  static constexpr int kArpTries = 5;  // then the queued packets are dropped
  static constexpr std::size_t kMaxQueued = 256;

  // The first IPv4 address configured on `ifname` (getifaddrs); false with `error` set when the
  // interface does not exist or has none.
  static bool interface_ipv4(const std::string& ifname, IpAddr& out, std::string& error);

  // Opens a packet socket on `ifname` for `local` (an IPv4 address, normally one configured on
  // the interface). nullptr with `error` set, e.g. "af_packet:veth0: no such interface" or
  // "af_packet:veth0: socket: Operation not permitted (needs CAP_NET_RAW)". Also binds a UDP
  // socket to local:4791 that reads nothing, so the kernel neither answers our datagrams with
  // ICMP port unreachable nor gives the port to another process.
  static std::unique_ptr<AfPacketNetdev> open(const std::string& ifname, IpAddr local,
                                              std::string& error, FaultConfig faults = {});
  ~AfPacketNetdev() override;
  AfPacketNetdev(const AfPacketNetdev&) = delete;
  AfPacketNetdev& operator=(const AfPacketNetdev&) = delete;

  std::string name() const override { return "af_packet:" + ifname_; }
  std::string backend() const override { return "af_packet"; }
  std::uint32_t mtu() const override { return mtu_; }
  std::span<const IpAddr> addresses() const override { return addrs_; }

  // Sets each packet's src to our address, fills the ICRC, applies faults and sends whole
  // frames (to the group MAC for a multicast dst). Refuses (stops at) a packet that is too
  // short, too long for the MTU or not IPv4. Packets to an unresolved neighbour are queued.
  std::size_t send_batch(std::span<Packet* const> pkts) override;
  // Takes frames from the ring: ARP is consumed here; RoCEv2 datagrams with a good IPv4 header
  // and ICRC come out with their addressing, TOS and TTL.
  std::size_t recv_batch(std::span<Packet* const> pkts) override;
  // The packet socket: readable when a ring block holds frames we have not read.
  int wait_fd() const override { return fd_; }
  int next_timeout_ms() const override;
  // Releases delayed packets, retries ARP and drops packets whose resolution failed.
  void service() override;
  void set_fault_observer(FaultObserver observer) override;
  // Multicast receive is not supported by this backend (EOPNOTSUPP): the filter takes only our
  // unicast address. Sending to a group works (to its 01:00:5e MAC).

  const std::string& ifname() const { return ifname_; }
  const wire::MacAddr& mac() const { return mac_; }
  // Whether `ip` has a live entry in our neighbour cache (for tests).
  bool resolved(const IpAddr& ip) const;

 private:
  struct Neighbour {
    wire::MacAddr mac{};
    bool valid = false;
    Clock::time_point expires{};  // valid: when to forget; not valid: when to retry ARP
    int tries = 0;
    std::deque<std::vector<std::uint8_t>> queued;  // whole frames, destination MAC to fill
  };
  AfPacketNetdev() = default;
  void transmit(std::span<const Packet> pkts);
  // Writes the Ethernet/IPv4/UDP headers of `p` (destination MAC `dst`) into `hdr`.
  void build_headers(const Packet& p, const wire::MacAddr& dst, std::uint8_t* hdr) const;
  ssize_t send_frame(const std::uint8_t* frame, std::size_t len);  // one whole frame
  void send_frames(const std::vector<std::vector<std::uint8_t>>& frames);
  bool lookup(std::uint32_t ip, wire::MacAddr& mac, Clock::time_point now);
  bool kernel_neighbour(std::uint32_t ip, wire::MacAddr& mac) const;
  void send_arp(std::uint16_t op, const wire::MacAddr& dst_mac, std::uint32_t target_ip,
                const wire::MacAddr& target_mac);
  void learn(std::uint32_t ip, const wire::MacAddr& mac);
  void handle_arp(const std::uint8_t* frame, std::size_t len);
  // Handles one ring frame (or, for a UDP GSO frame of `gso_size` segments, its next segment,
  // setting `more` while segments remain); true when it filled `out`.
  bool take(const std::uint8_t* frame, std::uint32_t len, std::uint32_t orig_len,
            std::uint32_t gso_size, Packet& out, bool& more);
  void drop_rx(FaultEvent ev, std::atomic<std::uint64_t>& counter, const std::uint8_t* data,
               std::uint32_t len);
  void release_block();

  std::string ifname_;
  int ifindex_ = 0;
  std::array<IpAddr, 1> addrs_;
  std::uint32_t local4_ = 0;
  wire::MacAddr mac_{};
  std::uint32_t mtu_ = 1500;
  bool answer_arp_ = false;  // the address is not the kernel's: answer ARP for it ourselves
  int fd_ = -1;
  int udp_fd_ = -1;  // holds local:4791
  std::uint8_t* ring_ = nullptr;
  std::size_t ring_size_ = 0;
  std::uint32_t block_size_ = 0, block_nr_ = 0;
  std::unique_ptr<FaultInjector> faults_;
  FaultObserver observer_;

  mutable std::mutex neigh_mu_;
  std::map<std::uint32_t, Neighbour> neigh_;

  // Receive state (one receiving thread at a time): the block being read and the next frame.
  std::uint32_t block_ = 0;
  std::uint32_t left_in_block_ = 0;  // 0: the block has not been opened yet
  const std::uint8_t* next_frame_ = nullptr;
  std::uint32_t seg_next_ = 0;  // offset in the current GSO frame's payload of its next segment
  bool vnet_ = false;           // frames carry a virtio_net_hdr (PACKET_VNET_HDR)
};

}  // namespace softrdma::netdev
