// softroce0's provider: the verbs over rxe::Device (RoCEv2), verbs/provider.h.
#include <cstdio>
#include <cstring>
#include <mutex>

#include "verbs/objects.h"
#include "verbs/provider.h"

namespace softrdma::verbs {
void post_async_event(SoftContext* ctx, const rxe::AsyncEvent& ev);
void post_object_event(core::AsyncEventType type, core::Cq* cq, core::Srq* srq);
}  // namespace softrdma::verbs

namespace softrdma::verbs {
namespace {

// The QP's transport: SoftQp::transport of a softroce0 QP.
rxe::Qp* rxe_qp(const SoftQp* s) {
  return static_cast<rxe::Qp*>(s->transport);
}

// The GID index of the address softroce0 sends from (1: ::ffff:a.b.c.d for an IPv4 address).
std::size_t sendable_gid_index(SoftContext* ctx) {
  const auto& table = ctx->engine->gid_table();
  for (std::size_t i = 0; i < table.size(); ++i) {
    if (table[i].address == 0) return i;
  }
  return 0;
}

// ibv_ah_attr -> engine address vector (LID-only vectors resolve through the engine).
// The GRH's sgid_index names an entry of the port's GID table (verbs/gid_table.h); false (EINVAL)
// for an index past it or for one the device cannot send from, with a message on stderr.
bool convert_ah_attr(SoftContext* ctx, const ibv_ah_attr& in, core::AhAttr& out) {
  if (in.port_num > 1) return false;
  out = core::AhAttr{};
  if (in.is_global) {
    std::memcpy(out.dgid.data(), in.grh.dgid.raw, 16);
    // The engine's sgid_index is the index of the netdev address to send from.
    const auto& table = ctx->engine->gid_table();
    if (in.grh.sgid_index >= table.size()) return false;
    const PortGid& e = table[in.grh.sgid_index];
    if (!e.address) {
      // A NIC would send RoCE v2 from this IPv6 link-local address; this backend has one
      // address and sends from it only, so nothing is sent from another one in its place.
      std::fprintf(
          stderr,
          "softrdma: sgid_index %u is %s's IPv6 link-local GID %s, which its netdev %s "
          "cannot send from; use the GID of %s (sgid_index %zu, e.g. -g %zu)\n",
          in.grh.sgid_index, ctx->engine->config().device_name.c_str(),
          netdev::IpAddr{e.gid}.str().c_str(), dev(&ctx->vctx.context).netdev().name().c_str(),
          ctx->engine->address().str().c_str(), sendable_gid_index(ctx), sendable_gid_index(ctx));
      return false;
    }
    out.sgid_index = *e.address;
    out.hop_limit = in.grh.hop_limit;
    out.traffic_class = in.grh.traffic_class;
    out.flow_label = in.grh.flow_label;
  } else {
    // No GRH (qperf's IB tests): the LID names a peer in our address space.
    if (in.dlid == 0) return false;
    out.dgid = ctx->engine->address_for_lid(in.dlid).bytes;
    out.is_global = false;
  }
  out.dlid = in.dlid;
  out.sl = in.sl;
  out.port_num = 1;
  return true;
}

void fill_device_attr(rxe::Device& d, ibv_device_attr& a) {
  const core::DeviceAttr& r = d.attr();
  fill_common_attr(r, d.node_guid(), a);
  a.device_cap_flags = IBV_DEVICE_BAD_PKEY_CNTR | IBV_DEVICE_BAD_QKEY_CNTR |
                       IBV_DEVICE_SYS_IMAGE_GUID | IBV_DEVICE_RC_RNR_NAK_GEN |
                       IBV_DEVICE_SRQ_RESIZE | IBV_DEVICE_N_NOTIFY_CQ |
                       IBV_DEVICE_PORT_ACTIVE_EVENT | IBV_DEVICE_MEM_MGT_EXTENSIONS |
                       IBV_DEVICE_MEM_WINDOW | IBV_DEVICE_MEM_WINDOW_TYPE_2B | IBV_DEVICE_XRC;
  a.max_mw = static_cast<int>(r.max_mw);
  a.max_ee_rd_atom = 0;
  a.atomic_cap = IBV_ATOMIC_HCA;
  a.max_mcast_grp = static_cast<int>(r.max_mcast_grp);
  a.max_mcast_qp_attach = static_cast<int>(r.max_mcast_qp_attach);
  a.max_total_mcast_qp_attach = static_cast<int>(r.max_total_mcast_qp_attach);
  a.max_ah = static_cast<int>(r.max_ah);
  a.max_pkeys = r.max_pkeys;
  a.local_ca_ack_delay = r.local_ca_ack_delay;
}

// ibv_modify_qp's attributes as the engine takes them. Fields outside `mask` may hold anything
// (programs leave them uninitialised): enums are read only when their bit is set.
bool convert_qp_attr(SoftContext* ctx, const ibv_qp_attr& attr, int mask, core::QpAttr& a) {
  if (mask & IBV_QP_STATE) a.qp_state = static_cast<core::QpState>(attr.qp_state);
  if (mask & IBV_QP_CUR_STATE) a.cur_qp_state = static_cast<core::QpState>(attr.cur_qp_state);
  if (mask & IBV_QP_PATH_MTU) a.path_mtu = static_cast<core::Mtu>(attr.path_mtu);
  a.qkey = attr.qkey;
  a.rq_psn = attr.rq_psn;
  a.sq_psn = attr.sq_psn;
  a.dest_qp_num = attr.dest_qp_num;
  a.qp_access_flags = static_cast<uint32_t>(attr.qp_access_flags);
  a.pkey_index = attr.pkey_index;
  a.en_sqd_async_notify = attr.en_sqd_async_notify;
  a.max_rd_atomic = attr.max_rd_atomic;
  a.max_dest_rd_atomic = attr.max_dest_rd_atomic;
  a.min_rnr_timer = attr.min_rnr_timer;
  a.port_num = attr.port_num;
  a.timeout = attr.timeout;
  a.retry_cnt = attr.retry_cnt;
  a.rnr_retry = attr.rnr_retry;
  return !(mask & IBV_QP_AV) || convert_ah_attr(ctx, attr.ah_attr, a.ah_attr);
}

class RoceProvider final : public Provider {
 public:
  int device_index() const override { return 0; }
  std::uint64_t node_guid(Engine& e) const override { return e.device().node_guid(); }
  void open(SoftContext*) const override {}  // the engine's device: dev(ctx)
  void fill_ops(SoftContext* ctx) const override {
    fill_mw_ops(ctx);
    fill_xrc_ops(ctx);
  }
  bool xrc() const override { return true; }
  bool odp() const override { return true; }

