// The transmit half of a QP: read responses and send-queue work cut into FPDUs sized to the
// MSS (or the configured FPDU size), written many per stream send, payload straight from the
// registered memory (gathered into a staging buffer only when markers or fault injection
// need the bytes). Progress is committed per FPDU: a short write keeps the cut FPDU's tail
// in `pending_` and regenerates the FPDUs that did not go.
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>

#include "iwarp/device.h"
#include "iwarp/qp.h"
#include "rxe/payload.h"
#include "wire/crc.h"
#include "wire/fpdu.h"

namespace softrdma::iwarp {

namespace {

using rxe::WrOpcode;
using wire::RdmapOpcode;

constexpr std::size_t kMaxDescs = 64;
constexpr std::size_t kMaxIov = 512;
constexpr std::size_t kBatchBytes = 512 * 1024;
constexpr std::size_t kSlot = 64;  // 2 + 18 + 28 header bytes, 8 trailer bytes

struct Desc {
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

struct Batch {
  Desc descs[kMaxDescs];
  iovec iov[kMaxIov];
  std::uint8_t hdr[kMaxDescs][kSlot];
  std::uint8_t trl[kMaxDescs][8];
  std::size_t ndesc = 0, niov = 0, bytes = 0;
};

WrOpcode op_of(const SendWqe& w) {
  return w.opcode;
}

std::uint8_t send_opcode(const SendWqe& w) {
  const bool se = (w.flags & rxe::kSendSolicited) != 0;
  if (w.opcode == WrOpcode::kSendWithInv) {
    return static_cast<std::uint8_t>(se ? RdmapOpcode::kSendSeInvalidate
                                        : RdmapOpcode::kSendInvalidate);
  }
  return static_cast<std::uint8_t>(se ? RdmapOpcode::kSendSe : RdmapOpcode::kSend);
}

}  // namespace

// Gathers one FPDU's bytes (for traces, markers, fault injection, short writes).
static void gather_iov(const iovec* iov, std::size_t n, std::size_t skip,
                       std::vector<std::uint8_t>& out) {
  for (std::size_t i = 0; i < n; ++i) {
    const auto* b = static_cast<const std::uint8_t*>(iov[i].iov_base);
    std::size_t len = iov[i].iov_len;
    if (skip >= len) {
      skip -= len;
      continue;
    }
    out.insert(out.end(), b + skip, b + len);
    skip = 0;
  }
}

bool Qp::flush_pending() {
  while (pending_off_ < pending_.size()) {
    const StreamIo r =
        stream_->send_buffer(pending_.data() + pending_off_, pending_.size() - pending_off_);
    ++counters_.sendmsg_calls;
    if (r.bytes > 0) {
      pending_off_ += r.bytes;
      continue;
    }
    if (r.error == EAGAIN) {
      tx_blocked_ = true;
      return false;
    }
    conn_error(r.error ? r.error : EPIPE);
    return false;
  }
  pending_.clear();
  pending_off_ = 0;
  return true;
}

void Qp::queue_control(const wire::DdpHeader& h, wire::Bytes body) {
  std::uint8_t ulpdu[wire::kDdpUntaggedLen + 64];
  const std::size_t hl = *wire::build_ddp_header(ulpdu, h);
  const std::size_t ulen = hl + std::min<std::size_t>(body.size(), 64);
  if (ulen > hl) std::memcpy(ulpdu + hl, body.data(), ulen - hl);
  std::uint8_t plain[wire::fpdu_total_len(wire::kDdpUntaggedLen + 64)];
  const std::size_t total = *wire::build_fpdu(plain, wire::Bytes(ulpdu, ulen), crc_);
  const std::size_t at = control_.size();
  if (markers_tx_) {
    wire::MarkerInserter ins(marker_tx_off_);
    control_.resize(at + ins.wire_len(total));
    (void)ins.put_fpdu(wire::MutBytes(control_).subspan(at), wire::Bytes(plain, total), crc_);
    marker_tx_off_ = ins.offset();
  } else {
    control_.insert(control_.end(), plain, plain + total);
  }
  if (trace_) trace_->tx(wire::Bytes(control_).subspan(at));
  ++counters_.tx_fpdus;
}

void Qp::queue_terminate(RxError e, wire::Bytes ddp_header, wire::Bytes read_req) {
  const TermInfo ti = term_info(e);
  wire::Terminate t;
  t.layer = ti.layer;
  t.etype = ti.etype;
  t.code = ti.code;
  t.d = ddp_header.size() == wire::kDdpTaggedLen || ddp_header.size() == wire::kDdpUntaggedLen;
  if (t.d) t.ddp_header = ddp_header;
  t.r = read_req.size() == wire::kReadRequestLen;
  if (t.r) t.rdmap_header = read_req;
  std::uint8_t body[64];
  const auto n = wire::build_terminate(body, t);
  wire::DdpHeader h;
  h.opcode = static_cast<std::uint8_t>(RdmapOpcode::kTerminate);
  h.qn = wire::kQnTerminate;
  h.msn = msn_tx_[wire::kQnTerminate]++;
  queue_control(h, wire::Bytes(body, n ? *n : 0));
  terminate_queued_ = true;
  ++counters_.terminates_sent;
}

void Qp::pump_tx(int budget) {
  if (!stream_) return;
  const std::uint32_t max_fpdu =
      std::min<std::uint32_t>(dev_.cfg_.tx.max_fpdu ? dev_.cfg_.tx.max_fpdu : mss_, 65535);
  // Payload per FPDU: the FPDU (markers included) fits max_fpdu.
  std::size_t base = max_fpdu;
  if (markers_tx_) base -= std::min<std::size_t>(base / 2, 4 * (base / 512 + 2));
  const std::size_t max_pay =
      std::min<std::size_t>(base > 27 + 64 ? (base - 27) & ~std::size_t{3} : 64,
                            wire::kMaxUlpduLen - wire::kDdpUntaggedLen);
  const bool flat_always = markers_tx_;
  static thread_local Batch b;
  static thread_local std::vector<std::uint8_t> flat, one;
  rxe::MrTable& mrs = dev_.mrs();
  for (;;) {
    if (!flush_pending()) return;
    if (!control_.empty()) {
      pending_ = std::move(control_);
      control_.clear();
      pending_off_ = 0;
      continue;
    }
    if (state_ != QpState::kRts || (phase_ != Phase::kRunning && phase_ != Phase::kClosing)) {
      return;
    }
    if (budget-- == 0) {
      tx_blocked_ = true;  // more to send: EPOLLOUT brings the progress thread back
      return;
    }
    b.ndesc = b.niov = b.bytes = 0;
    flat.clear();
    flat.reserve(kBatchBytes + 2 * 65536 + 4096);
    std::size_t wi = sq_next_;
    std::uint64_t woff = wi < sq_.size() ? sq_[wi].sent : 0;
    std::size_t ri = 0;
    std::uint64_t roff = inbound_.empty() ? 0 : inbound_[0].sent;
    std::uint32_t msn[3] = {msn_tx_[0], msn_tx_[1], msn_tx_[2]};
    std::uint32_t reads = reads_out_;
    std::uint64_t moff = marker_tx_off_;
    SendWqe* local_err = nullptr;
    WcStatus local_status = WcStatus::kSuccess;
    RxError resp_err = RxError::kLocal;
    bool resp_failed = false;
    std::optional<rxe::MrTable::Guard> guard;
    guard.emplace(mrs);
    while (b.ndesc < kMaxDescs && b.bytes < kBatchBytes && b.niov + rxe::kMaxSge + 2 < kMaxIov) {
      Desc& d = b.descs[b.ndesc];
      d = Desc{};
      wire::DdpHeader h;
      std::uint8_t body[wire::kReadRequestLen];
      std::size_t body_len = 0;
      std::uint64_t pay_len = 0;
      // Where the payload comes from: an inline buffer, an SGE list, or one region.
      const std::uint8_t* inline_src = nullptr;
      const SendWqe* sge_src = nullptr;
      std::uint64_t src_off = 0;
      std::uint8_t* region = nullptr;
      if (ri < inbound_.size()) {
        const wire::ReadRequest& r = inbound_[ri].req;
        pay_len = std::min<std::uint64_t>(r.size - roff, max_pay);
        h.tagged = true;
        h.opcode = static_cast<std::uint8_t>(RdmapOpcode::kReadResponse);
        h.stag = r.sink_stag;
        h.to = r.sink_to + roff;
        h.last = roff + pay_len == r.size;
        if (pay_len > 0) {
          const rxe::MrCheck c = mrs.resolve(r.src_stag, pd_, r.src_to + roff, pay_len,
                                             rxe::kAccessRemoteRead, &region);
          if (c != rxe::MrCheck::kOk) {
            // Deregistered or invalidated since the request was accepted.
            resp_failed = true;
            resp_err = RxError::kReadSrcInvalid;
            break;
          }
        }
        d.kind = Desc::Kind::kResp;
        d.idx = ri;
        roff += pay_len;
        d.end = roff;
        d.last = h.last;
        if (h.last) {
          ++ri;
          roff = ri < inbound_.size() ? inbound_[ri].sent : 0;
        }
      } else if (wi < sq_.size()) {
        SendWqe& w = sq_[wi];
        d.idx = wi;
        if (op_of(w) == WrOpcode::kLocalInv) {
          d.kind = Desc::Kind::kLocal;
          d.last = true;
          std::copy(msn, msn + 3, d.msn);
          d.moff = moff;
          ++b.ndesc;
          ++wi;
          woff = wi < sq_.size() ? sq_[wi].sent : 0;
          continue;
        }
        if (op_of(w) == WrOpcode::kRdmaRead) {
          if (reads >= ord_) break;  // ORD: wait for a response
          h.opcode = static_cast<std::uint8_t>(RdmapOpcode::kReadRequest);
          h.qn = wire::kQnReadRequest;
          h.msn = msn[1]++;
          wire::ReadRequest rr;
          if (!w.sge.empty()) {
            rr.sink_stag = w.sge[0].lkey;
            rr.sink_to = w.sge[0].addr;
          }
          rr.size = static_cast<std::uint32_t>(w.length);
          rr.src_stag = w.rkey;
          rr.src_to = w.remote_addr;
          body_len = *wire::build_read_request(body, rr);
          ++reads;
          d.last = true;
        } else {
          pay_len = std::min<std::uint64_t>(w.length - woff, max_pay);
          d.last = woff + pay_len == w.length;
          h.last = d.last;
          if (op_of(w) == WrOpcode::kRdmaWrite) {
            h.tagged = true;
            h.opcode = static_cast<std::uint8_t>(RdmapOpcode::kWrite);
            h.stag = w.rkey;
            h.to = w.remote_addr + woff;
          } else {
            h.opcode = send_opcode(w);
            h.qn = wire::kQnSend;
            h.msn = msn[0];
            h.mo = static_cast<std::uint32_t>(woff);
            h.inv_stag = w.opcode == WrOpcode::kSendWithInv ? w.inv_stag : 0;
            if (d.last) ++msn[0];
          }
          if (w.is_inline) {
            inline_src = w.inline_data.data() + woff;
          } else {
            sge_src = &w;
            src_off = woff;
          }
        }
        d.kind = Desc::Kind::kSq;
        woff += pay_len;
        d.end = woff;
        if (d.last) {
          ++wi;
          woff = wi < sq_.size() ? sq_[wi].sent : 0;
        }
      } else {
        break;
      }
      // Header slot: ULPDU_Length, DDP/RDMAP header, Read Request body.
      std::uint8_t* slot = b.hdr[b.ndesc];
      const std::size_t hl = *wire::build_ddp_header(wire::MutBytes(slot + 2, kSlot - 2), h);
      if (body_len) std::memcpy(slot + 2 + hl, body, body_len);
      const std::size_t ulen = hl + body_len + pay_len;
      wire::store16(slot, static_cast<std::uint16_t>(ulen));
      d.iov_begin = b.niov;
      b.iov[b.niov++] = {slot, 2 + hl + body_len};
      std::uint32_t crc = crc_ ? wire::crc32c(0, wire::Bytes(slot, 2 + hl + body_len)) : 0;
      if (pay_len > 0) {
        if (inline_src || region) {
          const std::uint8_t* p = inline_src ? inline_src : region;
          b.iov[b.niov++] = {const_cast<std::uint8_t*>(p), pay_len};
          if (crc_) crc = wire::crc32c(crc, wire::Bytes(p, pay_len));
        } else {
          // Walk the SGE list from src_off.
          std::uint64_t off = src_off, left = pay_len;
          for (const rxe::Sge& s : sge_src->sge) {
            if (left == 0) break;
            if (off >= s.length) {
              off -= s.length;
              continue;
            }
            const std::uint64_t chunk = std::min<std::uint64_t>(s.length - off, left);
            std::uint8_t* host = nullptr;
            if (mrs.resolve(s.lkey, pd_, s.addr + off, chunk, 0, &host) != rxe::MrCheck::kOk) {
              local_err = const_cast<SendWqe*>(sge_src);
              local_status = WcStatus::kLocProtErr;
              break;
            }
            b.iov[b.niov++] = {host, chunk};
            if (crc_) crc = wire::crc32c(crc, wire::Bytes(host, chunk));
            left -= chunk;
            off = 0;
          }
          if (local_err) {
            b.niov = d.iov_begin;
            break;
          }
        }
      }
      const std::size_t pad = wire::fpdu_pad_len(ulen);
      std::uint8_t* trl = b.trl[b.ndesc];
      std::memset(trl, 0, 8);
      if (crc_ && pad) crc = wire::crc32c(crc, wire::Bytes(trl, pad));
      wire::store32le(trl + pad, crc);
      b.iov[b.niov++] = {trl, pad + 4};
      d.bytes = 2 + ulen + pad + 4;
      const std::uint32_t nth = dev_.cfg_.tx.corrupt_nth;
      d.corrupt = nth != 0 && fpdus_sent_ + b.ndesc + 1 == nth;
      if (flat_always || d.corrupt) {
        // Flatten, insert markers (CRC recomputed over them), corrupt after the CRC.
        one.clear();
        gather_iov(&b.iov[d.iov_begin], b.niov - d.iov_begin, 0, one);
        const std::size_t at = flat.size();
        if (markers_tx_) {
          wire::MarkerInserter ins(moff);
          flat.resize(at + ins.wire_len(one.size()));
          (void)ins.put_fpdu(wire::MutBytes(flat).subspan(at), one, crc_);
          moff = ins.offset();
        } else {
          flat.insert(flat.end(), one.begin(), one.end());
        }
        if (d.corrupt) {
          // The last ULPDU byte (payload when there is any), after the CRC was computed.
          flat[flat.size() - wire::kFpduCrcLen - pad - 1] ^= 0x5A;
          ++counters_.faults_injected;
        }
        d.bytes = flat.size() - at;
        b.niov = d.iov_begin;
        // The staging buffer has room for the whole batch: its data never moves.
        b.iov[b.niov++] = {flat.data() + at, d.bytes};
      }
      d.iov_end = b.niov;
      std::copy(msn, msn + 3, d.msn);
      d.moff = moff;
      b.bytes += d.bytes;
      ++b.ndesc;
    }
    if (b.ndesc == 0) {
      guard.reset();
      if (local_err) {
        // A local protection error: the WQE fails with it, the rest are flushed, and the
        // peer learns of it through a TERMINATE (local catastrophic).
        local_err->done = true;
        local_err->status = local_status;
        fail_rx(RxError::kLocal, {});
        continue;
      }
      if (resp_failed) {
        fail_rx(resp_err, {});
        continue;
      }
      break;
    }
    // Send the batch.
    std::size_t sent = 0;
    if (b.niov > 0) {
      const StreamIo r = stream_->send(std::span<const iovec>(b.iov, b.niov));
      ++counters_.sendmsg_calls;
      if (r.error != 0) {
        if (r.error != EAGAIN) {
          conn_error(r.error);
          return;
        }
        tx_blocked_ = true;
      }
      sent = r.bytes;
    }
    // FPDUs that went out whole or in part are committed; a cut one leaves its tail pending.
    std::size_t at = 0, ncommit = 0;
    bool short_write = false;
    for (; ncommit < b.ndesc; ++ncommit) {
      Desc& d = b.descs[ncommit];
      if (d.bytes > 0 && at >= sent) {
        short_write = true;
        break;
      }
      if (d.bytes > 0 && at + d.bytes > sent) {
        gather_iov(&b.iov[d.iov_begin], d.iov_end - d.iov_begin, sent - at, pending_);
        pending_off_ = 0;
        short_write = true;
      }
      if (trace_ && d.bytes > 0) {
        one.clear();
        gather_iov(&b.iov[d.iov_begin], d.iov_end - d.iov_begin, 0, one);
        trace_->tx(one, d.corrupt ? "corrupt" : "");
      }
      at += d.bytes;
      if (short_write) {
        ++ncommit;
        break;
      }
    }
    guard.reset();
    std::size_t resp_popped = 0;
    bool local_failed = false;
    for (std::size_t i = 0; i < ncommit; ++i) {
      const Desc& d = b.descs[i];
      std::copy(d.msn, d.msn + 3, msn_tx_);
      marker_tx_off_ = d.moff;
      if (d.bytes > 0) {
        ++fpdus_sent_;
        ++counters_.tx_fpdus;
        counters_.tx_bytes += d.bytes;
      }
      switch (d.kind) {
        case Desc::Kind::kResp: {
          InboundRead& r = inbound_[d.idx - resp_popped];
          r.sent = d.end;
          if (d.last) {
            inbound_.pop_front();
            ++resp_popped;
          }
          break;
        }
        case Desc::Kind::kLocal: {
          SendWqe& w = sq_[d.idx];
          w.all_sent = w.done = true;
          sq_next_ = d.idx + 1;
          auto mr = mrs.find(w.inv_stag);
          if (!mr || mr->pd != pd_) {
            w.status = WcStatus::kLocProtErr;
            local_failed = true;
          } else {
            mr->valid.store(false, std::memory_order_release);
          }
          break;
        }
        case Desc::Kind::kSq: {
          SendWqe& w = sq_[d.idx];
          w.sent = d.end;
          if (d.last) {
            w.all_sent = true;
            sq_next_ = d.idx + 1;
            if (w.opcode == WrOpcode::kRdmaRead) {
              ++reads_out_;
            } else {
              w.done = true;
            }
          }
          break;
        }
      }
    }
    if (local_failed) {
      // A LOCAL_INV of a key we cannot invalidate: the WQE fails, the QP goes to error.
      to_error(WcStatus::kWrFlushErr);
      return;
    }
    complete_sq();
    if (short_write) return;
  }
  if (fin_after_drain_ && phase_ == Phase::kClosing && !fin_sent_ && sq_next_ == sq_.size() &&
      inbound_.empty() && pending_.empty() && control_.empty()) {
    stream_->shutdown_send();
    fin_sent_ = true;
    if (trace_) trace_->tx_fin();
  }
}

void Qp::on_writable() {
  tx_blocked_ = false;
  pump_tx();
}

}  // namespace softrdma::iwarp
