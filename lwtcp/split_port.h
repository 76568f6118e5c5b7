// Two ports on one link as one FramePort for the userspace TCP on an address the kernel holds
// too, over af_xdp (steering kTcpShared): `main` (the XDP socket) takes the segments of the
// ports the stack holds (its program steers only those) and sends everything; `side` (a packet
// socket on the same interface) sees copies of what the program leaves to the kernel, ARP and
// neighbour discovery among them, which the stack needs for its own resolution (the kernel
// answers them too). Frames from both come out of recv_frames (counted in tcp_rx_steered when
// `main` took them); frame_fd is readable when either has some.
#pragma once

#include <memory>

#include "netdev/frame_port.h"

namespace softrdma::lwtcp {

// nullptr (errno set) when no epoll instance can be made.
std::unique_ptr<netdev::FramePort> split_port(std::unique_ptr<netdev::FramePort> main,
                                              std::unique_ptr<netdev::FramePort> side);

}  // namespace softrdma::lwtcp
