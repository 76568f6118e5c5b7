// The data path applications reach through function pointers: ibv_context.ops
// (post_send, post_recv, poll_cq, req_notify_cq, post_srq_recv), the ibv_wr_*
// calls of ibv_qp_ex and the ibv_start_poll family of ibv_cq_ex.
#include <endian.h>
#include <sched.h>

#include <cerrno>
#include <cstring>

#include "verbs/objects.h"

using namespace softrdma;
using namespace softrdma::verbs;

static_assert(sizeof(ibv_sge) == sizeof(core::Sge));
static_assert(offsetof(ibv_sge, addr) == offsetof(core::Sge, addr));
static_assert(offsetof(ibv_sge, length) == offsetof(core::Sge, length));
static_assert(offsetof(ibv_sge, lkey) == offsetof(core::Sge, lkey));

namespace softrdma::verbs {
void install_qp_ops(SoftContext* ctx);

int convert_send_wr(SoftQp* qp, const ibv_send_wr* wr, core::SendWr& out) {
  out = core::SendWr{};
  out.wr_id = wr->wr_id;
  out.opcode = static_cast<core::WrOpcode>(wr->opcode);
  out.send_flags = wr->send_flags;
  if (wr->num_sge < 0) return EINVAL;
  // ibv_send_wr has no field for a FLUSH's placement type and level: ibv_wr_flush only.
  if (static_cast<int>(wr->opcode) == kIbvWrFlush) return EINVAL;
  out.sg_list = std::span(reinterpret_cast<const core::Sge*>(wr->sg_list),
                          static_cast<std::size_t>(wr->num_sge));
  switch (wr->opcode) {
    case IBV_WR_SEND_WITH_IMM:
    case IBV_WR_RDMA_WRITE_WITH_IMM:
      out.imm_data = be32toh(wr->imm_data);
      break;
    case IBV_WR_SEND_WITH_INV:
    case IBV_WR_LOCAL_INV:
      out.invalidate_rkey = wr->invalidate_rkey;
      break;
    default:
      break;
  }
  switch (wr->opcode) {
    case IBV_WR_RDMA_WRITE:
    case IBV_WR_RDMA_WRITE_WITH_IMM:
    case IBV_WR_RDMA_READ:
    case IBV_WR_ATOMIC_WRITE:  // its 8 bytes from the SGE (or inline), as an RDMA WRITE's
      out.remote_addr = wr->wr.rdma.remote_addr;
      out.rkey = wr->wr.rdma.rkey;
      break;
    case IBV_WR_ATOMIC_CMP_AND_SWP:
    case IBV_WR_ATOMIC_FETCH_AND_ADD:
      out.remote_addr = wr->wr.atomic.remote_addr;
      out.rkey = wr->wr.atomic.rkey;
      out.compare_add = wr->wr.atomic.compare_add;
      out.swap = wr->wr.atomic.swap;
      break;
    case IBV_WR_BIND_MW:
      // Type 2 windows only: a type 1 window is bound through ibv_bind_mw.
      if (!wr->bind_mw.mw || wr->bind_mw.mw->type != IBV_MW_TYPE_2) return EINVAL;
      fill_bind(wr->bind_mw.mw, wr->bind_mw.rkey, wr->bind_mw.bind_info, out);
      break;
    default:
      break;
  }
  if (qp->qpx.qp_base.qp_type == IBV_QPT_UD) {
    if (!wr->wr.ud.ah) return EINVAL;
    out.ah = soft(wr->wr.ud.ah)->id;
    out.remote_qpn = wr->wr.ud.remote_qpn;
    out.remote_qkey = wr->wr.ud.remote_qkey;
  }
  if (qp->qpx.qp_base.qp_type == IBV_QPT_XRC_SEND) out.remote_srqn = wr->qp_type.xrc.remote_srqn;
  return 0;
}

void convert_wc(const core::Wc& in, ibv_wc& out) {
  out.wr_id = in.wr_id;
  out.status = static_cast<ibv_wc_status>(in.status);
  out.opcode = static_cast<ibv_wc_opcode>(in.opcode);
  out.vendor_err = in.vendor_err;
  out.byte_len = in.byte_len;
  if (in.wc_flags & core::kWcWithInv) {
    out.invalidated_rkey = in.invalidated_rkey;
  } else {
    out.imm_data = htobe32(in.imm_data);
  }
  out.qp_num = in.qp_num;
  out.src_qp = in.src_qp;
  out.wc_flags = in.wc_flags;
  out.pkey_index = in.pkey_index;
  out.slid = in.slid;
  out.sl = in.sl;
  out.dlid_path_bits = in.dlid_path_bits;
}

}  // namespace softrdma::verbs

