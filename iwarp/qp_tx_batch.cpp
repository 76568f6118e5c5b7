// Cutting one transmit batch: read responses first, then the send queue from the first WQE
// not all sent, each FPDU as iovecs (ULPDU_Length and DDP/RDMAP header in a slot, payload
// straight from inline data or registered memory, pad and CRC in a trailer), gathered into
// the staging buffer only when markers (RFC 5044 §5) or an injected fault need its bytes.
#include <algorithm>
#include <cstring>

#include "iwarp/device.h"
#include "iwarp/qp.h"
#include "iwarp/tx_batch.h"
#include "wire/crc.h"
#include "wire/fpdu.h"

namespace softrdma::iwarp {

namespace {

using core::WrOpcode;
using wire::RdmapOpcode;

std::uint8_t send_opcode(const SendWqe& w) {
  const bool se = (w.flags & core::kSendSolicited) != 0;
  if (w.opcode == WrOpcode::kSendWithInv) {
    return static_cast<std::uint8_t>(se ? RdmapOpcode::kSendSeInvalidate
                                        : RdmapOpcode::kSendInvalidate);
  }
  return static_cast<std::uint8_t>(se ? RdmapOpcode::kSendSe : RdmapOpcode::kSend);
}

wire::ReadRequest read_request_of(const SendWqe& w) {
  wire::ReadRequest rr;
  if (!w.sge.empty()) {
    rr.sink_stag = w.sge[0].lkey;
    rr.sink_to = w.sge[0].addr;
  }
  rr.size = static_cast<std::uint32_t>(w.length);
  rr.src_stag = w.rkey;
  rr.src_to = w.remote_addr;
  return rr;
}

}  // namespace

void gather_iov(const iovec* iov, std::size_t n, std::size_t skip, std::vector<std::uint8_t>& out) {
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

std::size_t Qp::tx_max_payload() const {
  const std::uint32_t max_fpdu =
      std::min<std::uint32_t>(dev_.cfg_.tx.max_fpdu ? dev_.cfg_.tx.max_fpdu : mss_, 65535);
  // Payload per FPDU: the FPDU (markers included) fits max_fpdu.
  std::size_t base = max_fpdu;
  if (markers_tx_) base -= std::min<std::size_t>(base / 2, 4 * (base / 512 + 2));
  return std::min<std::size_t>(base > 27 + 64 ? (base - 27) & ~std::size_t{3} : 64,
                               wire::kMaxUlpduLen - wire::kDdpUntaggedLen);
}

bool Qp::build_batch(TxBatch& b, TxCursor& c, std::size_t max_pay) {
  b.ndesc = b.niov = b.bytes = 0;
  b.flat.clear();
  b.flat.reserve(kTxBatchBytes + 2 * 65536 + 4096);
  c.wi = sq_next_;
  c.woff = c.wi < sq_.size() ? sq_[c.wi].sent : 0;
  c.ri = 0;
  c.roff = inbound_.empty() ? 0 : inbound_[0].sent;
  std::copy(msn_tx_, msn_tx_ + 3, c.msn);
  c.reads = reads_out_;
  c.moff = marker_tx_off_;
  while (b.ndesc < kTxMaxDescs && b.bytes < kTxBatchBytes &&
         b.niov + core::kMaxSge + 2 < kTxMaxIov) {
    TxDesc& d = b.descs[b.ndesc];
    d = TxDesc{};
    TxSegment seg;
    const TxStep step = next_segment(c, d, seg, max_pay);
    if (step == TxStep::kStop) break;
    if (step == TxStep::kFpdu) {
      if (!put_fpdu_iov(b, c, d, seg)) break;
      d.iov_end = b.niov;
    }
    std::copy(c.msn, c.msn + 3, d.msn);
    d.moff = c.moff;
    b.bytes += d.bytes;
    ++b.ndesc;
  }
  return b.ndesc > 0;
}

TxStep Qp::next_segment(TxCursor& c, TxDesc& d, TxSegment& seg, std::size_t max_pay) {
  if (c.ri < inbound_.size()) return next_read_response(c, d, seg, max_pay);
  if (c.wi < sq_.size()) return next_sq_segment(c, d, seg, max_pay);
  return TxStep::kStop;
}

TxStep Qp::next_read_response(TxCursor& c, TxDesc& d, TxSegment& seg, std::size_t max_pay) {
  const wire::ReadRequest& r = inbound_[c.ri].req;
  seg.pay_len = std::min<std::uint64_t>(r.size - c.roff, max_pay);
  seg.h.tagged = true;
  seg.h.opcode = static_cast<std::uint8_t>(RdmapOpcode::kReadResponse);
  seg.h.stag = r.sink_stag;
  seg.h.to = r.sink_to + c.roff;
  seg.h.last = c.roff + seg.pay_len == r.size;
  if (seg.pay_len > 0) {
    const core::MrCheck chk = dev_.mrs().resolve(r.src_stag, pd_, r.src_to + c.roff, seg.pay_len,
                                                core::kAccessRemoteRead, &seg.region);
    if (chk != core::MrCheck::kOk) {
      // Deregistered or invalidated since the request was accepted.
      c.resp_failed = true;
      c.resp_err = RxError::kReadSrcInvalid;
      return TxStep::kStop;
    }
  }
  d.kind = TxDesc::Kind::kResp;
  d.idx = c.ri;
  c.roff += seg.pay_len;
  d.end = c.roff;
  d.last = seg.h.last;
  if (seg.h.last) {
    ++c.ri;
    c.roff = c.ri < inbound_.size() ? inbound_[c.ri].sent : 0;
  }
  return TxStep::kFpdu;
}

TxStep Qp::next_sq_segment(TxCursor& c, TxDesc& d, TxSegment& seg, std::size_t max_pay) {
  SendWqe& w = sq_[c.wi];
  d.idx = c.wi;
  TxStep step = TxStep::kFpdu;
  wire::DdpHeader& h = seg.h;
  if (w.opcode == WrOpcode::kLocalInv) {
    d.kind = TxDesc::Kind::kLocal;
    d.last = true;
    step = TxStep::kLocalOp;
  } else if (w.opcode == WrOpcode::kRdmaRead) {
    if (c.reads >= ord_) return TxStep::kStop;  // ORD: wait for a response
    h.opcode = static_cast<std::uint8_t>(RdmapOpcode::kReadRequest);
    h.qn = wire::kQnReadRequest;
    h.msn = c.msn[1]++;
    seg.body_len = *wire::build_read_request(seg.body, read_request_of(w));
    ++c.reads;
    d.last = true;
  } else {
    seg.pay_len = std::min<std::uint64_t>(w.length - c.woff, max_pay);
    d.last = c.woff + seg.pay_len == w.length;
    h.last = d.last;
    if (w.opcode == WrOpcode::kRdmaWrite) {
      h.tagged = true;
      h.opcode = static_cast<std::uint8_t>(RdmapOpcode::kWrite);
      h.stag = w.rkey;
      h.to = w.remote_addr + c.woff;
    } else {
      h.opcode = send_opcode(w);
      h.qn = wire::kQnSend;
      h.msn = c.msn[0];
      h.mo = static_cast<std::uint32_t>(c.woff);
      h.inv_stag = w.opcode == WrOpcode::kSendWithInv ? w.inv_stag : 0;
      if (d.last) ++c.msn[0];
    }
    if (w.is_inline) {
      seg.inline_src = w.inline_data.data() + c.woff;
    } else {
      seg.sge_src = &w;
      seg.src_off = c.woff;
    }
  }
  if (step == TxStep::kFpdu) d.kind = TxDesc::Kind::kSq;
  c.woff += seg.pay_len;
  if (step == TxStep::kFpdu) d.end = c.woff;
  if (d.last) {
    ++c.wi;
    c.woff = c.wi < sq_.size() ? sq_[c.wi].sent : 0;
  }
  return step;
}

bool Qp::put_fpdu_iov(TxBatch& b, TxCursor& c, TxDesc& d, const TxSegment& seg) {
  // Header slot: ULPDU_Length, DDP/RDMAP header, Read Request body.
  std::uint8_t* slot = b.hdr[b.ndesc];
  const std::size_t hl = *wire::build_ddp_header(wire::MutBytes(slot + 2, kTxSlot - 2), seg.h);
  if (seg.body_len) std::memcpy(slot + 2 + hl, seg.body, seg.body_len);
  const std::size_t ulen = hl + seg.body_len + seg.pay_len;
  wire::store16(slot, static_cast<std::uint16_t>(ulen));
  d.iov_begin = b.niov;
  b.iov[b.niov++] = {slot, 2 + hl + seg.body_len};
  std::uint32_t crc = crc_ ? wire::crc32c(0, wire::Bytes(slot, 2 + hl + seg.body_len)) : 0;
  if (seg.pay_len > 0) {
    if (seg.inline_src || seg.region) {
      const std::uint8_t* p = seg.inline_src ? seg.inline_src : seg.region;
      b.iov[b.niov++] = {const_cast<std::uint8_t*>(p), seg.pay_len};
      if (crc_) crc = wire::crc32c(crc, wire::Bytes(p, seg.pay_len));
    } else if (!put_sge_iov(b, c, seg, crc)) {
      b.niov = d.iov_begin;
      return false;
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
  if (markers_tx_ || d.corrupt) stage_fpdu(b, c, d, pad);
  return true;
}

// Walks the SGE list from the segment's offset: one iovec per piece of a region.
bool Qp::put_sge_iov(TxBatch& b, TxCursor& c, const TxSegment& seg, std::uint32_t& crc) {
  std::uint64_t off = seg.src_off, left = seg.pay_len;
  for (const core::Sge& s : seg.sge_src->sge) {
    if (left == 0) break;
    if (off >= s.length) {
      off -= s.length;
      continue;
    }
    const std::uint64_t chunk = std::min<std::uint64_t>(s.length - off, left);
    std::uint8_t* host = nullptr;
    if (dev_.mrs().resolve(s.lkey, pd_, s.addr + off, chunk, 0, &host) != core::MrCheck::kOk) {
      c.local_err = const_cast<SendWqe*>(seg.sge_src);
      c.local_status = WcStatus::kLocProtErr;
      return false;
    }
    b.iov[b.niov++] = {host, chunk};
    if (crc_) crc = wire::crc32c(crc, wire::Bytes(host, chunk));
    left -= chunk;
    off = 0;
  }
  return true;
}

// Flattens the FPDU into the staging buffer, inserts markers (CRC recomputed over them) and
// corrupts it after the CRC when it is the one to corrupt.
void Qp::stage_fpdu(TxBatch& b, TxCursor& c, TxDesc& d, std::size_t pad) {
  b.one.clear();
  gather_iov(&b.iov[d.iov_begin], b.niov - d.iov_begin, 0, b.one);
  std::vector<std::uint8_t>& flat = b.flat;
  const std::size_t at = flat.size();
  if (markers_tx_) {
    wire::MarkerInserter ins(c.moff);
    flat.resize(at + ins.wire_len(b.one.size()));
    (void)ins.put_fpdu(wire::MutBytes(flat).subspan(at), b.one, crc_);
    c.moff = ins.offset();
  } else {
    flat.insert(flat.end(), b.one.begin(), b.one.end());
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

}  // namespace softrdma::iwarp
