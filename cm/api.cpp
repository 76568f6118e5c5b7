// The rdma_cm calls of rdma-core 44's librdmacm.so.1 (RDMACM_1.0 … 1.3) over the CM agent, on
// ids and their QPs; what differs by transport is the id's Transport (cm/transport.h). The
// event channel calls are in cm/api_events.cpp, the multicast ones in cm/api_multicast.cpp.
#include <arpa/inet.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>

#include "cm/agent.h"
#include "cm/api_common.h"
#include "cm/registry.h"
#include "cm/sockaddr.h"
#include "cm/transport.h"

using namespace softrdma;
using namespace softrdma::cm;

namespace {

ibv_qp_type qp_type_of(rdma_port_space ps) {
  return (ps == RDMA_PS_UDP || ps == RDMA_PS_IPOIB) ? IBV_QPT_UD : IBV_QPT_RC;
}

// For ids created without a channel: waits for the event the call started and turns
// its status into the call's result, as librdmacm does.
int complete(CmId* c) {
  if (!c->sync) return 0;
  if (c->id.event) {
    rdma_ack_cm_event(c->id.event);
    c->id.event = nullptr;
  }
  if (rdma_get_cm_event(c->id.channel, &c->id.event) != 0) return -1;
  const rdma_cm_event* ev = c->id.event;
  if (ev->status) {
    if (ev->event == RDMA_CM_EVENT_REJECTED) return fail(ECONNREFUSED);
    return fail(ev->status < 0 ? -ev->status : ev->status);
  }
  return 0;
}

}  // namespace

int softrdma::cm::bind_locked(CmId* c, const sockaddr* addr) {
  const socklen_t len = addr_len(addr);
  if (!len) return EAFNOSUPPORT;
  if (c->transport->bound(c)) return EINVAL;
  if (!c->transport->local_address(addr)) return EADDRNOTAVAIL;
  int rc = c->transport->bind(c, addr);
  if (rc) return rc;
  c->wildcard = registry::is_wildcard(addr);
  c->id.verbs = agent_context();
  c->id.pd = agent_pd();
  c->id.port_num = 1;
  if (c->state == State::kIdle) c->state = State::kBound;
  return 0;
}

namespace {

// Asks the kernel's routing for `dst` (a unicast address): 0 and the source address it would
// pick (port 0) in `out`, or the errno of an address with no route.
int route_to(const sockaddr* dst, sockaddr_storage& out) {
  int fd = socket(dst->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return errno;
  sockaddr_storage probe{};
  std::memcpy(&probe, dst, addr_len(dst));
  set_port(reinterpret_cast<sockaddr*>(&probe), 4791);
  socklen_t len = sizeof out;
  int err = 0;
  if (connect(fd, reinterpret_cast<sockaddr*>(&probe), addr_len(dst)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&out), &len) != 0) {
    err = errno;
  }
  close(fd);
  if (!err) set_port(reinterpret_cast<sockaddr*>(&out), 0);
  return err;
}

ibv_mtu active_mtu() {
  ibv_port_attr pa{};
  if (agent_context() && ibv_query_port(agent_context(), 1, &pa) == 0) return pa.active_mtu;
  return IBV_MTU_1024;
}

void destroy_cqs(rdma_cm_id* id) {
  // An XRC target's receive CQ is its SRQ's: it goes with the SRQ (rdma_destroy_srq).
  if (id->qp_type == IBV_QPT_XRC_RECV && id->srq) return;
  if (id->recv_cq) ibv_destroy_cq(id->recv_cq);
  if (id->recv_cq_channel) ibv_destroy_comp_channel(id->recv_cq_channel);
  if (id->send_cq && id->send_cq != id->recv_cq) ibv_destroy_cq(id->send_cq);
  if (id->send_cq_channel) ibv_destroy_comp_channel(id->send_cq_channel);
  id->recv_cq = id->send_cq = nullptr;
  id->recv_cq_channel = id->send_cq_channel = nullptr;
}

int create_cqs(rdma_cm_id* id, std::uint32_t send_size, std::uint32_t recv_size) {
  if (recv_size) {
    id->recv_cq_channel = ibv_create_comp_channel(id->verbs);
    id->recv_cq = id->recv_cq_channel ? ibv_create_cq(id->verbs, static_cast<int>(recv_size), id,
                                                      id->recv_cq_channel, 0)
                                      : nullptr;
    if (!id->recv_cq) goto err;
  }
  if (send_size) {
    id->send_cq_channel = ibv_create_comp_channel(id->verbs);
    id->send_cq = id->send_cq_channel ? ibv_create_cq(id->verbs, static_cast<int>(send_size), id,
                                                      id->send_cq_channel, 0)
                                      : nullptr;
    if (!id->send_cq) goto err;
  }
  return 0;
err:
  destroy_cqs(id);
  return -1;
}

// The XRC domain rdma_cm gives XRC targets and SRQs that name none, as librdmacm does: one per
// device context, opened (fd -1, O_CREAT) on first use and kept for the process.
ibv_xrcd* id_xrcd(ibv_context* ctx) {
  static std::mutex mu;
  static ibv_context* owner = nullptr;
  static ibv_xrcd* xrcd = nullptr;
  std::lock_guard lock(mu);
  if (owner != ctx || !xrcd) {  // (a forked child's agent has a context of its own)
    ibv_xrcd_init_attr a{};
    a.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
    a.fd = -1;
    a.oflags = O_CREAT;
    xrcd = ibv_open_xrcd(ctx, &a);
    owner = xrcd ? ctx : nullptr;
  }
  return xrcd;
}

}  // namespace