  core::Objects& objects(ibv_context* c) const override { return dev(c); }
  void query_device(ibv_context* c, ibv_device_attr& out) const override {
    fill_device_attr(dev(c), out);
  }
  void query_port(ibv_context* c, ibv_port_attr& a) const override {
    rxe::Device& d = dev(c);
    const core::PortAttr p = d.port_attr();
    fill_common_port_attr(a);
    a.active_mtu = static_cast<ibv_mtu>(p.active_mtu);
    a.gid_tbl_len = static_cast<int>(soft(c)->engine->gid_table().size());
    a.port_cap_flags = IBV_PORT_CM_SUP | IBV_PORT_IP_BASED_GIDS;
    a.pkey_tbl_len = static_cast<std::uint16_t>(d.pkeys().size());
    a.lid = soft(c)->engine->lid();
    a.sm_lid = 0;
    a.lmc = 0;
  }
  // The table of verbs/gid_table.h (0: the IPv6 link-local default GID, 1: its address).
  std::vector<core::Gid> gids(ibv_context* c) const override {
    std::vector<core::Gid> out;
    for (const PortGid& e : soft(c)->engine->gid_table()) out.push_back(e.gid);
    return out;
  }
  const std::vector<std::uint16_t>& pkeys(ibv_context* c) const override {
    return dev(c).pkeys();  // --pkeys
  }
  bool roce_v2_gids() const override { return true; }
  // As the kernel's ib_init_ah_attr_from_wc: the table's entry for that address (the sending
  // one when it was sent to a multicast group).
  std::size_t reply_sgid_index(ibv_context* c, const core::Gid& to) const override {
    const auto& table = soft(c)->engine->gid_table();
    for (std::size_t i = 0; i < table.size(); ++i) {
      if (table[i].gid == to && table[i].address) return i;
    }
    return sendable_gid_index(soft(c));
  }

