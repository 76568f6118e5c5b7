// softroce0's XRC verbs, reached through struct verbs_context as libibverbs' inline helpers
// reach them: ibv_open_xrcd, ibv_close_xrcd, ibv_create_srq_ex (basic and XRC SRQs) and
// ibv_get_srq_num. softiwarp0 leaves them NULL, so the helpers answer EOPNOTSUPP (iWARP has no
// XRC), as does ibv_open_qp on both (docs/verbs-abi.md).
#include <fcntl.h>

#include <cerrno>

#include "verbs/objects.h"

using namespace softrdma;
using namespace softrdma::verbs;

namespace {

ibv_xrcd* open_xrcd(ibv_context* context, ibv_xrcd_init_attr* attr) {
  if (inherited(context)) return fail<ibv_xrcd>(ENODEV);
  if (attr->comp_mask & ~static_cast<uint32_t>(IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS)) {
    return fail<ibv_xrcd>(EOPNOTSUPP);
  }
  // As rdma-core's ibv_cmd_open_xrcd: both fields named, and only O_CREAT and O_EXCL.
  if (!(attr->comp_mask & IBV_XRCD_INIT_ATTR_FD) ||
      !(attr->comp_mask & IBV_XRCD_INIT_ATTR_OFLAGS) || (attr->oflags & ~(O_CREAT | O_EXCL))) {
    return fail<ibv_xrcd>(EINVAL);
  }
  int err = 0;
  core::Xrcd* x = objects(context).open_xrcd(attr->fd, attr->oflags, &err);
  if (!x) return fail<ibv_xrcd>(err);
  auto* s = new SoftXrcd{};
  s->xrcd.context = context;
  s->core = x;
  return &s->xrcd;
}

int close_xrcd(ibv_xrcd* xrcd) {
  if (inherited(xrcd->context)) return ENODEV;
  const int rc = objects(xrcd->context).close_xrcd(soft(xrcd)->core);
  if (rc == 0) delete soft(xrcd);
  return rc;
}

ibv_srq* create_srq_ex(ibv_context* context, ibv_srq_init_attr_ex* a) {
  if (inherited(context)) return fail<ibv_srq>(ENODEV);
  constexpr uint32_t kKnown =
      IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
  if (a->comp_mask & ~kKnown) return fail<ibv_srq>(EOPNOTSUPP);  // tag matching
  const ibv_srq_type type = (a->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) ? a->srq_type : IBV_SRQT_BASIC;
  if (type != IBV_SRQT_BASIC && type != IBV_SRQT_XRC) return fail<ibv_srq>(EOPNOTSUPP);
  ibv_pd* pd = (a->comp_mask & IBV_SRQ_INIT_ATTR_PD) ? a->pd : nullptr;
  if (!pd) return fail<ibv_srq>(EINVAL);
  provider(context).route_async_events(context);
  int err = 0;
  core::Srq* s = nullptr;
  if (type == IBV_SRQT_XRC) {
    ibv_xrcd* xrcd = (a->comp_mask & IBV_SRQ_INIT_ATTR_XRCD) ? a->xrcd : nullptr;
    ibv_cq* cq = (a->comp_mask & IBV_SRQ_INIT_ATTR_CQ) ? a->cq : nullptr;
    if (!xrcd || !cq) return fail<ibv_srq>(EINVAL);
    s = objects(context).create_xrc_srq(soft(pd)->rxe, soft(xrcd)->core, soft(cq)->rxe,
                                        a->attr.max_wr, a->attr.max_sge, a->attr.srq_limit, &err);
  } else {
    s = objects(context).create_srq(soft(pd)->rxe, a->attr.max_wr, a->attr.max_sge,
                                    a->attr.srq_limit, &err);
  }
  if (!s) return fail<ibv_srq>(err);
  return new_soft_srq(s, pd, a->srq_context);
}

int get_srq_num(ibv_srq* srq, uint32_t* srq_num) {
  *srq_num = soft(srq)->rxe->srqn;
  return 0;
}

}  // namespace

namespace softrdma::verbs {

void fill_xrc_ops(SoftContext* ctx) {
  ctx->vctx.open_xrcd = open_xrcd;
  ctx->vctx.close_xrcd = close_xrcd;
  ctx->vctx.create_srq_ex = create_srq_ex;
  ctx->vctx.get_srq_num = get_srq_num;
}

}  // namespace softrdma::verbs
