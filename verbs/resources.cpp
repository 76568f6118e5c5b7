// Protection domains, memory regions, completion channels and queues, shared
// receive queues, address handles and queue pairs.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "verbs/objects.h"

using namespace softrdma;
using namespace softrdma::verbs;

#undef ibv_reg_mr
#undef ibv_reg_mr_iova

namespace {

void init_sync(pthread_mutex_t& m, pthread_cond_t& c) {
  pthread_mutex_init(&m, nullptr);
  pthread_cond_init(&c, nullptr);
}

ibv_mr* reg_mr_common(ibv_pd* pd, void* addr, size_t length, uint64_t iova, unsigned access) {
  if (inherited(pd->context)) return fail<ibv_mr>(ENODEV);
  constexpr unsigned kRdma = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                             IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
  // Memory windows on softroce0 only (verbs/mw_api.cpp).
  // On-demand paging where the device offers it (verbs/odp_api.cpp).
  const unsigned odp = odp_supported(pd->context) ? IBV_ACCESS_ON_DEMAND : 0;
  const unsigned known = kRdma | IBV_ACCESS_RELAXED_ORDERING | IBV_ACCESS_OPTIONAL_RANGE |
                         provider(pd->context).extra_mr_access() | odp;
  if (access & ~known) {
    // Zero-based, huge-page hints (and windows and on-demand paging on softiwarp0) are not
    // implemented.
    return fail<ibv_mr>(EOPNOTSUPP);
  }
  int err = 0;
  const unsigned acc =
      access & (kRdma | IBV_ACCESS_MW_BIND | IBV_ACCESS_ON_DEMAND | kIbvAccessFlushGlobal);
  auto mr = objects(pd->context).reg_mr(soft(pd)->rxe, addr, length, iova, acc, &err);
  if (!mr) return fail<ibv_mr>(err);
  auto* m = new SoftMr{};
  m->rxe = mr;
  m->mr.context = pd->context;
  m->mr.pd = pd;
  m->mr.addr = addr;
  m->mr.length = length;
  m->mr.handle = mr->lkey;
  m->mr.lkey = mr->lkey;
  m->mr.rkey = mr->rkey;
  return &m->mr;
}

}  // namespace

extern "C" {

ibv_pd* ibv_alloc_pd(ibv_context* context) {
  if (inherited(context)) return fail<ibv_pd>(ENODEV);
  auto* p = new SoftPd{};
  p->pd.context = context;
  p->rxe = objects(context).alloc_pd();
  p->pd.handle = p->rxe->handle;
  return &p->pd;
}

int ibv_dealloc_pd(ibv_pd* pd) {
  if (inherited(pd->context)) return ENODEV;
  const int rc = objects(pd->context).dealloc_pd(soft(pd)->rxe);
  if (rc) return rc;
  delete soft(pd);
  return 0;
}

ibv_mr* ibv_reg_mr(ibv_pd* pd, void* addr, size_t length, int access) {
  return reg_mr_common(pd, addr, length, reinterpret_cast<uint64_t>(addr),
                       static_cast<unsigned>(access));
}

ibv_mr* ibv_reg_mr_iova(ibv_pd* pd, void* addr, size_t length, uint64_t iova, int access) {
  return reg_mr_common(pd, addr, length, iova, static_cast<unsigned>(access));
}

ibv_mr* ibv_reg_mr_iova2(ibv_pd* pd, void* addr, size_t length, uint64_t iova,
                         unsigned int access) {
  return reg_mr_common(pd, addr, length, iova, access);
}

ibv_mr* ibv_reg_dmabuf_mr(ibv_pd*, uint64_t, size_t, uint64_t, int, int) {
  return fail<ibv_mr>(EOPNOTSUPP);
}

int ibv_rereg_mr(ibv_mr* mr, int flags, ibv_pd* pd, void* addr, size_t length, int access) {
  if (flags &
      ~(IBV_REREG_MR_CHANGE_TRANSLATION | IBV_REREG_MR_CHANGE_PD | IBV_REREG_MR_CHANGE_ACCESS)) {
    return IBV_REREG_MR_ERR_INPUT;
  }
  if (inherited(mr->context)) return IBV_REREG_MR_ERR_INPUT;
  SoftMr* m = soft(mr);
  core::Pd* newpd = (flags & IBV_REREG_MR_CHANGE_PD) ? soft(pd)->rxe : nullptr;
  void* newaddr = (flags & IBV_REREG_MR_CHANGE_TRANSLATION) ? addr : nullptr;
  const unsigned acc =
      (flags & IBV_REREG_MR_CHANGE_ACCESS) ? static_cast<unsigned>(access) : m->rxe->access;
  if ((acc & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
      !(acc & IBV_ACCESS_LOCAL_WRITE)) {
    return IBV_REREG_MR_ERR_INPUT;
  }
  // A region stays on-demand or not (its copies depend on it), and an implicit one covers the
  // whole address space: no new translation.
  const bool was_odp = m->rxe->on_demand();
  if (was_odp != ((acc & IBV_ACCESS_ON_DEMAND) != 0) ||
      (was_odp && newaddr && m->rxe->length == core::kImplicitOdpLength)) {
    return IBV_REREG_MR_ERR_INPUT;
  }
  // FLUSH access as ibv_reg_mr takes it: global visibility where the device has it, never
  // persistence (docs/verbs-abi.md).
  if ((acc & kIbvAccessFlushPersistent) ||
      ((acc & kIbvAccessFlushGlobal) &&
       !(provider(mr->context).extra_mr_access() & kIbvAccessFlushGlobal))) {
    return IBV_REREG_MR_ERR_INPUT;
  }
  core::MrTable& mrs = objects(mr->context).mrs();
  if (!mrs.rereg(mr->lkey, newpd, newaddr, length, reinterpret_cast<uint64_t>(addr), acc)) {
    return IBV_REREG_MR_ERR_INPUT;
  }
  if (newpd) mr->pd = pd;
  if (newaddr) {
    mr->addr = addr;
    mr->length = length;
  }
  return 0;
}

int ibv_dereg_mr(ibv_mr* mr) {
  if (inherited(mr->context)) return ENODEV;
  const int rc = objects(mr->context).dereg_mr(mr->lkey);
  if (rc) return rc;
  delete soft(mr);
  return 0;
}

ibv_comp_channel* ibv_create_comp_channel(ibv_context* context) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return nullptr;
  fcntl(fds[1], F_SETFL, O_NONBLOCK);
  auto* c = new SoftChannel{};
  c->ch.context = context;
  c->ch.fd = fds[0];
  c->ch.refcnt = 0;
  c->write_fd = fds[1];
  return &c->ch;
}

int ibv_destroy_comp_channel(ibv_comp_channel* channel) {
  if (channel->refcnt) return EBUSY;
  close(channel->fd);
  close(soft(channel)->write_fd);
  delete soft(channel);
  return 0;
}

}  // extern "C"

