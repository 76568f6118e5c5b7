// The ports of an address the kernel holds too, held in the kernel for the userspace TCP
// (steering kTcpShared): a kernel TCP socket bound to each that listens behind a socket filter
// dropping everything, so that the kernel drops the segments of lwIP's connections (it neither
// answers nor resets them) and gives the port to no other socket. A port counts its users (a
// listener and the connections it accepted share one); after the last release it stays held a
// while longer for the closing segments still under way. Used under the stack's lock.
#pragma once

#include <bitset>
#include <chrono>
#include <cstdint>
#include <functional>
#include <unordered_map>

#include "netdev/netdev.h"

namespace softrdma::lwtcp {

class PortHolds {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr auto kLinger = std::chrono::seconds(5);

  // Called when a port becomes held (true) and when it is let go (false): the link's own
  // steering of the port (netdev::FramePort::steer_tcp_port); false refuses the hold.
  using Steer = std::function<bool(std::uint16_t port, bool held)>;

  explicit PortHolds(const netdev::IpAddr& address, Steer steer = {})  // IPv4 or IPv6
      : address_(address), steer_(std::move(steer)) {}
  ~PortHolds();
  PortHolds(const PortHolds&) = delete;
  PortHolds& operator=(const PortHolds&) = delete;

  // Holds `port` once more (0: one the kernel picks): the port, or -errno (-EADDRINUSE when a
  // socket of the kernel's has it, -EIO when the link could not steer it).
  int hold(std::uint16_t port);
  // One user fewer; the last one starts the linger.
  void release(std::uint16_t port);
  // Whether segments to `port` are the stack's (held, lingering included).
  bool held(std::uint16_t port) const { return held_.test(port); }
  // Lets go of the ports whose linger has passed.
  void expire(Clock::time_point now = Clock::now());

 private:
  struct Hold {
    int fd = -1;
    int users = 0;
    Clock::time_point until{};  // users == 0: held until then
  };
  netdev::IpAddr address_;
  Steer steer_;
  std::unordered_map<std::uint16_t, Hold> holds_;
  std::bitset<65536> held_;
};

}  // namespace softrdma::lwtcp