extern "C" {

int rdma_create_id(rdma_event_channel* channel, rdma_cm_id** id, void* context,
                   rdma_port_space ps) {
  if (!id) return fail(EINVAL);
  if (ps != RDMA_PS_TCP && ps != RDMA_PS_UDP && ps != RDMA_PS_IPOIB && ps != RDMA_PS_IB) {
    return fail(EINVAL);
  }
  {
    std::lock_guard lock(mutex());
    if (!agent_context()) return -1;
  }
  auto* c = new CmId;
  std::memset(&c->id, 0, sizeof c->id);
  if (!channel) {
    channel = rdma_create_event_channel();
    if (!channel) {
      delete c;
      return -1;
    }
    c->sync = true;
  }
  c->channel = cm::channel(channel);
  c->id.channel = channel;
  c->id.context = context;
  c->id.ps = ps;
  c->id.qp_type = qp_type_of(ps);
  std::lock_guard lock(mutex());
  c->transport = &agent_transport();  // the device's, chosen as the agent started
  track(c);
  *id = &c->id;
  return 0;
}

int rdma_destroy_id(rdma_cm_id* id) {
  if (!id) return fail(EINVAL);
  CmId* c = cm_id(id);
  if (c->sync && id->event) {
    rdma_ack_cm_event(id->event);
    id->event = nullptr;
  }
  std::unique_lock lock(mutex());
  // As with the kernel's rdma_cm: events not yet handed out are dropped, and the call
  // waits until those handed out have been acked.
  c->destroying = true;
  discard_queued(c);
  acked().wait(lock, [&] { return c->events_out == 0; });
  c->transport->destroy(c);
  for (auto& m : c->mcast) {
    if (m.attached && id->qp) {
      ibv_gid g;
      std::memcpy(g.raw, m.mgid.data(), 16);
      ibv_detach_mcast(id->qp, &g, 0);
    }
  }
  c->mcast.clear();
  unwatch_registry(c);
  delete id->route.path_rec;
  id->route.path_rec = nullptr;
  c->destroyed = true;
  c->timewait = false;
  flush_sends();
  maybe_free(c);
  return 0;
}

int rdma_bind_addr(rdma_cm_id* id, sockaddr* addr) {
  if (!id || !addr) return fail(EINVAL);
  std::lock_guard lock(mutex());
  int rc = bind_locked(cm_id(id), addr);
  return rc ? fail(rc) : 0;
}

int rdma_resolve_addr(rdma_cm_id* id, sockaddr* src_addr, sockaddr* dst_addr, int timeout_ms) {
  (void)timeout_ms;
  if (!id || !addr_len(dst_addr) || (src_addr && !addr_len(src_addr))) return fail(EINVAL);
  CmId* c = cm_id(id);
  {
    std::lock_guard lock(mutex());
    if (!agent_context()) return -1;
  }
  // Asked without the lock: the holder of the port may be this very process, whose
  // agent answers the registry under that lock.
  const wire::Gid16 peer = c->transport->peer_for(c, dst_addr, std::chrono::milliseconds(0));
  {
    std::lock_guard lock(mutex());
    if (c->state != State::kIdle && c->state != State::kBound) return fail(EINVAL);
    // A unicast destination must be routable from here (this host's addresses always are).
    sockaddr_storage routed{};
    // A transport with its own source address (a userspace TCP) reaches every peer from it.
    const int route_err = is_multicast(dst_addr)             ? EHOSTUNREACH
                          : c->transport->own_source(routed) ? 0
                                                             : route_to(dst_addr, routed);
    const int status = is_multicast(dst_addr) ? 0 : -route_err;
    if (!c->transport->bound(c)) {
      sockaddr_storage src{};
      if (src_addr) {
        std::memcpy(&src, src_addr, addr_len(src_addr));
      } else if (route_err == 0) {
        src = routed;  // the kernel's choice
      } else {
        sockaddr_of(agent_gid(), 0, src);  // else the device's
      }
      int rc = bind_locked(c, reinterpret_cast<sockaddr*>(&src));
      if (rc) return fail(rc);
    }
    std::memcpy(&id->route.addr.dst_storage, dst_addr, addr_len(dst_addr));
    Event* ev;
    if (status) {
      ev = make_event(c, RDMA_CM_EVENT_ADDR_ERROR, status);
    } else {
      c->peer_gid = peer;
      std::memcpy(id->route.addr.addr.ibaddr.dgid.raw, c->peer_gid.data(), 16);
      c->state = State::kAddrResolved;
      ev = make_event(c, RDMA_CM_EVENT_ADDR_RESOLVED, 0);
    }
    deliver(ev);
  }
  return complete(c);
}

int rdma_resolve_route(rdma_cm_id* id, int timeout_ms) {
  (void)timeout_ms;
  if (!id) return fail(EINVAL);
  CmId* c = cm_id(id);
  const ibv_mtu mtu = active_mtu();
  {
    std::lock_guard lock(mutex());
    if (c->state != State::kAddrResolved) return fail(EINVAL);
    c->path_mtu = static_cast<std::uint8_t>(mtu);
    if (!id->route.path_rec) id->route.path_rec = new ibv_sa_path_rec;
    ibv_sa_path_rec& p = *id->route.path_rec;
    std::memset(&p, 0, sizeof p);
    p.dgid = id->route.addr.addr.ibaddr.dgid;
    p.sgid = id->route.addr.addr.ibaddr.sgid;
    p.hop_limit = 64;
    p.traffic_class = c->tos;
    p.reversible = 1;
    p.numb_path = 1;
    p.pkey = htons(cm_partition());
    p.mtu_selector = 2;  // exactly
    p.mtu = static_cast<std::uint8_t>(mtu);
    p.rate_selector = 2;
    p.rate = 7;  // 40 Gb/s-class: informational
    p.packet_life_time_selector = 2;
    p.packet_life_time = 14;
    id->route.num_paths = 1;
    c->state = State::kRouteResolved;
    deliver(make_event(c, RDMA_CM_EVENT_ROUTE_RESOLVED, 0));
  }
  return complete(c);
}

int rdma_create_qp_ex(rdma_cm_id* id, ibv_qp_init_attr_ex* attr) {
  if (!id || !attr || id->qp) return fail(EINVAL);
  if (!id->verbs) return fail(EINVAL);  // neither bound nor resolved: no device yet
  if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || !attr->pd) {
    attr->comp_mask |= IBV_QP_INIT_ATTR_PD;
    attr->pd = id->pd;
  } else if (attr->pd->context != id->verbs) {
    return fail(EINVAL);
  }
  if ((id->recv_cq && attr->recv_cq && id->recv_cq != attr->recv_cq) ||
      (id->send_cq && attr->send_cq && id->send_cq != attr->send_cq)) {
    return fail(EINVAL);
  }
  if (id->qp_type == IBV_QPT_XRC_RECV &&
      (!(attr->comp_mask & IBV_QP_INIT_ATTR_XRCD) || !attr->xrcd)) {
    attr->xrcd = id_xrcd(id->verbs);
    if (!attr->xrcd) return -1;
    attr->comp_mask |= IBV_QP_INIT_ATTR_XRCD;
  }
  if (create_cqs(id, attr->send_cq || id->send_cq ? 0 : attr->cap.max_send_wr,
                 attr->recv_cq || id->recv_cq ? 0 : attr->cap.max_recv_wr) != 0) {
    return -1;
  }
  if (!attr->send_cq) attr->send_cq = id->send_cq;
  if (!attr->recv_cq) attr->recv_cq = id->recv_cq;
  if (id->srq && !attr->srq) attr->srq = id->srq;
  ibv_qp* qp = ibv_create_qp_ex(id->verbs, attr);
  if (!qp) {
    destroy_cqs(id);
    return -1;
  }
  CmId* c = cm_id(id);
  int rc = 0;
  {
    std::lock_guard lock(mutex());
    ibv_qp_attr a{};
    int mask = 0;
    a.qp_state = IBV_QPS_INIT;
    rc = c->transport->init_qp_attr(c, &a, &mask);
    if (!rc) rc = ibv_modify_qp(qp, &a, mask);
    if (!rc && attr->qp_type == IBV_QPT_UD) {
      a.qp_state = IBV_QPS_RTR;
      rc = ibv_modify_qp(qp, &a, IBV_QP_STATE);
      a.qp_state = IBV_QPS_RTS;
      a.sq_psn = 0;
      if (!rc) rc = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
    }
  }
  if (rc) {
    ibv_destroy_qp(qp);
    destroy_cqs(id);
    return fail(rc);
  }
  if (qp->pd) id->pd = qp->pd;  // (an XRC target has its domain, not a PD)
  id->qp = qp;
  return 0;
}