namespace {

ibv_cq_ex* create_cq_common(ibv_context* context, const ibv_cq_init_attr_ex& a) {
  if (inherited(context)) return fail<ibv_cq_ex>(ENODEV);
  constexpr uint64_t kSupported =
      IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM | IBV_WC_EX_WITH_SRC_QP |
      IBV_WC_EX_WITH_SLID | IBV_WC_EX_WITH_SL | IBV_WC_EX_WITH_DLID_PATH_BITS |
      IBV_WC_EX_WITH_COMPLETION_TIMESTAMP;
  if (a.wc_flags & ~kSupported) return fail<ibv_cq_ex>(EOPNOTSUPP);
  if (a.comp_vector != 0) return fail<ibv_cq_ex>(EINVAL);
  if (a.comp_mask & ~(IBV_CQ_INIT_ATTR_MASK_FLAGS | IBV_CQ_INIT_ATTR_MASK_PD)) {
    return fail<ibv_cq_ex>(EOPNOTSUPP);
  }
  int err = 0;
  provider(context).route_async_events(context);
  core::Cq* cq = objects(context).create_cq(a.cqe, &err);
  if (!cq) return fail<ibv_cq_ex>(err);
  auto* c = new SoftCq{};
  c->rxe = cq;
  c->event_id = soft(context)->events.add();
  c->wc_flags = a.wc_flags;
  cq->set_timestamps(a.wc_flags & IBV_WC_EX_WITH_COMPLETION_TIMESTAMP);
  cq->user = c;
  ibv_cq_ex& x = c->cqx;
  x.context = context;
  x.channel = a.channel;
  x.cq_context = a.cq_context;
  x.handle = 0;
  x.cqe = static_cast<int>(a.cqe);
  init_sync(x.mutex, x.cond);
  fill_cq_ex_ops(&x);
  if (a.channel) {
    ++a.channel->refcnt;
    const int fd = soft(a.channel)->write_fd;
    cq->set_notify([c, fd] {
      ibv_cq* self = reinterpret_cast<ibv_cq*>(&c->cqx);
      (void)!write(fd, &self, sizeof self);
    });
  }
  return &c->cqx;
}

}  // namespace

