// Queue pair creation, state changes, queries and destruction.
#include <algorithm>
#include <cerrno>
#include <cstring>

#include "verbs/objects.h"

using namespace softrdma;
using namespace softrdma::verbs;

namespace {

constexpr uint64_t kSendOps =
    IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_SEND |
    IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
    IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD | IBV_QP_EX_WITH_LOCAL_INV | IBV_QP_EX_WITH_SEND_WITH_INV |
    IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_ATOMIC_WRITE | kIbvQpExWithFlush;

void init_ibv_qp(SoftQp* s, ibv_context* context, const ibv_qp_init_attr_ex* a, std::uint32_t qpn) {
  ibv_qp& qp = s->qpx.qp_base;
  qp.context = context;
  qp.qp_context = a->qp_context;
  qp.pd = a->pd;
  qp.send_cq = a->send_cq;
  qp.recv_cq = a->recv_cq;
  qp.srq = a->srq;
  qp.handle = qpn;
  qp.qp_num = qpn;
  qp.state = IBV_QPS_RESET;
  qp.qp_type = a->qp_type;
  pthread_mutex_init(&qp.mutex, nullptr);
  pthread_cond_init(&qp.cond, nullptr);
  fill_qp_ex_ops(&s->qpx);
  s->wr_flush = wr_flush_op;
  s->qpx.comp_mask = 0;
}

void copy_cap(const core::QpCap& cap, ibv_qp_cap& out) {
  out.max_send_wr = cap.max_send_wr;
  out.max_recv_wr = cap.max_recv_wr;
  out.max_send_sge = cap.max_send_sge;
  out.max_recv_sge = cap.max_recv_sge;
  out.max_inline_data = cap.max_inline_data;
}

// The attributes create_qp_common reads, copied field by field (a program built on older
// headers passes a shorter struct): what the QP is not made of is null in the copy.
ibv_qp_init_attr_ex copy_init_attr(const ibv_qp_init_attr_ex& u) {
  ibv_qp_init_attr_ex a{};
  a.qp_context = u.qp_context;
  a.send_cq = u.send_cq;
  a.recv_cq = u.recv_cq;
  a.srq = u.srq;
  a.cap = u.cap;
  a.qp_type = u.qp_type;
  a.sq_sig_all = u.sq_sig_all;
  a.comp_mask = u.comp_mask;
  if (u.comp_mask & IBV_QP_INIT_ATTR_PD) a.pd = u.pd;
  if (u.comp_mask & IBV_QP_INIT_ATTR_XRCD) a.xrcd = u.xrcd;
  if (u.comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) a.create_flags = u.create_flags;
  if (u.comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) a.send_ops_flags = u.send_ops_flags;
  if (u.qp_type == IBV_QPT_XRC_RECV) {
    a.comp_mask &= ~static_cast<uint32_t>(IBV_QP_INIT_ATTR_PD);
    a.pd = nullptr;
    a.send_cq = nullptr;
  }
  if (u.qp_type == IBV_QPT_XRC_SEND || u.qp_type == IBV_QPT_XRC_RECV) {
    a.recv_cq = nullptr;
    a.srq = nullptr;
  }
  return a;
}

ibv_qp* create_qp_common(ibv_context* context, ibv_qp_init_attr_ex* user, std::uint32_t qpn = 0) {
  if (inherited(context)) return fail<ibv_qp>(ENODEV);
  ibv_qp_init_attr_ex copy = copy_init_attr(*user);
  ibv_qp_init_attr_ex* a = &copy;
  if (a->comp_mask & ~(IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_XRCD |
                       IBV_QP_INIT_ATTR_SEND_OPS_FLAGS | IBV_QP_INIT_ATTR_CREATE_FLAGS)) {
    return fail<ibv_qp>(EOPNOTSUPP);
  }
  // No creation flag is implemented (scatter-FCS, CVLAN stripping, source QPN, ...); naming
  // none of them is fine.
  if ((a->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) && a->create_flags) {
    return fail<ibv_qp>(EOPNOTSUPP);
  }
  if ((a->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) && (a->send_ops_flags & ~kSendOps)) {
    return fail<ibv_qp>(EOPNOTSUPP);
  }
  // What the QP is made of: an XRC target (IBTA annex A14) of its domain only, an XRC initiator
  // of a PD and a send CQ, every other QP of a PD and both CQs.
  const bool xrc = a->qp_type == IBV_QPT_XRC_SEND || a->qp_type == IBV_QPT_XRC_RECV;
  if (xrc && !provider(context).xrc()) return fail<ibv_qp>(EOPNOTSUPP);  // iWARP has no XRC
  if (a->qp_type == IBV_QPT_XRC_RECV ? !a->xrcd : !a->pd) return fail<ibv_qp>(EINVAL);
  core::QpType type;
  switch (a->qp_type) {
    case IBV_QPT_RC:
      type = core::QpType::kRc;
      break;
    case IBV_QPT_UC:
      type = core::QpType::kUc;
      break;
    case IBV_QPT_UD:
      type = core::QpType::kUd;
      break;
    case IBV_QPT_XRC_SEND:
      type = core::QpType::kXrcSend;
      break;
    case IBV_QPT_XRC_RECV:
      type = core::QpType::kXrcRecv;
      break;
    default:
      return fail<ibv_qp>(EOPNOTSUPP);  // raw packet: not implemented
  }
  if (!xrc && (!a->send_cq || !a->recv_cq)) return fail<ibv_qp>(EINVAL);
  if (a->qp_type == IBV_QPT_XRC_SEND && !a->send_cq) return fail<ibv_qp>(EINVAL);
  core::QpCap cap;
  cap.max_send_wr = a->cap.max_send_wr;
  cap.max_recv_wr = a->cap.max_recv_wr;
  cap.max_send_sge = a->cap.max_send_sge;
  cap.max_recv_sge = a->cap.max_recv_sge;
  cap.max_inline_data = a->cap.max_inline_data;
  ibv_qp* qp = provider(context).create_qp(context, a, type, cap, qpn);
  if (qp) user->cap = a->cap;
  return qp;
}

ibv_qp* create_qp_ex_op(ibv_context* context, ibv_qp_init_attr_ex* a) {
  return create_qp_common(context, a);
}

// ibv_create_qp's attributes on `pd`; `qpn` as create_qp_common. Reports the capabilities.
ibv_qp* create_qp_plain(ibv_pd* pd, ibv_qp_init_attr* attr, std::uint32_t qpn) {
  ibv_qp_init_attr_ex a{};
  a.qp_context = attr->qp_context;
  a.send_cq = attr->send_cq;
  a.recv_cq = attr->recv_cq;
  a.srq = attr->srq;
  a.cap = attr->cap;
  a.qp_type = attr->qp_type;
  a.sq_sig_all = attr->sq_sig_all;
  a.comp_mask = IBV_QP_INIT_ATTR_PD;
  a.pd = pd;
  ibv_qp* qp = create_qp_common(pd->context, &a, qpn);
  if (qp) attr->cap = a.cap;
  return qp;
}

}  // namespace