int rdma_create_qp(rdma_cm_id* id, ibv_pd* pd, ibv_qp_init_attr* qp_init_attr) {
  if (!id || !qp_init_attr) return fail(EINVAL);
  ibv_qp_init_attr_ex ax{};
  std::memcpy(&ax, qp_init_attr, sizeof *qp_init_attr);
  ax.comp_mask = IBV_QP_INIT_ATTR_PD;
  ax.pd = pd ? pd : id->pd;
  int rc = rdma_create_qp_ex(id, &ax);
  std::memcpy(qp_init_attr, &ax, sizeof *qp_init_attr);
  return rc;
}

void rdma_destroy_qp(rdma_cm_id* id) {
  if (!id) return;
  ibv_qp* qp = nullptr;
  {
    std::lock_guard lock(mutex());  // the monitoring thread reads id->qp under it
    qp = id->qp;
    id->qp = nullptr;
  }
  if (qp) ibv_destroy_qp(qp);
  destroy_cqs(id);
}

int rdma_connect(rdma_cm_id* id, rdma_conn_param* param) {
  if (!id) return fail(EINVAL);
  CmId* c = cm_id(id);
  ibv_device_attr da{};
  if (id->verbs) ibv_query_device(id->verbs, &da);
  // A listener on this host may have appeared since the address was resolved (asked
  // without the lock, see rdma_resolve_addr).
  const sockaddr* dst = &id->route.addr.dst_addr;
  std::optional<wire::Gid16> fresh;
  if (dst->sa_family != AF_UNSPEC && registry::is_local(dst)) {
    fresh = c->transport->peer_for(c, dst, std::chrono::milliseconds(250));
  }
  {
    std::lock_guard lock(mutex());
    if (c->state != State::kRouteResolved && c->state != State::kAddrResolved) {
      return fail(EINVAL);
    }
    if (id->ps == RDMA_PS_TCP && !id->qp && !param) return fail(EINVAL);
    const std::size_t room = id->qp_type == IBV_QPT_UD
                                 ? wire::kSidrReqPrivate - wire::kIpCmHeaderSize
                                 : wire::kReqPrivate - wire::kIpCmHeaderSize;
    if (param && param->private_data_len > room) return fail(EINVAL);
    if (c->path_mtu == 0) c->path_mtu = static_cast<std::uint8_t>(active_mtu());
    if (fresh) c->peer_gid = *fresh;
    const auto* pdata = param ? static_cast<const std::uint8_t*>(param->private_data) : nullptr;
    const std::size_t plen = param && pdata ? param->private_data_len : 0;
    if (id->qp_type != IBV_QPT_UD) {
      c->initiator_depth =
          static_cast<std::uint8_t>((!param || param->initiator_depth == RDMA_MAX_INIT_DEPTH)
                                        ? std::min(da.max_qp_init_rd_atom, 255)
                                        : param->initiator_depth);
      c->responder_resources =
          static_cast<std::uint8_t>((!param || param->responder_resources == RDMA_MAX_RESP_RES)
                                        ? std::min(da.max_qp_rd_atom, 255)
                                        : param->responder_resources);
      c->retry_count = param ? param->retry_count : 7;
      c->rnr_retry_count = param ? param->rnr_retry_count : 7;
      c->qp_num = param ? param->qp_num : 0;
      c->srq = param ? param->srq != 0 : false;
    }
    int rc = c->transport->connect(c, param, pdata, plen);
    if (rc) return fail(rc);
  }
  return complete(c);
}