namespace softrdma::verbs {
ibv_cq_ex* create_cq_ex_op(ibv_context* context, ibv_cq_init_attr_ex* attr) {
  return create_cq_common(context, *attr);
}
}  // namespace softrdma::verbs

extern "C" {

ibv_cq* ibv_create_cq(ibv_context* context, int cqe, void* cq_context, ibv_comp_channel* channel,
                      int comp_vector) {
  if (cqe <= 0) return fail<ibv_cq>(EINVAL);
  ibv_cq_init_attr_ex a{};
  a.cqe = static_cast<uint32_t>(cqe);
  a.cq_context = cq_context;
  a.channel = channel;
  a.comp_vector = static_cast<uint32_t>(comp_vector);
  a.wc_flags = IBV_WC_STANDARD_FLAGS;
  return reinterpret_cast<ibv_cq*>(create_cq_common(context, a));
}

int ibv_resize_cq(ibv_cq* cq, int cqe) {
  if (inherited(cq->context)) return ENODEV;
  if (cqe <= 0 || !soft(cq)->rxe->resize(static_cast<uint32_t>(cqe))) return EINVAL;
  cq->cqe = cqe;
  return 0;
}

int ibv_destroy_cq(ibv_cq* cq) {
  if (inherited(cq->context)) return ENODEV;
  SoftCq* c = soft(cq);
  const int rc = objects(cq->context).destroy_cq(c->rxe);
  if (rc) return rc;
  if (cq->channel) --cq->channel->refcnt;
  wait_acked(cq->mutex, cq->cond, cq->async_events_completed,
             soft(cq->context)->events.remove(c->event_id));
  pthread_mutex_destroy(&cq->mutex);
  pthread_cond_destroy(&cq->cond);
  delete c;
  return 0;
}

int ibv_get_cq_event(ibv_comp_channel* channel, ibv_cq** cq, void** cq_context) {
  ibv_cq* got = nullptr;
  const ssize_t n = read(channel->fd, &got, sizeof got);
  if (n != static_cast<ssize_t>(sizeof got)) return -1;
  *cq = got;
  *cq_context = got->cq_context;
  return 0;
}

void ibv_ack_cq_events(ibv_cq* cq, unsigned int nevents) {
  pthread_mutex_lock(&cq->mutex);
  cq->comp_events_completed += nevents;
  pthread_cond_signal(&cq->cond);
  pthread_mutex_unlock(&cq->mutex);
}

}  // extern "C"

ibv_srq* softrdma::verbs::new_soft_srq(core::Srq* s, ibv_pd* pd, void* srq_context) {
  auto* x = new SoftSrq{};
  x->rxe = s;
  s->user = x;
  x->srq.context = pd->context;
  x->event_id = soft(pd->context)->events.add();
  x->srq.srq_context = srq_context;
  x->srq.pd = pd;
  init_sync(x->srq.mutex, x->srq.cond);
  return &x->srq;
}