  // Windows, and FLUSH to global visibility (never to persistence: docs/verbs-abi.md).
  unsigned extra_mr_access() const override { return IBV_ACCESS_MW_BIND | kIbvAccessFlushGlobal; }
  std::uint64_t cap_flags_ex_high() const override {
    return kIbvDeviceAtomicWrite | kIbvDeviceFlushGlobal;
  }
  void route_async_events(ibv_context* c) const override {
    static std::once_flag once;
    rxe::Device& d = dev(c);
    std::call_once(once, [&d] {
      d.set_async_handler([](const rxe::AsyncEvent& ev) {
        if (!ev.qp) return post_object_event(ev.type, ev.cq, ev.srq);
        if (ev.qp->user) post_async_event(static_cast<SoftQp*>(ev.qp->user)->ctx, ev);
      });
    });
  }

  ibv_qp* create_qp(ibv_context* c, ibv_qp_init_attr_ex* a, core::QpType type, core::QpCap& cap,
                    std::uint32_t qpn) const override {
    int err = 0;
    // XRC QPs have no receive CQ, and targets neither PD nor send CQ (the core checked which).
    rxe::Qp* q = dev(c).create_qp(
        a->pd ? soft(a->pd)->rxe : nullptr, type, a->send_cq ? soft(a->send_cq)->rxe : nullptr,
        a->recv_cq ? soft(a->recv_cq)->rxe : nullptr, a->srq ? soft(a->srq)->rxe : nullptr, cap,
        a->sq_sig_all != 0, &err, qpn, a->xrcd ? soft(a->xrcd)->core : nullptr);
    if (!q) return fail<ibv_qp>(err);
    SoftQp* s = new_soft_qp(c, a, cap, q->qpn());
    s->transport = q;
    q->user = s;
    return &s->qpx.qp_base;
  }
  int modify_qp(SoftQp* s, const ibv_qp_attr& attr, int mask) const override {
    core::QpAttr a;
    if (!convert_qp_attr(s->ctx, attr, mask, a)) return EINVAL;
    // The engine's mask bits are libibverbs' (static_asserts in tests).
    const int rc = rxe_qp(s)->modify(a, static_cast<uint32_t>(mask));
    if (rc) return rc;
    s->qpx.qp_base.state = static_cast<ibv_qp_state>(rxe_qp(s)->state());
    return 0;
  }
  void query_qp(SoftQp* s, core::QpAttr& attr, core::QpCap& cap) const override {
    rxe_qp(s)->query(attr, cap);
  }
  int destroy_qp(SoftQp* s) const override {
    return dev(s->qpx.qp_base.context).destroy_qp(rxe_qp(s));
  }
  std::size_t unread_completions(ibv_context* c, std::uint32_t qpn) const override {
    return dev(c).unread_completions(qpn);
  }

  int post_send(SoftQp* qp, const core::SendWr& wr) const override {
    return rxe_qp(qp)->post_send(wr);
  }
  int post_recv(SoftQp* qp, const core::RecvWr& wr) const override {
    return rxe_qp(qp)->post_recv(wr);
  }
  bool poll_progress(ibv_context* c) const override { return dev(c).poll_progress(); }

  int create_ah(ibv_pd* pd, const ibv_ah_attr& attr, std::uint32_t& id) const override {
    core::AhAttr a;
    if (!convert_ah_attr(soft(pd->context), attr, a)) return EINVAL;
    int err = 0;
    id = dev(pd->context).create_ah(soft(pd)->rxe, a, &err);
    return err;
  }
  int destroy_ah(ibv_context* c, std::uint32_t id) const override { return dev(c).destroy_ah(id); }
  // RoCE multicast is addressed by the GID (the IP group); the LID is not used.
  int attach_mcast(ibv_qp* qp, const core::Gid& gid) const override {
    return dev(qp->context).attach_mcast(rxe_qp(soft(qp)), gid);
  }
  int detach_mcast(ibv_qp* qp, const core::Gid& gid) const override {
    return dev(qp->context).detach_mcast(rxe_qp(soft(qp)), gid);
  }
};

}  // namespace

const Provider& roce_provider() {
  // Never destroyed: threads of the program (the CM agent's, a poller's) may still call it
  // while static destructors run at exit.
  static const RoceProvider* const p = new RoceProvider;
  return *p;
}

}  // namespace softrdma::verbs
