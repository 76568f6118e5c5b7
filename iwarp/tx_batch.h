// What pump_tx (qp_tx.cpp, qp_tx_batch.cpp) works with: one batch of FPDUs as iovecs over
// header slots, registered memory and trailers (staged bytes only when markers or a fault
// need them), the cursor that walks read responses and the send queue while it is cut, and
// one segment's header and payload source. Progress is taken from a descriptor only once its
// bytes went; a thread's batch is reused and touched only under the QP's lock.
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "iwarp/qp.h"
#include "wire/ddp_rdmap.h"

namespace softrdma::iwarp {

inline constexpr std::size_t kTxMaxDescs = 64;
inline constexpr std::size_t kTxMaxIov = 512;
inline constexpr std::size_t kTxBatchBytes = 512 * 1024;
inline constexpr std::size_t kTxSlot = 64;  // 2 + 18 + 28 header bytes, 8 trailer bytes

// One FPDU of a batch (or a LOCAL_INV, which has no bytes), and the state once it went.
struct TxDesc {
  enum class Kind : std::uint8_t { kSq, kResp, kLocal } kind = Kind::kSq;
  std::size_t idx = 0;  // sq_ index, or inbound_ index at generation time
  std::uint64_t end = 0;
  bool last = false;
  bool corrupt = false;
  std::size_t iov_begin = 0, iov_end = 0;
  std::size_t bytes = 0;
  std::uint32_t msn[3] = {};
  std::uint64_t moff = 0;
};

struct TxBatch {
  TxDesc descs[kTxMaxDescs];
  iovec iov[kTxMaxIov];
  std::uint8_t hdr[kTxMaxDescs][kTxSlot];
  std::uint8_t trl[kTxMaxDescs][8];
  std::size_t ndesc = 0, niov = 0, bytes = 0;
  std::vector<std::uint8_t> flat;  // staged FPDUs (markers, faults); never reallocated
  std::vector<std::uint8_t> one;   // one FPDU gathered (staging, traces)
};

// Where the next segment comes from and the sequence state as far as the batch has gone;
// a failure found while cutting stops the batch.
struct TxCursor {
  std::size_t wi = 0;  // next send-queue WQE and its offset
  std::uint64_t woff = 0;
  std::size_t ri = 0;  // next inbound read and its offset
  std::uint64_t roff = 0;
  std::uint32_t msn[3] = {};
  std::uint32_t reads = 0;
  std::uint64_t moff = 0;
  SendWqe* local_err = nullptr;  // a local protection error on this WQE's SGEs
  WcStatus local_status = WcStatus::kSuccess;
  bool resp_failed = false;  // a read response's source went away
  RxError resp_err = RxError::kLocal;
};

// One segment's DDP/RDMAP header and its payload: an inline buffer, an SGE list, or one
// region.
struct TxSegment {
  wire::DdpHeader h;
  std::uint8_t body[wire::kReadRequestLen];
  std::size_t body_len = 0;
  std::uint64_t pay_len = 0;
  const std::uint8_t* inline_src = nullptr;
  const SendWqe* sge_src = nullptr;
  std::uint64_t src_off = 0;
  std::uint8_t* region = nullptr;
};

enum class TxStep : std::uint8_t {
  kFpdu,     // a segment to put in the batch
  kLocalOp,  // a LOCAL_INV: a descriptor without bytes
  kStop,     // nothing more now (ORD reached, queues empty, or a failure in the cursor)
};

// Appends the bytes of `n` iovecs from offset `skip` to `out`.
void gather_iov(const iovec* iov, std::size_t n, std::size_t skip, std::vector<std::uint8_t>& out);

}  // namespace softrdma::iwarp
