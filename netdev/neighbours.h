// Neighbour resolution for the raw Ethernet backends, IPv4 (ARP) and IPv6 (Neighbour Discovery):
// a cache of MAC addresses with lifetimes, filled from the kernel's table (/proc/net/arp for IPv4,
// a netlink dump for IPv6), from ARP requests / neighbour solicitations we send ourselves (or, for
// a backend that cannot see the answers, from resolution the kernel is asked to do over netlink),
// and from ARP / neighbour advertisements we receive; frames to a neighbour being resolved wait
// in a bounded queue.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "netdev/netdev.h"
#include "wire/net.h"

namespace softrdma::netdev {

class NeighbourTable {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::seconds kTtl{60};
  static constexpr std::size_t kMaxQueued = 256;

  enum class Resolver : std::uint8_t {
    kOwnArp,  // send our own ARP requests / solicitations, learn the answers handed to us
    kKernel,  // ask the kernel to resolve (netlink RTM_NEWNEIGH with NTF_USE), read its table
  };
  struct Config {
    std::string ifname;
    int ifindex = 0;
    wire::MacAddr mac{};
    IpAddr local;                           // IPv4 (ARP) or IPv6 (ND)
    std::optional<std::uint16_t> vlan_tci;  // ARP and ND frames carry this 802.1Q tag
    bool answer_arp = false;  // answer ARP requests / solicitations for `local` ourselves
    Resolver resolver = Resolver::kOwnArp;
    std::chrono::milliseconds retry{200};  // between tries
    int tries = 5;                         // then the queued frames are dropped
  };
  // Puts one whole Ethernet frame on the wire: `data` is true for a queued datagram frame
  // (counted by the caller as sent traffic), false for ARP.
  using SendFrame = std::function<void(const std::uint8_t* frame, std::size_t len, bool data)>;

  NeighbourTable(Config cfg, SendFrame send, std::atomic<std::uint64_t>& tx_dropped);

  // The MAC of `ip` when known (our cache, else the kernel's table); otherwise starts resolving
  // it and returns false.
  bool lookup(const IpAddr& ip, wire::MacAddr& mac, Clock::time_point now);
  // Queues a whole frame for `ip` until it resolves (its destination MAC is filled then). When
  // `ip` resolved meanwhile, returns true with `mac` set and queues nothing; a full queue drops
  // the frame (tx_dropped).
  bool enqueue(const IpAddr& ip, std::vector<std::uint8_t> frame, wire::MacAddr& mac);
  // Handles a received ARP frame (Ethernet header first, possibly tagged).
  void handle_arp(const std::uint8_t* frame, std::size_t len);
  // Handles a received ICMPv6 message (`icmp`, checksum verified by the caller) from `src` to
  // `dst`: a neighbour solicitation for our address (answered when answer_arp) or an
  // advertisement (learnt).
  void handle_nd(const IpAddr& src, const IpAddr& dst, const std::uint8_t* icmp, std::size_t len,
                 const wire::MacAddr& eth_src);
  // Retries resolutions that are due and drops the frames of those that failed.
  void service(Clock::time_point now);
  // Milliseconds until service() has a retry due, or -1.
  int next_timeout_ms(Clock::time_point now) const;
  // Whether `ip` has a live entry.
  bool resolved(const IpAddr& ip) const;

 private:
  struct Entry {
    wire::MacAddr mac{};
    bool valid = false;
    Clock::time_point expires{};  // valid: when to forget; not valid: when to try again
    int tries = 0;
    std::deque<std::vector<std::uint8_t>> queued;  // whole frames, destination MAC to fill
  };
  bool kernel_neighbour(const IpAddr& ip, wire::MacAddr& mac) const;
  bool kernel_neighbour6(const IpAddr& ip, wire::MacAddr& mac) const;
  void ask(const IpAddr& ip);  // one resolution attempt
  void send_arp(std::uint16_t op, const wire::MacAddr& dst_mac, std::uint32_t target_ip,
                const wire::MacAddr& target_mac);
  // A neighbour solicitation for `target` (to its solicited-node group), or an advertisement of
  // our address to `to` at `to_mac`.
  void send_ns(const IpAddr& target);
  void send_na(const IpAddr& to, const wire::MacAddr& to_mac);
  void send_icmp6(const wire::MacAddr& dst_mac, const IpAddr& dst, std::uint8_t* icmp,
                  std::size_t len);
  void kernel_resolve(const IpAddr& ip);
  void learn(const IpAddr& ip, const wire::MacAddr& mac);

  Config cfg_;
  SendFrame send_;
  std::atomic<std::uint64_t>& tx_dropped_;
  mutable std::mutex mu_;
  std::map<IpAddr, Entry> table_;
  std::size_t queued_ = 0;  // frames queued over all entries
};

}  // namespace softrdma::netdev
