// One transport's verbs, as an rdma-core provider's verbs_context_ops: softroce0 (RoCEv2, rxe/)
// and softiwarp0 (iWARP, iwarp/) each have one, chosen when a context is opened and reached
// through it (provider(ctx)); the verbs core (verbs/*_api.cpp, datapath.cpp) knows no transport.
// Errors are errno values, as the verbs that call them return them.
#pragma once

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/objects.h"
#include "verbs/engine.h"

namespace softrdma::verbs {

struct SoftContext;
struct SoftQp;

class Provider {
 public:
  virtual ~Provider() = default;

  // The device (before a context exists): its index in the device list, its node GUID (host
  // order).
  virtual int device_index() const = 0;
  virtual std::uint64_t node_guid(Engine& e) const = 0;
  // A context being opened on the device: what it holds of the transport (ibv_open_device), and
  // the ibv_context_ops this transport has beyond the common ones (fill_context_ops).
  virtual void open(SoftContext* ctx) const = 0;
  virtual void fill_ops(SoftContext* ctx) const = 0;
  // XRC domains, SRQs and QPs (softroce0; iWARP has none: its create_qp never sees XRC types).
  virtual bool xrc() const { return false; }
  // On-demand paging: ODP memory regions and ibv_advise_mr (softroce0; verbs/odp_api.cpp also
  // asks that the kernel allows fault-safe copies).
  virtual bool odp() const { return false; }

  // Device and port attributes, the port's GID and P_Key tables.
  virtual core::Objects& objects(ibv_context* c) const = 0;
  virtual void query_device(ibv_context* c, ibv_device_attr& out) const = 0;
  // The capability bits of device_cap_flags_ex beyond device_cap_flags' 32 (verbs/ibta15.h).
  virtual std::uint64_t cap_flags_ex_high() const { return 0; }
  virtual void query_port(ibv_context* c, ibv_port_attr& out) const = 0;
  virtual std::vector<core::Gid> gids(ibv_context* c) const = 0;
  virtual const std::vector<std::uint16_t>& pkeys(ibv_context* c) const = 0;
  virtual bool roce_v2_gids() const = 0;  // else IB/RoCE v1, what iWARP devices report
  // The GID index a reply to a datagram sent to `to` is sent from (ibv_init_ah_from_wc).
  virtual std::size_t reply_sgid_index(ibv_context* c, const core::Gid& to) const = 0;

  // Memory regions: the access flags reg_mr takes beyond the RDMA ones (IBV_ACCESS_MW_BIND).
  virtual unsigned extra_mr_access() const = 0;
  // Async events of CQs and SRQs reach their context's async fd (before the first is made).
  virtual void route_async_events(ibv_context* c) const = 0;

  // Queue pairs: `a` checked by the core, `type` and `cap` taken from it; qpn 1: the GSI QP.
  virtual ibv_qp* create_qp(ibv_context* c, ibv_qp_init_attr_ex* a, core::QpType type,
                            core::QpCap& cap, std::uint32_t qpn) const = 0;
  virtual int modify_qp(SoftQp* qp, const ibv_qp_attr& attr, int mask) const = 0;
  virtual void query_qp(SoftQp* qp, core::QpAttr& attr, core::QpCap& cap) const = 0;
  virtual int destroy_qp(SoftQp* qp) const = 0;
  // The completions of QP `qpn` not polled yet (softrdma_unread_completions); 0 where the
  // transport's CM does not ask (iWARP ends connections through TCP).
  virtual std::size_t unread_completions(ibv_context*, std::uint32_t) const { return 0; }

  // The data path: one work request each; progress driven by a polling thread (false when
  // another thread was in a pass).
  virtual int post_send(SoftQp* qp, const core::SendWr& wr) const = 0;
  virtual int post_recv(SoftQp* qp, const core::RecvWr& wr) const = 0;
  virtual bool poll_progress(ibv_context* c) const = 0;

  // Address handles (their id) and multicast.
  virtual int create_ah(ibv_pd* pd, const ibv_ah_attr& attr, std::uint32_t& id) const = 0;
  virtual int destroy_ah(ibv_context* c, std::uint32_t id) const = 0;
  virtual int attach_mcast(ibv_qp* qp, const core::Gid& gid) const = 0;
  virtual int detach_mcast(ibv_qp* qp, const core::Gid& gid) const = 0;
};

const Provider& roce_provider();   // softroce0: verbs/provider_roce.cpp
const Provider& iwarp_provider();  // softiwarp0: verbs/provider_iwarp.cpp

// The attributes both devices take from their engine's limits (verbs/device_attr.cpp).
void fill_common_attr(const core::DeviceAttr& r, std::uint64_t node_guid, ibv_device_attr& a);
// The port attributes both devices share: active, Ethernet, 4X EDR, 2 GiB messages.
void fill_common_port_attr(ibv_port_attr& a);
// On-demand paging (verbs/odp_api.cpp): softroce0 only, where the kernel allows fault-safe
// copies (core/safe_copy.h); its odp_caps (zero elsewhere), and ibv_advise_mr.
bool odp_supported(ibv_context* c);
void fill_odp_caps(ibv_context* c, ibv_device_attr_ex& a);
int advise_mr(ibv_pd* pd, ibv_advise_mr_advice advice, std::uint32_t flags, ibv_sge* sg_list,
              std::uint32_t num_sge);

// What the core lends the providers (verbs/qp_api.cpp): a SoftQp for an engine QP of number
// `qpn` made from `a`, with the capabilities it got.
SoftQp* new_soft_qp(ibv_context* c, ibv_qp_init_attr_ex* a, const core::QpCap& cap,
                    std::uint32_t qpn);

}  // namespace softrdma::verbs