extern "C" {

ibv_qp* ibv_create_qp(ibv_pd* pd, ibv_qp_init_attr* attr) {
  return create_qp_plain(pd, attr, 0);
}

// softrdma's own: the GSI QP (number 1, UD) that librdmacm sends CM MADs on. A UD QP
// in every other respect (without an SRQ); EBUSY when the process already has one.
ibv_qp* softrdma_create_gsi_qp(ibv_pd* pd, ibv_qp_init_attr* attr) {
  if (!pd || !attr || attr->qp_type != IBV_QPT_UD) {
    errno = EINVAL;
    return nullptr;
  }
  ibv_qp_init_attr gsi = *attr;
  gsi.srq = nullptr;
  ibv_qp* qp = create_qp_plain(pd, &gsi, 1);
  if (qp) attr->cap = gsi.cap;
  return qp;
}

ibv_qp_ex* ibv_qp_to_qp_ex(ibv_qp* qp) {
  return &soft(qp)->qpx;
}

int ibv_modify_qp(ibv_qp* qp, ibv_qp_attr* attr, int mask) {
  if (inherited(qp->context)) return ENODEV;
  return provider(qp->context).modify_qp(soft(qp), *attr, mask);
}

int ibv_query_qp(ibv_qp* qp, ibv_qp_attr* attr, int, ibv_qp_init_attr* init_attr) {
  if (inherited(qp->context)) return ENODEV;
  core::QpAttr a;
  core::QpCap cap;
  provider(qp->context).query_qp(soft(qp), a, cap);
  std::memset(attr, 0, sizeof *attr);
  attr->qp_state = static_cast<ibv_qp_state>(a.qp_state);
  attr->cur_qp_state = static_cast<ibv_qp_state>(a.qp_state);
  attr->path_mtu = static_cast<ibv_mtu>(a.path_mtu);
  attr->qkey = a.qkey;
  attr->rq_psn = a.rq_psn;
  attr->sq_psn = a.sq_psn;
  attr->dest_qp_num = a.dest_qp_num;
  attr->qp_access_flags = static_cast<unsigned>(a.qp_access_flags);
  attr->cap.max_send_wr = cap.max_send_wr;
  attr->cap.max_recv_wr = cap.max_recv_wr;
  attr->cap.max_send_sge = cap.max_send_sge;
  attr->cap.max_recv_sge = cap.max_recv_sge;
  attr->cap.max_inline_data = cap.max_inline_data;
  to_ibv_ah_attr(soft(qp->context), a.ah_attr, attr->ah_attr);
  attr->pkey_index = a.pkey_index;
  attr->en_sqd_async_notify = a.en_sqd_async_notify;
  attr->max_rd_atomic = a.max_rd_atomic;
  attr->max_dest_rd_atomic = a.max_dest_rd_atomic;
  attr->min_rnr_timer = a.min_rnr_timer;
  attr->port_num = 1;
  attr->timeout = a.timeout;
  attr->retry_cnt = a.retry_cnt;
  attr->rnr_retry = a.rnr_retry;
  if (init_attr) {
    std::memset(init_attr, 0, sizeof *init_attr);
    init_attr->qp_context = qp->qp_context;
    init_attr->send_cq = qp->send_cq;
    init_attr->recv_cq = qp->recv_cq;
    init_attr->srq = qp->srq;
    init_attr->cap = attr->cap;
    init_attr->qp_type = qp->qp_type;
  }
  return 0;
}

int ibv_query_qp_data_in_order(ibv_qp*, enum ibv_wr_opcode, uint32_t) {
  return 0;  // no guarantee that data lands in order before the completion
}

int ibv_destroy_qp(ibv_qp* qp) {
  if (inherited(qp->context)) return ENODEV;
  SoftQp* s = soft(qp);
  const int rc = provider(qp->context).destroy_qp(s);
  if (rc) return rc;
  // Its completions still queued go with it, as mlx5 cleans its CQs when a QP is destroyed:
  // libfabric's rxm reads its CQ after closing an endpoint and would take them for live ones.
  if (qp->send_cq) soft(qp->send_cq)->rxe->remove_qp(qp->qp_num);
  if (qp->recv_cq && qp->recv_cq != qp->send_cq) soft(qp->recv_cq)->rxe->remove_qp(qp->qp_num);
  wait_acked(qp->mutex, qp->cond, qp->events_completed, s->ctx->events.remove(s->event_id));
  pthread_mutex_destroy(&qp->mutex);
  pthread_cond_destroy(&qp->cond);
  delete s;
  return 0;
}

// softrdma's own: how many completions of the QP numbered `qpn` on `context` its application has
// not polled yet (0 for no such QP). librdmacm delivers a peer's disconnect after them.
std::size_t softrdma_unread_completions(ibv_context* context, std::uint32_t qpn) {
  if (!context || inherited(context)) return 0;
  return provider(context).unread_completions(context, qpn);
}

int ibv_query_ece(ibv_qp*, ibv_ece*) {
  return EOPNOTSUPP;
}
int ibv_set_ece(ibv_qp*, ibv_ece*) {
  return EOPNOTSUPP;
}

}  // extern "C"

namespace softrdma::verbs {

SoftQp* new_soft_qp(ibv_context* context, ibv_qp_init_attr_ex* a, const core::QpCap& cap,
                    std::uint32_t qpn) {
  copy_cap(cap, a->cap);
  auto* s = new SoftQp{};
  s->ctx = soft(context);
  s->event_id = s->ctx->events.add();
  init_ibv_qp(s, context, a, qpn);
  return s;
}

void install_qp_ops(SoftContext* ctx) {
  ctx->vctx.create_qp_ex = create_qp_ex_op;
}

}  // namespace softrdma::verbs