int rdma_establish(rdma_cm_id* id) {
  if (!id || id->qp) return fail(EINVAL);
  CmId* c = cm_id(id);
  std::lock_guard lock(mutex());
  if (c->state != State::kRepRcvd) return fail(EINVAL);
  int rc = c->transport->establish(c);
  return rc ? fail(rc) : 0;
}

int rdma_listen(rdma_cm_id* id, int backlog) {
  if (!id) return fail(EINVAL);
  CmId* c = cm_id(id);
  std::lock_guard lock(mutex());
  if (!c->transport->bound(c)) {  // listening unbound: the wildcard address, any port
    sockaddr_in any{};
    any.sin_family = AF_INET;
    int rc = bind_locked(c, reinterpret_cast<sockaddr*>(&any));
    if (rc) return fail(rc);
  }
  if (c->state != State::kBound) return fail(EINVAL);
  c->backlog = backlog > 0 ? backlog : 1024;
  int rc = c->transport->listen(c, backlog);
  if (rc) return fail(rc);
  c->state = State::kListen;
  return 0;
}

int rdma_get_request(rdma_cm_id* listen, rdma_cm_id** id) {
  if (!listen || !id) return fail(EINVAL);
  CmId* l = cm_id(listen);
  if (!l->sync) return fail(EINVAL);
  if (listen->event) {
    rdma_ack_cm_event(listen->event);
    listen->event = nullptr;
  }
  rdma_cm_event* ev = nullptr;
  if (rdma_get_cm_event(listen->channel, &ev) != 0) return -1;
  int err = 0;
  if (ev->event == RDMA_CM_EVENT_REJECTED)
    err = ECONNREFUSED;
  else if (ev->status)
    err = ev->status < 0 ? -ev->status : ev->status;
  else if (ev->event != RDMA_CM_EVENT_CONNECT_REQUEST)
    err = EINVAL;
  if (!err && l->ep_qp_attr) {
    ibv_qp_init_attr attr = *l->ep_qp_attr;
    if (rdma_create_qp(ev->id, listen->pd, &attr) != 0) err = errno;
  }
  if (err) {
    listen->event = ev;
    return fail(err);
  }
  *id = ev->id;
  (*id)->event = ev;
  return 0;
}

