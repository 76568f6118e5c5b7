// IPv4 neighbour resolution for the raw Ethernet backends: a cache of MAC addresses with
// lifetimes, filled from the kernel's table (/proc/net/arp), from ARP we send ourselves (or, for
// a backend that cannot see ARP replies, from resolution the kernel is asked to do over netlink),
// and from ARP we receive; frames to a neighbour being resolved wait in a bounded queue.
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

#include "wire/net.h"

namespace softrdma::netdev {

class NeighbourTable {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::seconds kTtl{60};
  static constexpr std::size_t kMaxQueued = 256;

  enum class Resolver : std::uint8_t {
    kOwnArp,  // broadcast our own ARP requests and learn the replies handed to handle_arp()
    kKernel,  // ask the kernel to resolve (netlink RTM_NEWNEIGH with NTF_USE), read its table
  };
  struct Config {
    std::string ifname;
    int ifindex = 0;
    wire::MacAddr mac{};
    std::uint32_t local4 = 0;
    std::optional<std::uint16_t> vlan_tci;  // ARP frames carry this 802.1Q tag
    bool answer_arp = false;                // answer ARP requests for local4 ourselves
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
  bool lookup(std::uint32_t ip, wire::MacAddr& mac, Clock::time_point now);
  // Queues a whole frame for `ip` until it resolves (its destination MAC is filled then). When
  // `ip` resolved meanwhile, returns true with `mac` set and queues nothing; a full queue drops
  // the frame (tx_dropped).
  bool enqueue(std::uint32_t ip, std::vector<std::uint8_t> frame, wire::MacAddr& mac);
  // Handles a received ARP frame (Ethernet header first, possibly tagged).
  void handle_arp(const std::uint8_t* frame, std::size_t len);
  // Retries resolutions that are due and drops the frames of those that failed.
  void service(Clock::time_point now);
  // Milliseconds until service() has a retry due, or -1.
  int next_timeout_ms(Clock::time_point now) const;
  // Whether `ip` has a live entry.
  bool resolved(std::uint32_t ip) const;

 private:
  struct Entry {
    wire::MacAddr mac{};
    bool valid = false;
    Clock::time_point expires{};  // valid: when to forget; not valid: when to try again
    int tries = 0;
    std::deque<std::vector<std::uint8_t>> queued;  // whole frames, destination MAC to fill
  };
  bool kernel_neighbour(std::uint32_t ip, wire::MacAddr& mac) const;
  void ask(std::uint32_t ip);  // one resolution attempt
  void send_arp(std::uint16_t op, const wire::MacAddr& dst_mac, std::uint32_t target_ip,
                const wire::MacAddr& target_mac);
  void kernel_resolve(std::uint32_t ip);
  void learn(std::uint32_t ip, const wire::MacAddr& mac);

  Config cfg_;
  SendFrame send_;
  std::atomic<std::uint64_t>& tx_dropped_;
  mutable std::mutex mu_;
  std::map<std::uint32_t, Entry> table_;
  std::size_t queued_ = 0;  // frames queued over all entries
};

}  // namespace softrdma::netdev
