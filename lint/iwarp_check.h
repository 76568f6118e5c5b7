// iWARP checks for lint: follows TCP connections, reassembles each direction
// (retransmitted and out-of-order segments handled), recognises streams whose
// first payload is an MPA request, then checks the MPA request/reply frames and
// every FPDU (lengths, pad, CRC32c when negotiated, markers when negotiated,
// DDP/RDMAP header rules). Violations go to the Report.
#pragma once

#include <cstdint>
#include <memory>

#include "lint/report.h"
#include "wire/frame.h"

namespace softrdma::lint {

class IwarpChecker {
 public:
  explicit IwarpChecker(Report& report);
  ~IwarpChecker();
  IwarpChecker(const IwarpChecker&) = delete;
  IwarpChecker& operator=(const IwarpChecker&) = delete;
  // One TCP segment (frame.tcp is set); frame_no is the 1-based capture frame.
  void on_tcp_segment(std::uint64_t frame_no, const wire::FrameView& frame);
  // End of capture: reports what is left unfinished where that is a violation.
  void finish();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace softrdma::lint