extern "C" {

ibv_srq* ibv_create_srq(ibv_pd* pd, ibv_srq_init_attr* attr) {
  if (inherited(pd->context)) return fail<ibv_srq>(ENODEV);
  int err = 0;
  provider(pd->context).route_async_events(pd->context);
  core::Srq* s = objects(pd->context)
                     .create_srq(soft(pd)->rxe, attr->attr.max_wr, attr->attr.max_sge,
                                 attr->attr.srq_limit, &err);
  if (!s) return fail<ibv_srq>(err);
  return new_soft_srq(s, pd, attr->srq_context);
}

int ibv_modify_srq(ibv_srq* srq, ibv_srq_attr* attr, int mask) {
  if (inherited(srq->context)) return ENODEV;
  std::optional<uint32_t> max_wr, limit;
  if (mask & IBV_SRQ_MAX_WR) max_wr = attr->max_wr;
  if (mask & IBV_SRQ_LIMIT) limit = attr->srq_limit;
  return soft(srq)->rxe->modify(max_wr, limit);
}

int ibv_query_srq(ibv_srq* srq, ibv_srq_attr* attr) {
  attr->max_wr = soft(srq)->rxe->max_wr();
  attr->max_sge = soft(srq)->rxe->max_sge();
  attr->srq_limit = soft(srq)->rxe->limit();
  return 0;
}

int ibv_destroy_srq(ibv_srq* srq) {
  if (inherited(srq->context)) return ENODEV;
  const int rc = objects(srq->context).destroy_srq(soft(srq)->rxe);
  if (rc) return rc;
  wait_acked(srq->mutex, srq->cond, srq->events_completed,
             soft(srq->context)->events.remove(soft(srq)->event_id));
  pthread_mutex_destroy(&srq->mutex);
  pthread_cond_destroy(&srq->cond);
  delete soft(srq);
  return 0;
}

ibv_ah* ibv_create_ah(ibv_pd* pd, ibv_ah_attr* attr) {
  if (inherited(pd->context)) return fail<ibv_ah>(ENODEV);
  std::uint32_t id = 0;
  if (const int err = provider(pd->context).create_ah(pd, *attr, id)) return fail<ibv_ah>(err);
  auto* x = new SoftAh{};
  x->id = id;
  x->ah.context = pd->context;
  x->ah.pd = pd;
  x->ah.handle = id;
  return &x->ah;
}

int ibv_destroy_ah(ibv_ah* ah) {
  if (inherited(ah->context)) return ENODEV;
  const int rc = provider(ah->context).destroy_ah(ah->context, soft(ah)->id);
  if (rc) return rc;
  delete soft(ah);
  return 0;
}

int ibv_init_ah_from_wc(ibv_context* context, uint8_t port_num, ibv_wc* wc, ibv_grh* grh,
                        ibv_ah_attr* ah_attr) {
  if (port_num != 1 || !(wc->wc_flags & IBV_WC_GRH)) {
    errno = EINVAL;
    return -1;
  }
  std::memset(ah_attr, 0, sizeof *ah_attr);
  ah_attr->is_global = 1;
  ah_attr->port_num = 1;
  ah_attr->grh.hop_limit = 64;
  const auto* raw = reinterpret_cast<const uint8_t*>(grh);
  core::Gid to{};  // the address the datagram was sent to: the reply is sent from its GID
  if ((raw[20] >> 4) == 4) {
    // RoCEv2 over IPv4: the IPv4 header sits at offset 20 of the GRH.
    uint8_t* g = ah_attr->grh.dgid.raw;
    g[10] = g[11] = 0xFF;
    std::memcpy(g + 12, raw + 20 + 12, 4);  // the sender's address
    to[10] = to[11] = 0xFF;
    std::memcpy(to.data() + 12, raw + 20 + 16, 4);
    ah_attr->grh.traffic_class = raw[20 + 1];
  } else {
    std::memcpy(ah_attr->grh.dgid.raw, grh->sgid.raw, 16);
    std::memcpy(to.data(), grh->dgid.raw, 16);
    ah_attr->grh.traffic_class = static_cast<uint8_t>((be32toh(grh->version_tclass_flow) >> 20));
  }
  ah_attr->grh.sgid_index = static_cast<uint8_t>(provider(context).reply_sgid_index(context, to));
  return 0;
}

ibv_ah* ibv_create_ah_from_wc(ibv_pd* pd, ibv_wc* wc, ibv_grh* grh, uint8_t port_num) {
  ibv_ah_attr a;
  if (ibv_init_ah_from_wc(pd->context, port_num, wc, grh, &a)) return nullptr;
  return ibv_create_ah(pd, &a);
}

// Multicast is addressed by the GID (the IP group); the LID is not used.
int ibv_attach_mcast(ibv_qp* qp, const union ibv_gid* gid, uint16_t) {
  if (!qp || !gid) return EINVAL;
  core::Gid g;
  std::memcpy(g.data(), gid->raw, g.size());
  return provider(qp->context).attach_mcast(qp, g);
}

int ibv_detach_mcast(ibv_qp* qp, const union ibv_gid* gid, uint16_t) {
  if (!qp || !gid) return EINVAL;
  core::Gid g;
  std::memcpy(g.data(), gid->raw, g.size());
  return provider(qp->context).detach_mcast(qp, g);
}

}  // extern "C"

namespace softrdma::verbs {

void to_ibv_ah_attr(SoftContext* ctx, const core::AhAttr& in, ibv_ah_attr& out) {
  std::memset(&out, 0, sizeof out);
  std::memcpy(out.grh.dgid.raw, in.dgid.data(), 16);
  // Back from the netdev address to its GID index (none while the QP has no address vector,
  // as a softiwarp0 QP never has).
  if (in.dgid != core::Gid{}) {
    const auto& table = ctx->engine->gid_table();
    for (std::size_t i = 0; i < table.size(); ++i) {
      if (table[i].address == in.sgid_index) {
        out.grh.sgid_index = static_cast<std::uint8_t>(i);
        break;
      }
    }
  }
  out.grh.hop_limit = in.hop_limit;
  out.grh.traffic_class = in.traffic_class;
  out.grh.flow_label = in.flow_label;
  out.dlid = in.dlid;
  out.sl = in.sl;
  out.is_global = in.is_global;
  out.port_num = 1;
}

}  // namespace softrdma::verbs