int rdma_accept(rdma_cm_id* id, rdma_conn_param* param) {
  if (!id) return fail(EINVAL);
  CmId* c = cm_id(id);
  ibv_device_attr da{};
  if (id->verbs) ibv_query_device(id->verbs, &da);
  {
    std::lock_guard lock(mutex());
    const auto* pdata = param ? static_cast<const std::uint8_t*>(param->private_data) : nullptr;
    const std::size_t plen = param && pdata ? param->private_data_len : 0;
    if (c->state == State::kSidrReqRcvd) {
      if (!id->qp && param) c->qp_num = param->qp_num;
      int rc = c->transport->accept(c, param, pdata, plen);
      return rc ? fail(rc) : 0;
    }
    if (c->state != State::kReqRcvd) return fail(EINVAL);
    if (id->ps == RDMA_PS_TCP && !id->qp && !param) return fail(EINVAL);
    if (plen > wire::kRepPrivate) return fail(EINVAL);
    if (!param || param->initiator_depth == RDMA_MAX_INIT_DEPTH) {
      c->initiator_depth =
          static_cast<std::uint8_t>(std::min<int>(c->initiator_depth, da.max_qp_init_rd_atom));
    } else {
      c->initiator_depth = param->initiator_depth;
    }
    if (!param || param->responder_resources == RDMA_MAX_RESP_RES) {
      c->responder_resources =
          static_cast<std::uint8_t>(std::min<int>(c->responder_resources, da.max_qp_rd_atom));
    } else {
      c->responder_resources = param->responder_resources;
    }
    if (param) {
      c->rnr_retry_count = param->rnr_retry_count;
      if (!id->qp) {
        c->qp_num = param->qp_num;
        c->srq = param->srq != 0;
      }
    }
    int rc = c->transport->accept(c, param, pdata, plen);
    if (rc) return fail(rc);
  }
  return complete(c);
}

