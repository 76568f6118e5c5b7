// softiwarp0's provider: the verbs over iwarp::Device (RFC 5040/5044 over TCP), verbs/provider.h.
// Connected RC QPs only: no address handles, multicast or memory windows (EOPNOTSUPP).
#include <algorithm>
#include <mutex>

#include "verbs/objects.h"
#include "verbs/provider.h"

namespace softrdma::verbs {
void register_iwarp_qp(SoftQp* s);
void unregister_iwarp_qp(SoftQp* s);
iwarp::Qp* iwarp_qp(const SoftQp* s);  // the QP's transport (verbs/iwarp_cm.cpp)
void post_object_event(core::AsyncEventType type, core::Cq* cq, core::Srq* srq);
}  // namespace softrdma::verbs

namespace softrdma::verbs {
namespace {

// The node GUID of softiwarp0: its MAC address (as siw), in the first six bytes.
std::uint64_t iwarp_node_guid(iwarp::Device& d) {
  const core::Gid g = d.gid();
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = v << 8 | g[static_cast<std::size_t>(i)];
  return v;
}

class IwarpProvider final : public Provider {
 public:
  int device_index() const override { return 1; }
  std::uint64_t node_guid(Engine& e) const override { return iwarp_node_guid(e.iwarp_device()); }
  void open(SoftContext* ctx) const override { ctx->engine->iwarp_device(); }  // created now
  void fill_ops(SoftContext*) const override {}  // alloc_mw left NULL: EOPNOTSUPP

  core::Objects& objects(ibv_context* c) const override { return *iw(c); }
  void query_device(ibv_context* c, ibv_device_attr& a) const override {
    iwarp::Device& d = *iw(c);
    fill_common_attr(d.attr(), iwarp_node_guid(d), a);
    a.vendor_part_id += 1;
    a.device_cap_flags = IBV_DEVICE_MEM_MGT_EXTENSIONS;
    a.atomic_cap = IBV_ATOMIC_NONE;  // no RFC 7306
    a.max_pkeys = 0;
  }
  void query_port(ibv_context*, ibv_port_attr& a) const override {
    fill_common_port_attr(a);
    a.active_mtu = IBV_MTU_1024;
    a.gid_tbl_len = 1;
    a.port_cap_flags = IBV_PORT_CM_SUP | IBV_PORT_DEVICE_MGMT_SUP;
    a.pkey_tbl_len = 1;
  }
  // One GID, derived from its MAC address.
  std::vector<core::Gid> gids(ibv_context* c) const override { return {iw(c)->gid()}; }
  // The default partition alone.
  const std::vector<std::uint16_t>& pkeys(ibv_context*) const override {
    static const std::vector<std::uint16_t> kDefault{0xFFFF};
    return kDefault;
  }
  bool roce_v2_gids() const override { return false; }
  std::size_t reply_sgid_index(ibv_context*, const core::Gid&) const override { return 0; }

  unsigned extra_mr_access() const override { return 0; }  // no windows to bind
  // CQ and SRQ events here; QP events through register_iwarp_qp.
  void route_async_events(ibv_context* c) const override {
    static std::once_flag once;
    iwarp::Device& d = *iw(c);
    std::call_once(once, [&d] { d.set_object_event_handler(post_object_event); });
  }

  // RC only; it starts in INIT, as iWARP QPs do (siw's IDLE, which the kernel reports as
  // INIT), and reaches RTS through the MPA negotiation the CM starts (docs/iwarp.md).
  ibv_qp* create_qp(ibv_context* c, ibv_qp_init_attr_ex* a, core::QpType type, core::QpCap& cap,
                    std::uint32_t qpn) const override {
    if (qpn != 0) return fail<ibv_qp>(EOPNOTSUPP);  // no GSI QP on iWARP
    if ((a->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) &&
        (a->send_ops_flags &
         (IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_ATOMIC_WRITE | kIbvQpExWithFlush))) {
      // No memory windows on softiwarp0, and no ATOMIC WRITE or FLUSH: RFC 7306 has neither.
      return fail<ibv_qp>(EOPNOTSUPP);
    }
    int err = 0;
    iwarp::Qp* q =
        iw(c)->create_qp(soft(a->pd)->rxe, type, soft(a->send_cq)->rxe, soft(a->recv_cq)->rxe,
                         a->srq ? soft(a->srq)->rxe : nullptr, cap, a->sq_sig_all != 0, &err);
    if (!q) return fail<ibv_qp>(err);
    SoftQp* s = new_soft_qp(c, a, cap, q->qpn());
    s->transport = q;
    s->qpx.qp_base.state = static_cast<ibv_qp_state>(q->state());
    register_iwarp_qp(s);
    return &s->qpx.qp_base;
  }
  int modify_qp(SoftQp* s, const ibv_qp_attr& attr, int mask) const override {
    if (!(mask & IBV_QP_STATE)) return 0;  // attributes of a connection come from the CM
    const int rc = iwarp_qp(s)->modify_state(static_cast<core::QpState>(attr.qp_state));
    if (rc) return rc;
    s->qpx.qp_base.state = static_cast<ibv_qp_state>(iwarp_qp(s)->state());
    return 0;
  }
  void query_qp(SoftQp* s, core::QpAttr& a, core::QpCap& cap) const override {
    iwarp::Qp* q = iwarp_qp(s);
    a.qp_state = q->state();
    cap = q->cap();
    a.max_rd_atomic = static_cast<std::uint8_t>(std::min<unsigned>(q->ord(), 255));
    a.max_dest_rd_atomic = static_cast<std::uint8_t>(std::min<unsigned>(q->ird(), 255));
    a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    a.path_mtu = core::Mtu::k1024;
  }
  int destroy_qp(SoftQp* s) const override {
    unregister_iwarp_qp(s);
    return iw(s->qpx.qp_base.context)->destroy_qp(iwarp_qp(s));
  }

  int post_send(SoftQp* qp, const core::SendWr& wr) const override {
    return iwarp_qp(qp)->post_send(std::span(&wr, 1));
  }
  int post_recv(SoftQp* qp, const core::RecvWr& wr) const override {
    return iwarp_qp(qp)->post_recv(std::span(&wr, 1));
  }
  bool poll_progress(ibv_context* c) const override { return iw(c)->poll_progress(); }

  int create_ah(ibv_pd*, const ibv_ah_attr&, std::uint32_t&) const override {
    return EOPNOTSUPP;  // connected QPs only
  }
  int destroy_ah(ibv_context*, std::uint32_t) const override { return EINVAL; }  // none made
  int attach_mcast(ibv_qp*, const core::Gid&) const override { return EOPNOTSUPP; }
  int detach_mcast(ibv_qp*, const core::Gid&) const override { return EINVAL; }  // none joined
};

}  // namespace

const Provider& iwarp_provider() {
  // Never destroyed: threads of the program (the CM agent's, a poller's) may still call it
  // while static destructors run at exit.
  static const IwarpProvider* const p = new IwarpProvider;
  return *p;
}

}  // namespace softrdma::verbs
