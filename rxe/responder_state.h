// What the responder owns: the expected PSN and MSN, the message being received (its
// receive WQE or RDMA WRITE target), the READ/atomic resources and the answers not yet
// sent. rxe::Qp holds one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

#include "core/srq.h"
#include "rxe/ack_hold.h"
#include "rxe/ud_hold.h"
#include "rxe/uses_core.h"

namespace softrdma::rxe {

// A READ being answered, or an atomic's result kept for duplicates.
struct RespResource {
  // kPlacement: an ATOMIC WRITE or FLUSH done, remembered so that a duplicate is answered again.
  enum class Kind : std::uint8_t { kFree, kRead, kAtomic, kPlacement } kind = Kind::kFree;
  std::uint32_t first_psn = 0, last_psn = 0;
  // READ
  std::uint64_t va = 0;
  std::uint32_t rkey = 0;
  Pd* pd = nullptr;  // the rkey's PD: the QP's, or (XRC target) the request's SRQ's
  std::uint64_t length = 0;
  std::uint64_t sent = 0;  // bytes answered so far
  std::uint32_t next_psn = 0;
  bool active = false;     // responses still to build
  bool duplicate = false;  // answering a duplicate request (a resend)
  // ATOMIC
  std::uint64_t orig = 0;
};

struct ResponderState {
  std::uint32_t epsn_ = 0;  // expected PSN
  std::uint32_t msn_ = 0;
  bool nak_sent_ = false;    // a sequence-error NAK was sent for epsn_
  bool in_message_ = false;  // between FIRST and LAST of a SEND or WRITE
  bool uc_drop_ = false;     // UC: dropping the rest of a damaged message
  bool cur_is_send_ = false;
  bool have_wqe_ = false;
  RecvWqe cur_wqe_;  // the RQ/SRQ WQE a SEND is filling
  std::uint64_t cur_offset_ = 0;
  std::uint64_t write_va_ = 0;
  std::uint32_t write_rkey_ = 0;
  std::uint64_t write_len_ = 0;  // RETH DMA length
  struct Response {
    std::uint8_t syndrome;
    std::uint32_t psn;
    bool atomic;
    std::uint64_t orig;
    bool empty_read = false;  // ATOMIC WRITE / FLUSH: a zero-length RDMA READ response ONLY
  };
  std::deque<Response> responses_;  // answers not yet sent, in order
  // The ACK queued last is for a message received whole (not a duplicate, a NAK...): it may
  // wait for the QP's next request (rxe/ack_hold.h).
  bool ack_holdable_ = false;
  AckHold ack_hold_;
  std::vector<RespResource> resources_;
  std::size_t next_resource_ = 0;
  UdHold ud_hold_;  // UD: datagrams waiting for a receive WQE
};

}  // namespace softrdma::rxe