namespace {

int post_send(ibv_qp* ibqp, ibv_send_wr* wr, ibv_send_wr** bad_wr) {
  SoftQp* qp = soft(ibqp);
  if (inherited(ibqp->context)) {
    if (bad_wr) *bad_wr = wr;
    return ENODEV;
  }
  for (; wr; wr = wr->next) {
    core::SendWr w;
    int rc = convert_send_wr(qp, wr, w);
    if (!rc) rc = provider(ibqp->context).post_send(qp, w);
    if (rc) {
      if (bad_wr) *bad_wr = wr;
      return rc;
    }
  }
  return 0;
}

// Posts a chain of receive WRs through `post` (a QP's RQ or an SRQ); stops at the
// first failure and names it in *bad_wr, as libibverbs does.
template <class Post>
int post_recv_chain(ibv_recv_wr* wr, ibv_recv_wr** bad_wr, Post post) {
  for (; wr; wr = wr->next) {
    core::RecvWr r;
    r.wr_id = wr->wr_id;
    r.sg_list = std::span(reinterpret_cast<const core::Sge*>(wr->sg_list),
                          static_cast<std::size_t>(wr->num_sge < 0 ? 0 : wr->num_sge));
    const int rc = wr->num_sge < 0 ? EINVAL : post(r);
    if (rc) {
      if (bad_wr) *bad_wr = wr;
      return rc;
    }
  }
  return 0;
}

int post_recv(ibv_qp* ibqp, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) {
  if (inherited(ibqp->context)) {
    if (bad_wr) *bad_wr = wr;
    return ENODEV;
  }
  SoftQp* qp = soft(ibqp);
  const Provider& p = provider(ibqp->context);
  return post_recv_chain(wr, bad_wr,
                         [qp, &p](const core::RecvWr& r) { return p.post_recv(qp, r); });
}

int post_srq_recv(ibv_srq* srq, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) {
  if (inherited(srq->context)) {
    if (bad_wr) *bad_wr = wr;
    return ENODEV;
  }
  core::Srq* s = soft(srq)->rxe;
  return post_recv_chain(wr, bad_wr, [s](const core::RecvWr& r) { return s->post(r); });
}

// A polling application drives progress itself, on whichever device the CQ belongs to. False
// when another thread (the progress thread) was in a pass.
bool drive_progress(ibv_context* ctx) {
  return provider(ctx).poll_progress(ctx);
}

std::int64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return std::int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

// When this thread's last poll found a completion.
thread_local std::int64_t t_last_found_ns = 0;

// After an empty poll. A program that polls drives progress in its own passes, so it keeps its
// core while completions come: yielding it would let a progress thread in, and every such switch
// is on the latency path (UCX polls four CQs per loop). It yields when the progress thread holds
// the pass (so that the holder, perhaps waiting for this very core, finishes it); every 32nd
// empty poll once nothing has come for 30 us (the peer, spinning on memory, then waits for its
// progress thread, which on a small machine needs this core); and otherwise once a millisecond,
// so that the process's other threads are not starved.
void idle_poll(bool drove) {
  constexpr std::int64_t kStarvedNs = 30'000;
  constexpr unsigned kStarvedYieldEvery = 32;
  thread_local std::int64_t last_yield_ns = 0;
  thread_local unsigned empty = 0;
  const std::int64_t now = monotonic_ns();
  const bool starved = now - t_last_found_ns > kStarvedNs && ++empty % kStarvedYieldEvery == 0;
  if (!drove || starved || now - last_yield_ns >= 1'000'000) {
    last_yield_ns = now;
    sched_yield();
  }
}

int poll_cq(ibv_cq* cq, int num_entries, ibv_wc* wc) {
  if (inherited(cq->context)) {
    errno = ENODEV;
    return -1;
  }
  if (num_entries <= 0) return 0;
  const bool drove = drive_progress(cq->context);  // a polling application drives progress
  core::Wc buf[32];
  int total = 0;
  while (total < num_entries) {
    const int want = std::min(num_entries - total, 32);
    const int n = soft(cq)->rxe->poll(std::span(buf, static_cast<std::size_t>(want)));
    if (n < 0) return total ? total : -1;  // the CQ overflowed
    for (int i = 0; i < n; ++i) convert_wc(buf[i], wc[total + i]);
    total += n;
    if (n < want) break;
  }
  if (total == 0)
    idle_poll(drove);
  else
    t_last_found_ns = monotonic_ns();
  return total;
}

int req_notify_cq(ibv_cq* cq, int solicited_only) {
  if (inherited(cq->context)) return ENODEV;
  soft(cq)->rxe->req_notify(solicited_only != 0);
  return 0;
}

// ---- ibv_cq_ex

int cq_start_poll(ibv_cq_ex* cq, ibv_poll_cq_attr* attr) {
  if (attr && attr->comp_mask) return EINVAL;
  if (inherited(cq->context)) return ENODEV;
  SoftCq* c = soft(cq);
  const bool drove = drive_progress(cq->context);
  const int n = c->rxe->poll(std::span(&c->cur, 1));
  if (n == 0) idle_poll(drove);
  if (n <= 0) return n < 0 ? EIO : ENOENT;
  cq->wr_id = c->cur.wr_id;
  cq->status = static_cast<ibv_wc_status>(c->cur.status);
  return 0;
}

int cq_next_poll(ibv_cq_ex* cq) {
  return cq_start_poll(cq, nullptr);
}
void cq_end_poll(ibv_cq_ex*) {}
ibv_wc_opcode cq_read_opcode(ibv_cq_ex* cq) {
  return static_cast<ibv_wc_opcode>(soft(cq)->cur.opcode);
}
uint32_t cq_read_vendor_err(ibv_cq_ex* cq) {
  return soft(cq)->cur.vendor_err;
}
uint32_t cq_read_byte_len(ibv_cq_ex* cq) {
  return soft(cq)->cur.byte_len;
}
__be32 cq_read_imm_data(ibv_cq_ex* cq) {
  const core::Wc& w = soft(cq)->cur;
  return (w.wc_flags & core::kWcWithInv) ? w.invalidated_rkey : htobe32(w.imm_data);
}
uint32_t cq_read_qp_num(ibv_cq_ex* cq) {
  return soft(cq)->cur.qp_num;
}
uint32_t cq_read_src_qp(ibv_cq_ex* cq) {
  return soft(cq)->cur.src_qp;
}
unsigned int cq_read_wc_flags(ibv_cq_ex* cq) {
  return soft(cq)->cur.wc_flags;
}
uint32_t cq_read_slid(ibv_cq_ex* cq) {
  return soft(cq)->cur.slid;
}
uint8_t cq_read_sl(ibv_cq_ex* cq) {
  return soft(cq)->cur.sl;
}
uint8_t cq_read_dlid_path_bits(ibv_cq_ex* cq) {
  return soft(cq)->cur.dlid_path_bits;
}
// The "core clock" runs at 1 GHz: a completion timestamp is in nanoseconds.
uint64_t cq_read_completion_ts(ibv_cq_ex* cq) {
  return soft(cq)->cur.timestamp_ns;
}

// ---- ibv_qp_ex: work requests built field by field, posted by wr_complete

PendingWr& begin_wr(ibv_qp_ex* qpx, core::WrOpcode op) {
  SoftQp* qp = soft(qpx);
  PendingWr& p = qp->pending.emplace_back();
  p.wr.wr_id = qpx->wr_id;
  p.wr.send_flags = qpx->wr_flags;
  p.wr.opcode = op;
  return p;
}
// The same for a request to remote memory: `rkey` and `addr` set.
PendingWr& begin_remote_wr(ibv_qp_ex* qpx, core::WrOpcode op, std::uint32_t rkey,
                           std::uint64_t addr) {
  PendingWr& p = begin_wr(qpx, op);
  p.wr.rkey = rkey;
  p.wr.remote_addr = addr;
  return p;
}
PendingWr* cur(ibv_qp_ex* qpx) {
  SoftQp* qp = soft(qpx);
  return qp->pending.empty() ? nullptr : &qp->pending.back();
}

void wr_start(ibv_qp_ex* qpx) {
  soft(qpx)->pending.clear();
  soft(qpx)->wr_error = 0;
}
void wr_abort(ibv_qp_ex* qpx) {
  soft(qpx)->pending.clear();
}
int wr_complete(ibv_qp_ex* qpx) {
  SoftQp* qp = soft(qpx);
  int rc = inherited(qpx->qp_base.context) ? ENODEV : qp->wr_error;
  for (PendingWr& p : qp->pending) {
    if (rc) break;
    p.wr.sg_list = std::span<const core::Sge>(p.sge);
    rc = provider(qpx->qp_base.context).post_send(qp, p.wr);
  }
  qp->pending.clear();
  qp->wr_error = 0;
  return rc;
}
void wr_send(ibv_qp_ex* q) {
  begin_wr(q, core::WrOpcode::kSend);
}
void wr_send_imm(ibv_qp_ex* q, __be32 imm) {
  begin_wr(q, core::WrOpcode::kSendWithImm).wr.imm_data = be32toh(imm);
}
void wr_send_inv(ibv_qp_ex* q, uint32_t rkey) {
  begin_wr(q, core::WrOpcode::kSendWithInv).wr.invalidate_rkey = rkey;
}
void wr_rdma_write(ibv_qp_ex* q, uint32_t rkey, uint64_t addr) {
  begin_remote_wr(q, core::WrOpcode::kRdmaWrite, rkey, addr);
}
void wr_rdma_write_imm(ibv_qp_ex* q, uint32_t rkey, uint64_t addr, __be32 imm) {
  PendingWr& p = begin_remote_wr(q, core::WrOpcode::kRdmaWriteWithImm, rkey, addr);
  p.wr.imm_data = be32toh(imm);
}
void wr_rdma_read(ibv_qp_ex* q, uint32_t rkey, uint64_t addr) {
  begin_remote_wr(q, core::WrOpcode::kRdmaRead, rkey, addr);
}
void wr_atomic_cmp_swp(ibv_qp_ex* q, uint32_t rkey, uint64_t addr, uint64_t compare,
                       uint64_t swap) {
  PendingWr& p = begin_remote_wr(q, core::WrOpcode::kAtomicCmpAndSwp, rkey, addr);
  p.wr.compare_add = compare;
  p.wr.swap = swap;
}
void wr_atomic_fetch_add(ibv_qp_ex* q, uint32_t rkey, uint64_t addr, uint64_t add) {
  PendingWr& p = begin_remote_wr(q, core::WrOpcode::kAtomicFetchAndAdd, rkey, addr);
  p.wr.compare_add = add;
}
void wr_local_inv(ibv_qp_ex* q, uint32_t rkey) {
  begin_wr(q, core::WrOpcode::kLocalInv).wr.invalidate_rkey = rkey;
}
void wr_unsupported(ibv_qp_ex* q) {
  soft(q)->wr_error = EOPNOTSUPP;
}
void wr_bind_mw(ibv_qp_ex* q, ibv_mw* mw, uint32_t rkey, const ibv_mw_bind_info* info) {
  if (!mw || !info || mw->type != IBV_MW_TYPE_2) {
    soft(q)->wr_error = EINVAL;
    return;
  }
  fill_bind(mw, rkey, *info, begin_wr(q, core::WrOpcode::kBindMw).wr);
}
void wr_send_tso(ibv_qp_ex* q, void*, uint16_t, uint16_t) {
  wr_unsupported(q);
}
void wr_set_xrc_srqn(ibv_qp_ex* q, uint32_t remote_srqn) {
  PendingWr* p = cur(q);
  if (!p) {
    soft(q)->wr_error = EINVAL;
    return;
  }
  p->wr.remote_srqn = remote_srqn;
}
// The 8 bytes are read now (the caller may reuse them at once), as inline data.
void wr_atomic_write(ibv_qp_ex* q, uint32_t rkey, uint64_t addr, const void* atomic_wr) {
  if (!atomic_wr) {
    soft(q)->wr_error = EINVAL;
    return;
  }
  PendingWr& p = begin_remote_wr(q, core::WrOpcode::kAtomicWrite, rkey, addr);
  const auto* b = static_cast<const uint8_t*>(atomic_wr);
  p.inline_data.assign(b, b + 8);
  p.sge.assign(1, core::Sge{reinterpret_cast<uint64_t>(p.inline_data.data()), 8, 0});
  p.wr.send_flags |= IBV_SEND_INLINE;
}
void wr_set_ud_addr(ibv_qp_ex* q, ibv_ah* ah, uint32_t qpn, uint32_t qkey) {
  PendingWr* p = cur(q);
  if (!p || !ah) {
    soft(q)->wr_error = EINVAL;
    return;
  }
  p->wr.ah = soft(ah)->id;
  p->wr.remote_qpn = qpn;
  p->wr.remote_qkey = qkey;
}
void wr_set_sge(ibv_qp_ex* q, uint32_t lkey, uint64_t addr, uint32_t length) {
  PendingWr* p = cur(q);
  if (!p) {
    soft(q)->wr_error = EINVAL;
    return;
  }
  p->sge.assign(1, core::Sge{addr, length, lkey});
}
void wr_set_sge_list(ibv_qp_ex* q, size_t n, const ibv_sge* list) {
  PendingWr* p = cur(q);
  if (!p) {
    soft(q)->wr_error = EINVAL;
    return;
  }
  auto* s = reinterpret_cast<const core::Sge*>(list);
  p->sge.assign(s, s + n);
}
void wr_set_inline_data_list(ibv_qp_ex* q, size_t n, const ibv_data_buf* bufs) {
  PendingWr* p = cur(q);
  if (!p) {
    soft(q)->wr_error = EINVAL;
    return;
  }
  // Copied now: inline data may be reused as soon as the call returns.
  p->inline_data.clear();
  for (size_t i = 0; i < n; ++i) {
    const auto* b = static_cast<const uint8_t*>(bufs[i].addr);
    p->inline_data.insert(p->inline_data.end(), b, b + bufs[i].length);
  }
  p->sge.assign(1, core::Sge{reinterpret_cast<uint64_t>(p->inline_data.data()),
                             static_cast<uint32_t>(p->inline_data.size()), 0});
  p->wr.send_flags |= IBV_SEND_INLINE;
}
void wr_set_inline_data(ibv_qp_ex* q, void* addr, size_t length) {
  const ibv_data_buf b{addr, length};
  wr_set_inline_data_list(q, 1, &b);
}

}  // namespace

