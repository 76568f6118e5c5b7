// softiwarp0's userspace TCP: lwIP (Debian's liblwip 2.1, its raw API, no thread of its own)
// on a raw backend's frames (netdev::FramePort), as an iwarp::UserTcp. lwIP does ARP and TCP
// itself on one netif with the backend's MAC and MTU and our address: IPv4 (ARP, every peer on
// the link) or IPv6 (neighbour discovery, every peer in the address's /64); the device's progress
// thread feeds it frames and runs its timers (poll()). lwIP keeps its state in globals: one stack
// per process (one softiwarp0).
#pragma once

#include <memory>
#include <string>

#include "iwarp/user_tcp.h"
#include "netdev/frame_port.h"
#include "netdev/netdev.h"

namespace softrdma::pcap {
class PcapngWriter;
}

namespace softrdma::lwtcp {

struct StackConfig {
  netdev::IpAddr address;  // IPv4 or IPv6
  // The kernel holds the address too (steering kTcpShared): each port the stack binds (a
  // listener's, a connection's own) is held by a kernel TCP socket that listens and drops
  // everything (a socket filter), so the kernel neither answers nor resets what comes to it nor
  // gives it to another socket; frames to other ports are the kernel's, not lwIP's.
  bool hold_ports = false;
  std::string trace_name = "softiwarp0";      // the trace's interface name
  std::shared_ptr<pcap::PcapngWriter> trace;  // null: frames not traced
};

// The stack over `port`; nullptr with `error` set when one already runs in this process.
std::shared_ptr<iwarp::UserTcp> open_stack(std::unique_ptr<netdev::FramePort> port,
                                           const StackConfig& cfg, std::string& error);

}  // namespace softrdma::lwtcp
