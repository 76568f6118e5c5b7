// Memory windows through ibv_context.ops: ibv_alloc_mw, ibv_dealloc_mw and ibv_bind_mw (type 1),
// and the BIND_MW work request of type 2 windows (ibv_post_send, ibv_wr_bind_mw). softroce0
// only, installed by its provider (verbs/provider_roce.cpp); softiwarp0 has none (max_mw 0,
// EOPNOTSUPP), docs/verbs.md.
#include <cerrno>

#include "verbs/objects.h"

using namespace softrdma;
using namespace softrdma::verbs;

namespace {

ibv_mw* alloc_mw(ibv_pd* pd, ibv_mw_type type) {
  if (inherited(pd->context)) return fail<ibv_mw>(ENODEV);
  if (type != IBV_MW_TYPE_1 && type != IBV_MW_TYPE_2) return fail<ibv_mw>(EINVAL);
  int err = 0;
  const std::uint32_t key =
      dev(pd->context).alloc_mw(soft(pd)->rxe, static_cast<core::MwType>(type), &err);
  if (!key) return fail<ibv_mw>(err);
  auto* m = new SoftMw{};
  m->mw.context = pd->context;
  m->mw.pd = pd;
  m->mw.rkey = key;
  m->mw.handle = key >> 8;
  m->mw.type = type;
  return &m->mw;
}

int dealloc_mw(ibv_mw* mw) {
  if (inherited(mw->context)) return ENODEV;
  const int rc = dev(mw->context).dealloc_mw(mw->handle);
  if (rc) return rc;
  delete reinterpret_cast<SoftMw*>(mw);
  return 0;
}

// Type 1: a work request on the QP's send queue, as rdma-core's providers post it; the
// window's key moves on to its next value (ibv_inc_rkey) when it is posted.
int bind_mw(ibv_qp* qp, ibv_mw* mw, ibv_mw_bind* b) {
  if (inherited(qp->context)) return ENODEV;
  if (mw->type != IBV_MW_TYPE_1 || mw->context != qp->context) return EINVAL;
  core::SendWr wr;
  wr.wr_id = b->wr_id;
  wr.opcode = core::WrOpcode::kBindMw;
  wr.send_flags = b->send_flags;
  const std::uint32_t rkey = ibv_inc_rkey(mw->rkey);
  fill_bind(mw, rkey, b->bind_info, wr);
  const int rc = provider(qp->context).post_send(soft(qp), wr);
  if (rc == 0) mw->rkey = rkey;
  return rc;
}

}  // namespace

namespace softrdma::verbs {

void fill_bind(const ibv_mw* mw, std::uint32_t rkey, const ibv_mw_bind_info& info,
               core::SendWr& out) {
  out.mw_handle = mw->handle;
  out.mw_rkey = rkey;
  out.mw_mr_lkey = info.mr ? info.mr->lkey : 0;
  out.mw_addr = info.addr;
  out.mw_length = info.length;
  out.mw_access = info.mw_access_flags;
}

void fill_mw_ops(SoftContext* ctx) {
  ibv_context_ops& o = ctx->vctx.context.ops;
  o.alloc_mw = alloc_mw;
  o.dealloc_mw = dealloc_mw;
  o.bind_mw = bind_mw;
}

}  // namespace softrdma::verbs