namespace softrdma::verbs {

void wr_flush_op(ibv_qp_ex* q, uint32_t rkey, uint64_t addr, size_t len, uint8_t type,
                 uint8_t level) {
  PendingWr& p = begin_remote_wr(q, core::WrOpcode::kFlush, rkey, addr);
  p.wr.flush_length = len;
  p.wr.flush_type = type;
  p.wr.flush_level = level;
}

ibv_cq_ex* create_cq_ex_op(ibv_context* context, ibv_cq_init_attr_ex* attr);

void fill_context_ops(SoftContext* ctx) {
  ibv_context_ops& o = ctx->vctx.context.ops;
  o.post_send = post_send;
  o.post_recv = post_recv;
  o.post_srq_recv = post_srq_recv;
  o.poll_cq = poll_cq;
  o.req_notify_cq = req_notify_cq;
  ctx->vctx.create_cq_ex = create_cq_ex_op;
  install_qp_ops(ctx);
  ctx->provider->fill_ops(ctx);  // softroce0: memory windows
}

void fill_qp_ex_ops(ibv_qp_ex* q) {
  q->wr_atomic_cmp_swp = wr_atomic_cmp_swp;
  q->wr_atomic_fetch_add = wr_atomic_fetch_add;
  q->wr_bind_mw = wr_bind_mw;
  q->wr_local_inv = wr_local_inv;
  q->wr_rdma_read = wr_rdma_read;
  q->wr_rdma_write = wr_rdma_write;
  q->wr_rdma_write_imm = wr_rdma_write_imm;
  q->wr_send = wr_send;
  q->wr_send_imm = wr_send_imm;
  q->wr_send_inv = wr_send_inv;
  q->wr_send_tso = wr_send_tso;
  q->wr_set_ud_addr = wr_set_ud_addr;
  q->wr_set_xrc_srqn = wr_set_xrc_srqn;
  q->wr_set_inline_data = wr_set_inline_data;
  q->wr_set_inline_data_list = wr_set_inline_data_list;
  q->wr_set_sge = wr_set_sge;
  q->wr_set_sge_list = wr_set_sge_list;
  q->wr_start = wr_start;
  q->wr_complete = wr_complete;
  q->wr_abort = wr_abort;
  q->wr_atomic_write = wr_atomic_write;
}

void fill_cq_ex_ops(ibv_cq_ex* c) {
  c->start_poll = cq_start_poll;
  c->next_poll = cq_next_poll;
  c->end_poll = cq_end_poll;
  c->read_opcode = cq_read_opcode;
  c->read_vendor_err = cq_read_vendor_err;
  c->read_byte_len = cq_read_byte_len;
  c->read_imm_data = cq_read_imm_data;
  c->read_qp_num = cq_read_qp_num;
  c->read_src_qp = cq_read_src_qp;
  c->read_wc_flags = cq_read_wc_flags;
  c->read_slid = cq_read_slid;
  c->read_sl = cq_read_sl;
  c->read_dlid_path_bits = cq_read_dlid_path_bits;
  c->read_completion_ts = cq_read_completion_ts;
}

}  // namespace softrdma::verbs