static int reject_common(rdma_cm_id* id, const void* private_data, uint8_t len) {
  if (!id) return fail(EINVAL);
  CmId* c = cm_id(id);
  std::lock_guard lock(mutex());
  if (c->state != State::kSidrReqRcvd && c->state != State::kReqRcvd) return fail(EINVAL);
  int rc = c->transport->reject(c, private_data, len);
  return rc ? fail(rc) : 0;
}

int rdma_reject(rdma_cm_id* id, const void* private_data, uint8_t private_data_len) {
  return reject_common(id, private_data, private_data_len);
}

int rdma_reject_ece(rdma_cm_id* id, const void* private_data, uint8_t private_data_len) {
  return reject_common(id, private_data, private_data_len);
}

int rdma_notify(rdma_cm_id* id, ibv_event_type event) {
  if (!id) return fail(EINVAL);
  CmId* c = cm_id(id);
  std::lock_guard lock(mutex());
  // Data arrived before the RTU: the connection is established (IBTA 12.9.7.1).
  if (event == IBV_EVENT_COMM_EST && c->state == State::kRepSent) {
    c->waiting = false;
    c->state = State::kEstablished;
    deliver(make_event(c, RDMA_CM_EVENT_ESTABLISHED, 0));
  }
  return 0;
}

int rdma_disconnect(rdma_cm_id* id) {
  if (!id) return fail(EINVAL);
  CmId* c = cm_id(id);
  {
    std::lock_guard lock(mutex());
    if (id->qp_type == IBV_QPT_UD) return fail(EINVAL);
    bool wait = false;
    int rc = c->transport->disconnect(c, wait);
    if (rc) return fail(rc);
    if (!wait) return 0;
  }
  return complete(c);
}

int rdma_set_option(rdma_cm_id* id, int level, int optname, void* optval, size_t optlen) {
  if (!id || !optval) return fail(EINVAL);
  CmId* c = cm_id(id);
  std::lock_guard lock(mutex());
  if (level == RDMA_OPTION_ID) {
    switch (optname) {
      case RDMA_OPTION_ID_TOS:
        if (optlen != sizeof(std::uint8_t)) return fail(EINVAL);
        c->tos = *static_cast<std::uint8_t*>(optval);
        c->tos_set = true;
        return 0;
      case RDMA_OPTION_ID_REUSEADDR:
      case RDMA_OPTION_ID_AFONLY:
        if (optlen != sizeof(int)) return fail(EINVAL);
        return 0;  // accepted; ports are released as soon as their id is destroyed
      case RDMA_OPTION_ID_ACK_TIMEOUT:
        if (optlen != sizeof(std::uint8_t)) return fail(EINVAL);
        c->ack_timeout = *static_cast<std::uint8_t*>(optval);
        return 0;
      default:
        return fail(ENOSYS);
    }
  }
  if (level == RDMA_OPTION_IB) return fail(ENOSYS);  // explicit IB paths: not on RoCE here
  return fail(EINVAL);
}

