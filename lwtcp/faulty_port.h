// A FramePort with --faults on what the userspace TCP sends (netdev::FaultInjector: drop,
// duplicate, reorder, corrupt, delay, each frame whole), so that lwIP's TCP and its peer's have
// loss to recover from. Held frames leave when due, on the next recv_frames or send_frame; the
// faults are counted in frame_counters() (tcp_fault_dropped, …).
#pragma once

#include <memory>

#include "netdev/faults.h"
#include "netdev/frame_port.h"

namespace softrdma::lwtcp {

std::unique_ptr<netdev::FramePort> with_faults(std::unique_ptr<netdev::FramePort> port,
                                               const netdev::FaultConfig& faults);

}  // namespace softrdma::lwtcp
