// The IB CM message handlers (IBTA vol. 1 ch. 12, in its order: REQ, REP, RTU, REJ, MRA,
// DREQ, DREP, then SIDR_REQ and SIDR_REP), as the kernel's ib_cm and rdma_cm run them over
// RoCE, and the dispatch of a received MAD to them.
#include <arpa/inet.h>

#include <algorithm>
#include <array>
#include <cstring>

#include "cm/agent_internal.h"

namespace softrdma::cm {
namespace {

void copy_private(Event* ev, const std::uint8_t* data, std::size_t len, bool ud) {
  len = std::min(len, ev->private_data.size());
  std::memcpy(ev->private_data.data(), data, len);
  if (ud) {
    ev->ev.param.ud.private_data = len ? ev->private_data.data() : nullptr;
    ev->ev.param.ud.private_data_len = static_cast<std::uint8_t>(len);
  } else {
    ev->ev.param.conn.private_data = len ? ev->private_data.data() : nullptr;
    ev->ev.param.conn.private_data_len = static_cast<std::uint8_t>(len);
  }
}

CmId* find_by_local(std::uint32_t comm_id) {
  for (CmId* id : agent().ids) {
    if (id->local_comm_id == comm_id && id->state != State::kListen) return id;
  }
  return nullptr;
}

void fill_ud_ah(CmId* id, ibv_ah_attr& ah) {
  std::memset(&ah, 0, sizeof ah);
  ah.is_global = 1;
  std::memcpy(ah.grh.dgid.raw, id->peer_gid.data(), 16);
  ah.grh.sgid_index = agent().gsi.sgid_index();
  ah.grh.hop_limit = 64;
  ah.grh.traffic_class = id->tos;
  ah.port_num = 1;
}

// The listener for a request to (port space, port, address): specific or wildcard binds,
// UD ones for SIDR requests, connected ones for REQs.
CmId* find_listener(std::uint16_t ps, std::uint16_t port, const wire::Gid16& dst, bool ud) {
  for (CmId* id : agent().ids) {
    if (id->state == State::kListen && !id->destroyed && id->id.ps == ps &&
        ntohs(rdma_get_src_port(&id->id)) == port && (id->id.qp_type == IBV_QPT_UD) == ud &&
        (id->wildcard || gid_of(&id->id.route.addr.src_addr) == dst)) {
      return id;
    }
  }
  return nullptr;
}

// The IP CM header's IPv4 form has zeros where an IPv4-mapped GID has 0xFFFF.
void normalize(wire::IpCmHeader& h) {
  if (h.ip_version != 4) return;
  h.src_addr[10] = h.src_addr[11] = 0xFF;
  h.dst_addr[10] = h.dst_addr[11] = 0xFF;
}

// The passive id a (retransmitted) request from `src` with this comm/request ID made.
CmId* find_passive(std::uint32_t remote_comm_id, const wire::Gid16& src) {
  for (CmId* id : agent().ids) {
    if (id->listener && id->remote_comm_id == remote_comm_id && id->peer_gid == src) return id;
  }
  return nullptr;
}

// Where a REQ or SIDR_REQ goes: the listener of its IP CM service and address, and a new
// passive id for it, addressed from the IP CM header at the start of `pdata` (which holds at
// least that header). `refused`: no listener takes it (the caller answers so); no child and
// not refused: `admit` turned it down, or no id could be made (dropped, counted).
struct Incoming {
  CmId* listener = nullptr;
  CmId* child = nullptr;
  bool refused = false;
};

template <class Admit>
Incoming incoming(std::uint64_t service_id, const std::uint8_t* pdata, const wire::Gid16& src,
                  bool ud, Admit admit) {
  Incoming in;
  auto hdr = wire::parse_ip_cm_header(wire::Bytes(pdata, wire::kIpCmHeaderSize));
  if (!wire::is_ip_cm_service(service_id) || !hdr) {
    in.refused = true;
    return in;
  }
  normalize(hdr.value());
  const auto ps = static_cast<std::uint16_t>(service_id >> 16);
  const auto port = static_cast<std::uint16_t>(service_id & 0xFFFF);
  in.listener = find_listener(ps, port, hdr->dst_addr, ud);
  if (!in.listener) {
    in.refused = true;
    return in;
  }
  if (!admit(in.listener)) return in;
  CmId* c = new_child(in.listener);
  if (!c) {
    drop("no event channel for a new connection");
    return in;
  }
  sockaddr_of(hdr->dst_addr, port, c->id.route.addr.src_storage);
  sockaddr_of(hdr->src_addr, hdr->src_port, c->id.route.addr.dst_storage);
  std::memcpy(c->id.route.addr.addr.ibaddr.sgid.raw, agent().gsi.gid().data(), 16);
  std::memcpy(c->id.route.addr.addr.ibaddr.dgid.raw, src.data(), 16);
  c->peer_gid = src;
  in.child = c;
  return in;
}

// What a REQ or REP says of its sender's side, as the event's connection parameters: its
// initiator depth is our responder resources and the other way round.
template <class M>
void peer_conn_param(const M& m, rdma_conn_param& p) {
  p.responder_resources = m.initiator_depth;
  p.initiator_depth = m.responder_resources;
  p.flow_control = m.end_to_end_flow_control;
  p.rnr_retry_count = m.rnr_retry_count;
  p.srq = m.srq;
  p.qp_num = m.local_qpn;
}

void on_message(const wire::CmReq& m, const wire::Gid16& src, std::uint64_t tid) {
  auto& a = agent();
  if (CmId* id = find_passive(m.local_comm_id, src)) {  // a retransmitted REQ
    if (id->state == State::kRepSent && id->answer_sent) send_mad(id, src);
    return;
  }
  auto reject = [&](std::uint16_t reason) {
    wire::CmRej rej;
    rej.local_comm_id = random_u32();
    rej.remote_comm_id = m.local_comm_id;
    rej.message_rejected = 0;
    rej.reason = reason;
    std::array<std::uint8_t, wire::kMadSize> mad;
    wire::build_cm(mad, tid, rej);
    a.gsi.send(src, mad.data(), m.primary.traffic_class);
  };
  const Incoming in = incoming(m.service_id, m.private_data.data(), src, false, [](CmId* l) {
    int pending = 0;
    for (Event* e : l->channel->queue) {
      if (e->ev.event == RDMA_CM_EVENT_CONNECT_REQUEST && e->ev.listen_id == &l->id) ++pending;
    }
    if (pending < std::max(l->backlog, 1)) return true;
    drop("REQ beyond the listen backlog (the sender retransmits)");
    return false;
  });
  if (in.refused) reject(wire::rej_reason::kInvalidServiceId);
  if (!in.child) return;
  CmId* c = in.child;
  // The partition the REQ names: its QP takes the table entry that matches it (init_qp_attr).
  c->id.route.addr.addr.ibaddr.pkey = htons(m.pkey);
  c->tos = m.primary.traffic_class;
  c->remote_comm_id = m.local_comm_id;
  c->local_comm_id = random_u32();
  c->tid = tid;
  c->remote_qpn = m.local_qpn;
  c->remote_psn = m.starting_psn;
  c->local_psn = random_u32() & 0xFFFFFF;
  c->responder_resources = m.initiator_depth;
  c->initiator_depth = m.responder_resources;
  c->retry_count = m.retry_count;
  c->rnr_retry_count = m.rnr_retry_count;
  c->srq = m.srq;
  c->path_mtu = std::min<std::uint8_t>(m.path_mtu, static_cast<std::uint8_t>(a.pattr.active_mtu));
  c->ack_timeout = std::max<std::uint8_t>(m.primary.local_ack_timeout, 1);
  c->state = State::kReqRcvd;
  track(c);
  Event* ev = make_event(c, RDMA_CM_EVENT_CONNECT_REQUEST, 0);
  copy_private(ev, m.private_data.data() + wire::kIpCmHeaderSize,
               wire::kReqPrivate - wire::kIpCmHeaderSize, false);
  peer_conn_param(m, ev->ev.param.conn);
  ev->ev.param.conn.retry_count = m.retry_count;
  offer_request(c, in.listener, ev);
}

void on_message(const wire::CmRep& m, const wire::Gid16& /*src*/, std::uint64_t /*tid*/) {
  CmId* id = find_by_local(m.remote_comm_id);
  if (!id || id->listener) {
    drop("REP for no connection of ours");
    return;
  }
  if (id->state == State::kEstablished && id->answer_sent) {  // our RTU was lost
    send_mad(id, id->peer_gid);
    return;
  }
  if (id->state != State::kReqSent) return;
  id->waiting = false;
  agent().liveness.watch(id->peer_gid);
  id->remote_comm_id = m.local_comm_id;
  id->remote_qpn = m.local_qpn;
  id->remote_psn = m.starting_psn;
  id->responder_resources = m.initiator_depth;
  id->initiator_depth = m.responder_resources;
  id->rnr_retry_count = m.rnr_retry_count;
  auto fill = [&](Event* ev) {
    copy_private(ev, m.private_data.data(), m.private_data.size(), false);
    peer_conn_param(m, ev->ev.param.conn);
  };
  if (id->destroyed) {
    send_rej(id, wire::rej_reason::kConsumerDefined, nullptr, 0);
    id->state = State::kClosed;
    return;
  }
  // As librdmacm: the application's thread, when it takes this event, moves a QP on the id
  // to RTR and RTS, sends the RTU and sees ESTABLISHED (rdma_get_cm_event). This thread never
  // touches an application's QP: the application may destroy it at any time.
  id->state = State::kRepRcvd;
  Event* ev = make_event(id, RDMA_CM_EVENT_CONNECT_RESPONSE, 0);
  ev->establish = true;
  fill(ev);
  deliver(ev);
}

void on_message(const wire::CmRtu& m, const wire::Gid16& /*src*/, std::uint64_t /*tid*/) {
  CmId* id = find_by_local(m.remote_comm_id);
  if (!id || id->state != State::kRepSent) return;  // a duplicate RTU needs nothing
  id->waiting = false;
  id->state = State::kEstablished;
  if (id->destroyed) return;
  Event* ev = make_event(id, RDMA_CM_EVENT_ESTABLISHED, 0);
  copy_private(ev, m.private_data.data(), m.private_data.size(), false);
  ev->ev.param.conn.responder_resources = id->responder_resources;
  ev->ev.param.conn.initiator_depth = id->initiator_depth;
  ev->ev.param.conn.qp_num = id->remote_qpn;
  deliver(ev);
}

// Another host had no listener for our REQ (REJ reason 8), but may have one a moment later: a
// server closing one listener and opening the next, as qperf and perftest -R do between their
// connections (Debian's perftest 4.5 crashes in its own retry after a REJECTED). For 250 ms
// after the first such REJ the same REQ goes again every 10 ms, as the iWARP CM connects again
// (cm/iwarp_conn.cpp). On this host rdma_connect has waited for a listener already.
bool retry_no_listener(CmId* id, const wire::CmRej& m) {
  if (id->state != State::kReqSent || m.reason != wire::rej_reason::kInvalidServiceId ||
      id->peer_gid == agent().gsi.gid()) {
    return false;
  }
  const auto now = Clock::now();
  if (id->no_listener_since == Clock::time_point{}) id->no_listener_since = now;
  if (now - id->no_listener_since > std::chrono::milliseconds(250)) return false;
  id->resend_req = true;
  id->deadline = now + std::chrono::milliseconds(10);
  wake();
  return true;
}

void on_message(const wire::CmRej& m, const wire::Gid16& /*src*/, std::uint64_t /*tid*/) {
  CmId* id = find_by_local(m.remote_comm_id);
  if (!id) return;
  if (id->state != State::kReqSent && id->state != State::kRepSent &&
      id->state != State::kRepRcvd) {
    return;
  }
  if (id->waiting && retry_no_listener(id, m)) return;
  id->waiting = false;
  id->state = State::kClosed;
  if (id->destroyed) return;
  Event* ev = make_event(id, RDMA_CM_EVENT_REJECTED, m.reason);  // QP to ERR when taken
  copy_private(ev, m.private_data.data(), m.private_data.size(), false);
  deliver(ev);
}

void on_message(const wire::CmMra& m, const wire::Gid16& /*src*/, std::uint64_t /*tid*/) {
  CmId* id = find_by_local(m.remote_comm_id);
  if (!id || !id->waiting) return;
  // The peer needs service_timeout more: 4.096 us * 2^t, on top of our own timeout.
  const auto extra = std::chrono::microseconds(static_cast<std::int64_t>(
      4.096 * static_cast<double>(1ull << std::min<int>(m.service_timeout, 31))));
  id->deadline = Clock::now() + id->resp_timeout + extra;
  wake();
}

void on_message(const wire::CmDreq& m, const wire::Gid16& src, std::uint64_t tid) {
  CmId* id = find_by_local(m.remote_comm_id);
  wire::CmDrep drep;
  drep.local_comm_id = m.remote_comm_id;
  drep.remote_comm_id = m.local_comm_id;
  std::array<std::uint8_t, wire::kMadSize> mad;
  wire::build_cm(mad, tid, drep);
  agent().gsi.send(src, mad.data(), id ? id->tos : 0);
  if (!id) return;
  if (id->state == State::kEstablished || id->state == State::kRepSent ||
      id->state == State::kRepRcvd) {
    id->state = State::kTimewait;
    peer_disconnected(id);
  }
}

void on_message(const wire::CmDrep& m, const wire::Gid16& /*src*/, std::uint64_t /*tid*/) {
  CmId* id = find_by_local(m.remote_comm_id);
  if (!id || id->state != State::kDreqSent) return;
  id->state = State::kTimewait;
  disconnected(id);
}

void on_message(const wire::CmSidrReq& m, const wire::Gid16& src, std::uint64_t tid) {
  auto& a = agent();
  if (CmId* id = find_passive(m.request_id, src)) {  // a retransmitted SIDR_REQ
    if (id->answer_sent) send_mad(id, src);
    return;
  }
  auto answer_status = [&](std::uint8_t status) {
    wire::CmSidrRep rep;
    rep.request_id = m.request_id;
    rep.status = status;
    rep.service_id = m.service_id;
    std::array<std::uint8_t, wire::kMadSize> mad;
    wire::build_cm(mad, tid, rep);
    a.gsi.send(src, mad.data(), 0);
  };
  const Incoming in =
      incoming(m.service_id, m.private_data.data(), src, true, [](CmId*) { return true; });
  if (in.refused) answer_status(wire::sidr_status::kUnsupportedServiceId);
  if (!in.child) return;
  CmId* c = in.child;
  c->remote_comm_id = m.request_id;
  c->tid = tid;
  c->state = State::kSidrReqRcvd;
  track(c);
  Event* ev = make_event(c, RDMA_CM_EVENT_CONNECT_REQUEST, 0);
  copy_private(ev, m.private_data.data() + wire::kIpCmHeaderSize,
               wire::kSidrReqPrivate - wire::kIpCmHeaderSize, true);
  fill_ud_ah(c, ev->ev.param.ud.ah_attr);
  offer_request(c, in.listener, ev);
}

void on_message(const wire::CmSidrRep& m, const wire::Gid16& /*src*/, std::uint64_t /*tid*/) {
  CmId* id = find_by_local(m.request_id);
  if (!id || id->state != State::kSidrReqSent) return;
  id->waiting = false;
  if (id->destroyed) {
    id->state = State::kClosed;
    return;
  }
  if (m.status != wire::sidr_status::kSuccess) {
    id->state = State::kClosed;
    deliver(make_event(id, RDMA_CM_EVENT_UNREACHABLE, m.status));
    return;
  }
  id->state = State::kEstablished;
  id->remote_qpn = m.qpn;
  id->remote_qkey = m.qkey;
  Event* ev = make_event(id, RDMA_CM_EVENT_ESTABLISHED, 0);
  copy_private(ev, m.private_data.data(), m.private_data.size(), true);
  fill_ud_ah(id, ev->ev.param.ud.ah_attr);
  ev->ev.param.ud.qp_num = m.qpn;
  ev->ev.param.ud.qkey = m.qkey;
  deliver(ev);
}

}  // namespace

void on_mad(const std::uint8_t* mad, const wire::Gid16& src) {
  wire::Bytes b(mad, wire::kMadSize);
  auto h = wire::parse_mad_header(b);
  if (!h) return drop("bad MAD header");
  if (h->mgmt_class != wire::kMgmtClassCm) return drop("not a CM MAD (class unsupported)");
    // Each parser takes only the MAD of its own attribute.
#define SOFTRDMA_ON_MESSAGE(M) \
  if (auto m = wire::parse_cm<wire::M>(b)) return on_message(*m, src, h->tid);
  SOFTRDMA_CM_MESSAGES(SOFTRDMA_ON_MESSAGE)
#undef SOFTRDMA_ON_MESSAGE
  if (h->attr_id < static_cast<std::uint16_t>(wire::CmAttr::kReq) ||
      h->attr_id > static_cast<std::uint16_t>(wire::CmAttr::kSidrRep)) {
    return drop("CM attribute not supported (LAP/APR/ClassPortInfo)");
  }
  drop("malformed CM message");
}

}  // namespace softrdma::cm
