// The libibverbs objects softrdma hands to applications. Each starts with the
// public struct from <infiniband/verbs.h> (so applications' inline verbs work)
// and then points at the engine object behind it.
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "rxe/device.h"
#include "verbs/async_events.h"
#include "verbs/engine.h"
#include "verbs/ibta15.h"
#include "verbs/provider.h"

namespace softrdma::verbs {

// Shaped like rdma-core's struct verbs_device: the ibv_device, then the provider
// ops pointer that mlx5dv/efadv compare against their own ("not mine").
struct SoftDevice {
  ibv_device dev;
  const void* ops;
  int refcount;
};

struct SoftContext {
  verbs_context vctx;  // applications see &vctx.context
  Engine* engine;
  int async_write_fd;
  const Provider* provider = nullptr;  // its transport's verbs, chosen by ibv_open_device
  unsigned generation = 0;             // Engine::generation() when opened
  AsyncEvents events;                  // what the async fd carries, by object
};

struct SoftPd {
  ibv_pd pd;
  core::Pd* rxe;
};

struct SoftMr {
  ibv_mr mr;
  std::shared_ptr<core::Mr> rxe;
};

struct SoftMw {
  ibv_mw mw;  // mw.handle names the engine's window (its key >> 8)
};

struct SoftChannel {
  ibv_comp_channel ch;
  int write_fd;
};

struct SoftCq {
  ibv_cq_ex cqx;  // its first fields are exactly struct ibv_cq
  core::Cq* rxe;
  std::uint64_t wc_flags;  // ibv_create_cq_ex's wc_flags
  core::Wc cur;            // the completion start_poll/next_poll stands on
  std::uint64_t event_id = 0;  // its number on the async fd (AsyncEvents)
};

struct SoftSrq {
  ibv_srq srq;
  core::Srq* rxe;
  std::uint64_t event_id = 0;  // its number on the async fd (AsyncEvents)
};

struct SoftXrcd {
  ibv_xrcd xrcd;
  core::Xrcd* core;
};

struct SoftAh {
  ibv_ah ah;
  std::uint32_t id;
};

// A work request built with the ibv_wr_* calls, posted by wr_complete.
struct PendingWr {
  core::SendWr wr;
  std::vector<core::Sge> sge;
  std::vector<std::uint8_t> inline_data;
};

struct SoftQp {
  ibv_qp_ex qpx;  // qp_base first: applications see &qpx.qp_base
  // rdma-core 45's ibv_qp_ex goes on with wr_flush: programs built on its headers find it here.
  WrFlushFn wr_flush;
  // The provider's QP (softroce0: an rxe::Qp, softiwarp0: an iwarp::Qp) and what else it keeps
  // for the QP (softiwarp0: where its events go); only the provider that made them reads them.
  void* transport = nullptr;
  std::shared_ptr<void> transport_state;
  SoftContext* ctx;
  std::vector<PendingWr> pending;  // between wr_start and wr_complete
  int wr_error = 0;
  std::uint64_t event_id = 0;  // its number on the async fd (AsyncEvents)
};

static_assert(offsetof(SoftQp, wr_flush) == sizeof(ibv_qp_ex));

inline SoftContext* soft(ibv_context* c) {
  return reinterpret_cast<SoftContext*>(reinterpret_cast<char*>(c) -
                                        offsetof(verbs_context, context));
}
inline SoftPd* soft(ibv_pd* p) {
  return reinterpret_cast<SoftPd*>(p);
}
inline SoftMr* soft(ibv_mr* m) {
  return reinterpret_cast<SoftMr*>(m);
}
inline SoftCq* soft(ibv_cq* c) {
  return reinterpret_cast<SoftCq*>(c);
}
inline SoftCq* soft(ibv_cq_ex* c) {
  return reinterpret_cast<SoftCq*>(c);
}
inline SoftSrq* soft(ibv_srq* s) {
  return reinterpret_cast<SoftSrq*>(s);
}
inline SoftQp* soft(ibv_qp* q) {
  return reinterpret_cast<SoftQp*>(q);
}
inline SoftQp* soft(ibv_qp_ex* q) {
  return reinterpret_cast<SoftQp*>(q);
}
inline SoftXrcd* soft(ibv_xrcd* x) {
  return reinterpret_cast<SoftXrcd*>(x);
}
inline SoftAh* soft(ibv_ah* a) {
  return reinterpret_cast<SoftAh*>(a);
}
inline SoftChannel* soft(ibv_comp_channel* c) {
  return reinterpret_cast<SoftChannel*>(c);
}
inline rxe::Device& dev(ibv_context* c) {
  return soft(c)->engine->device();
}
// The iWARP device of a softiwarp0 context (its provider's and the CM's); nullptr for softroce0.
inline iwarp::Device* iw(ibv_context* c) {
  SoftContext* s = soft(c);
  return s->provider == &iwarp_provider() ? &s->engine->iwarp_device() : nullptr;
}
// The context's transport (verbs/provider.h).
inline const Provider& provider(ibv_context* c) {
  return *soft(c)->provider;
}
// The context's verbs objects (PDs, MRs, CQs, SRQs), whichever its transport.
inline core::Objects& objects(ibv_context* c) {
  return provider(c).objects(c);
}

// errno = err, and the nullptr a verb that makes an object returns on failure.
template <class T>
T* fail(int err) {
  errno = err;
  return nullptr;
}

// A context (and everything made on it) that a forked child inherited from its parent: it
// stays the parent's, and verbs on it fail here with ENODEV instead of reaching an engine
// whose threads are not in this process.
inline bool inherited(ibv_context* c) {
  return soft(c)->generation != Engine::generation();
}

// Shared by the API and the data path.
void fill_context_ops(SoftContext* ctx);
void fill_qp_ex_ops(ibv_qp_ex* qpx);
// SoftQp::wr_flush (verbs/datapath.cpp).
void wr_flush_op(ibv_qp_ex* q, uint32_t rkey, uint64_t addr, size_t len, uint8_t type,
                 uint8_t level);
void fill_cq_ex_ops(ibv_cq_ex* cqx);
void fill_mw_ops(SoftContext* ctx);   // softroce0's memory windows (verbs/mw_api.cpp)
void fill_xrc_ops(SoftContext* ctx);  // softroce0's XRC verbs (verbs/xrc_api.cpp)
// An ibv_srq for the engine's SRQ `s` made on `pd` (ibv_create_srq, ibv_create_srq_ex).
ibv_srq* new_soft_srq(core::Srq* s, ibv_pd* pd, void* srq_context);
// A BIND_MW work request's window fields: `mw` to get key `rkey` over `info`.
void fill_bind(const ibv_mw* mw, std::uint32_t rkey, const ibv_mw_bind_info& info,
               core::SendWr& out);
int convert_send_wr(SoftQp* qp, const ibv_send_wr* wr, core::SendWr& out);
void convert_wc(const core::Wc& in, ibv_wc& out);
void to_ibv_ah_attr(SoftContext* ctx, const core::AhAttr& in, ibv_ah_attr& out);

}  // namespace softrdma::verbs
