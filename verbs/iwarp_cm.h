// The private interface between the CM layer (librdmacm.so.1) and the softiwarp0 device of the
// drop-in libibverbs.so.1: the MPA negotiation and connection teardown of iwarp::Device, taking
// verbs objects. Obtained with softrdma_iwarp_cm(), exported in the version node
// SOFTRDMA_PRIVATE_1 (look it up with dlsym, or link against it). The CM owns the TCP sockets
// until connect/accept succeed; see docs/iwarp.md for the whole contract.
#pragma once

#include <infiniband/verbs.h>

#include <chrono>
#include <cstdint>
#include <span>

#include "iwarp/params.h"
#include "iwarp/user_tcp.h"

namespace softrdma::verbs {

class IwarpCm {
 public:
  virtual ~IwarpCm() = default;
  // True for a context opened on softiwarp0.
  virtual bool is_iwarp(ibv_context* ctx) = 0;
  // Active side: the QP (of a softiwarp0 context) sends the MPA request on the connected `fd`.
  virtual int connect(ibv_qp* qp, int fd, const iwarp::MpaParams& params,
                      iwarp::ConnectCallback cb) = 0;
  // Passive side: reads the MPA request on an accepted `fd`.
  virtual int read_request(ibv_context* ctx, int fd, std::chrono::milliseconds timeout,
                           iwarp::RequestCallback cb) = 0;
  virtual int accept(ibv_qp* qp, int fd, const iwarp::MpaParams& params,
                     iwarp::AcceptCallback cb) = 0;
  virtual int reject(ibv_context* ctx, int fd, std::span<const std::uint8_t> private_data) = 0;
  virtual int disconnect(ibv_qp* qp) = 0;
  virtual int abort(ibv_qp* qp) = 0;
  // The CM's handler of the QP's events (established, disconnected, fatal). The QP's
  // context also gets IBV_EVENT_COMM_EST and IBV_EVENT_QP_FATAL on its async fd.
  virtual int set_event_handler(ibv_qp* qp, iwarp::QpEventCallback fn) = 0;
  // The MPA settings the user configured (SOFTRDMA_MPA, `softrdma run --mpa`).
  virtual iwarp::MpaParams configured_params() = 0;
  // The userspace TCP softiwarp0 runs on (its sockets replace the kernel's), or null.
  virtual iwarp::UserTcp* user_tcp() = 0;
};

}  // namespace softrdma::verbs

extern "C" softrdma::verbs::IwarpCm* softrdma_iwarp_cm();