__be16 rdma_get_src_port(rdma_cm_id* id) {
  const sockaddr* a = &id->route.addr.src_addr;
  if (a->sa_family == AF_INET) return reinterpret_cast<const sockaddr_in*>(a)->sin_port;
  if (a->sa_family == AF_INET6) return reinterpret_cast<const sockaddr_in6*>(a)->sin6_port;
  return 0;
}

__be16 rdma_get_dst_port(rdma_cm_id* id) {
  const sockaddr* a = &id->route.addr.dst_addr;
  if (a->sa_family == AF_INET) return reinterpret_cast<const sockaddr_in*>(a)->sin_port;
  if (a->sa_family == AF_INET6) return reinterpret_cast<const sockaddr_in6*>(a)->sin6_port;
  return 0;
}

ibv_context** rdma_get_devices(int* num_devices) {
  ibv_context* ctx;
  {
    std::lock_guard lock(mutex());
    ctx = agent_context();
  }
  auto** list = static_cast<ibv_context**>(std::calloc(2, sizeof(ibv_context*)));
  if (!list) return nullptr;
  list[0] = ctx;
  if (num_devices) *num_devices = ctx ? 1 : 0;
  return list;
}

void rdma_free_devices(ibv_context** list) {
  std::free(list);
}

int rdma_init_qp_attr(rdma_cm_id* id, ibv_qp_attr* qp_attr, int* qp_attr_mask) {
  if (!id || !qp_attr || !qp_attr_mask) return fail(EINVAL);
  std::lock_guard lock(mutex());
  CmId* c = cm_id(id);
  int rc = c->transport->init_qp_attr(c, qp_attr, qp_attr_mask);
  return rc ? fail(rc) : 0;
}

int rdma_set_local_ece(rdma_cm_id* id, ibv_ece* ece) {
  if (!id || !ece) return fail(EINVAL);
  std::lock_guard lock(mutex());
  cm_id(id)->local_ece = *ece;
  return 0;
}

int rdma_get_remote_ece(rdma_cm_id* id, ibv_ece* ece) {
  // ECE rides in vendor-specific MAD fields that RoCE devices without it leave zero:
  // the peer's ECE is always "none" here.
  if (!id || !ece) return fail(EINVAL);
  std::lock_guard lock(mutex());
  *ece = cm_id(id)->remote_ece;
  return 0;
}

int rdma_create_srq_ex(rdma_cm_id* id, ibv_srq_init_attr_ex* attr) {
  if (!id || !attr || id->srq || !id->verbs) return fail(EINVAL);
  if (attr->comp_mask & ~(IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_XRCD |
                          IBV_SRQ_INIT_ATTR_CQ)) {
    return fail(ENOSYS);
  }
  const bool xrc = (attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) && attr->srq_type == IBV_SRQT_XRC;
  if ((attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) && attr->srq_type != IBV_SRQT_BASIC && !xrc) {
    return fail(ENOSYS);  // tag-matching SRQs are not implemented
  }
  ibv_pd* pd = (attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) && attr->pd ? attr->pd : id->pd;
  if (!xrc) {
    ibv_srq_init_attr a{};
    a.srq_context = attr->srq_context;
    a.attr = attr->attr;
    ibv_srq* srq = ibv_create_srq(pd, &a);
    if (!srq) return -1;
    attr->attr = a.attr;
    id->srq = srq;
    return 0;
  }
  // XRC, as librdmacm: the id's domain and a receive CQ of the id's unless the caller names
  // them (an XRC SRQ completes into its own CQ, which rdma_get_recv_comp then polls).
  // (A field whose bit the caller left out of comp_mask is not read: it may hold anything.)
  if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_XRCD)) attr->xrcd = nullptr;
  if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_CQ)) attr->cq = nullptr;
  attr->comp_mask |= IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
  attr->pd = pd;
  if (!attr->xrcd) attr->xrcd = id_xrcd(id->verbs);
  if (!attr->xrcd) return -1;
  bool made_cq = false;
  if (!attr->cq) {
    if (!id->recv_cq) {
      if (create_cqs(id, 0, std::max<std::uint32_t>(attr->attr.max_wr, 1)) != 0) return -1;
      made_cq = true;
    }
    attr->cq = id->recv_cq;
  }
  ibv_srq* srq = ibv_create_srq_ex(id->verbs, attr);
  if (!srq) {
    if (made_cq) destroy_cqs(id);
    return -1;
  }
  if (!id->pd) id->pd = pd;
  id->srq = srq;
  return 0;
}

int rdma_create_srq(rdma_cm_id* id, ibv_pd* pd, ibv_srq_init_attr* attr) {
  if (!id || !attr) return fail(EINVAL);
  ibv_srq_init_attr_ex ax{};
  ax.srq_context = attr->srq_context;
  ax.attr = attr->attr;
  ax.comp_mask = IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_TYPE;
  ax.srq_type = id->qp_type == IBV_QPT_XRC_RECV ? IBV_SRQT_XRC : IBV_SRQT_BASIC;
  ax.pd = pd;
  int rc = rdma_create_srq_ex(id, &ax);
  attr->attr = ax.attr;
  return rc;
}

void rdma_destroy_srq(rdma_cm_id* id) {
  if (!id || !id->srq) return;
  ibv_destroy_srq(id->srq);
  id->srq = nullptr;
  // An XRC target's CQs outlived its QP for the SRQ's sake (destroy_cqs): they go now.
  if (id->qp_type == IBV_QPT_XRC_RECV && !id->qp) destroy_cqs(id);
}

int rdma_create_ep(rdma_cm_id** id, rdma_addrinfo* res, ibv_pd* pd,
                   ibv_qp_init_attr* qp_init_attr) {
  if (!id || !res) return fail(EINVAL);
  rdma_cm_id* cid = nullptr;
  if (rdma_create_id(nullptr, &cid, nullptr, static_cast<rdma_port_space>(res->ai_port_space))) {
    return -1;
  }
  CmId* c = cm_id(cid);
  cid->qp_type = static_cast<ibv_qp_type>(res->ai_qp_type);
  int rc = 0;
  if (res->ai_flags & RAI_PASSIVE) {
    rc = res->ai_src_addr ? rdma_bind_addr(cid, res->ai_src_addr) : 0;
    if (!rc && qp_init_attr) {
      std::lock_guard lock(mutex());
      c->ep_qp_attr = new ibv_qp_init_attr(*qp_init_attr);
      c->ep_qp_attr->qp_type = static_cast<ibv_qp_type>(res->ai_qp_type);
      if (pd) cid->pd = pd;
    }
  } else {
    rc = rdma_resolve_addr(cid, res->ai_src_addr, res->ai_dst_addr, 2000);
    if (!rc) rc = rdma_resolve_route(cid, 2000);
    if (!rc && qp_init_attr) {
      qp_init_attr->qp_type = cid->qp_type;
      rc = rdma_create_qp(cid, pd, qp_init_attr);
    }
  }
  if (rc) {
    const int e = errno;
    rdma_destroy_id(cid);
    errno = e;
    return -1;
  }
  *id = cid;
  return 0;
}

void rdma_destroy_ep(rdma_cm_id* id) {
  if (!id) return;
  if (id->qp) rdma_destroy_qp(id);
  if (id->srq) rdma_destroy_srq(id);
  CmId* c = cm_id(id);
  {
    std::lock_guard lock(mutex());
    if (!c->listener) delete c->ep_qp_attr;  // children share their listener's
    c->ep_qp_attr = nullptr;
  }
  rdma_destroy_id(id);
}

}  // extern "C"
