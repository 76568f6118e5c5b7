// The CM agent: its thread, the GSI service and the per-id protocol (IBTA vol. 1 ch. 12,
// as the kernel's ib_cm and rdma_cm run it over RoCE). See docs/rdma-cm.md.
#include "cm/agent.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>
#include <thread>

#include "cm/gsi.h"
#include "cm/iwarp_conn.h"
#include "cm/liveness.h"
#include "cm/registry.h"
#include "cm/monitor_section.h"
#include "verbs/iwarp_cm.h"

namespace softrdma::cm {

// Both are never destroyed: a program may exit (a signal handler calling exit(), as
// libinfinipath's does) while one of its threads waits on them, and glibc's
// pthread_cond_destroy would then wait for that thread forever.
std::mutex& mutex() {
  static auto* m = new std::mutex;
  return *m;
}

std::condition_variable& acked() {
  static auto* cv = new std::condition_variable;
  return *cv;
}

namespace {

// Copies up to `room` bytes of the caller's private data (which may be absent).
void put_private(std::uint8_t* dst, const std::uint8_t* pdata, std::size_t len, std::size_t room) {
  if (pdata && len) std::memcpy(dst, pdata, std::min(len, room));
}

// A REQ's or SIDR_REQ's private data: the IP CM header (the id's addresses and source
// port), then as much of the caller's private data as fits.
void put_request_private(CmId* id, std::span<std::uint8_t> out, const std::uint8_t* pdata,
                         std::size_t len) {
  wire::IpCmHeader h;
  h.ip_version = id->id.route.addr.dst_addr.sa_family == AF_INET6 ? 6 : 4;
  h.src_port = ntohs(rdma_get_src_port(&id->id));
  h.src_addr = gid_of(&id->id.route.addr.src_addr);
  h.dst_addr = gid_of(&id->id.route.addr.dst_addr);
  if (h.ip_version == 4) {  // the IPv4 form keeps the address in the last four bytes only
    h.src_addr[10] = h.src_addr[11] = 0;
    h.dst_addr[10] = h.dst_addr[11] = 0;
  }
  wire::build_ip_cm_header(out, h);
  put_private(out.data() + wire::kIpCmHeaderSize, pdata, len, out.size() - wire::kIpCmHeaderSize);
}

struct Agent {
  bool started = false;
  int start_errno = 0;
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;  // the default PD of ids (rdma_create_qp with a NULL PD)
  Gsi gsi;
  Liveness liveness;
  std::vector<std::pair<wire::Gid16, Clock::time_point>> gone;  // peers that ended, when to act
  int epfd = -1;
  int wake_fd = -1;
  std::vector<CmId*> ids;
  std::mt19937 rng{std::random_device{}()};
  std::uint64_t next_tid = 0;
  std::uint64_t node_guid = 0;
  ibv_device_attr dattr{};
  ibv_port_attr pattr{};
  std::uint64_t drops = 0;
  verbs::IwarpCm* iw = nullptr;  // set in iWARP mode
  std::mutex tasks_mu;
  std::vector<std::function<void()>> tasks;
};

// The process's agent, which lives as long as the process (its thread never stops). A forked
// child starts with a fresh one: the parent's thread did not come along, and its ids and their
// connections stay the parent's (the child's verbs device is its own too, verbs/engine.h).
Agent* g_agent = nullptr;

void before_fork() {
  mutex().lock();
}
void after_fork_parent() {
  mutex().unlock();
}
void after_fork_child() {
  // The child's copies of the parent's bound ports would keep them claimed while it lives.
  for (CmId* id : g_agent->ids) {
    if (id->registry_fd >= 0) close(id->registry_fd);
    id->registry_fd = -1;
  }
  g_agent = new Agent;  // the parent's is left as it is
  mutex().unlock();
}

Agent& agent() {
  static std::once_flag once;
  std::call_once(once, [] {
    g_agent = new Agent;
    pthread_atfork(before_fork, after_fork_parent, after_fork_child);
  });
  return *g_agent;
}

constexpr std::uint8_t kRespTimeoutCode = 18;  // 4.096 us * 2^18 = 1.07 s
constexpr int kMaxCmRetries = 3;
constexpr auto kTimewait = std::chrono::milliseconds(1000);

void drop(const char* why) {
  auto& a = agent();
  if (++a.drops <= 20) std::fprintf(stderr, "softrdma cm: dropped a MAD: %s\n", why);
}

std::uint32_t random_u32() {
  return static_cast<std::uint32_t>(agent().rng());
}

void wake() {
  std::uint64_t one = 1;
  (void)!write(agent().wake_fd, &one, sizeof one);
}

int send_mad(CmId* id, const wire::Gid16& to) {
  return agent().gsi.send(to, id->last_mad.data(), id->tos);
}

// Sends the MAD in id->last_mad and waits for its answer (retransmitting).
int send_and_wait(CmId* id) {
  id->waiting = true;
  id->retries_left = kMaxCmRetries;
  id->deadline = Clock::now() + id->resp_timeout;
  wake();
  return send_mad(id, id->peer_gid);
}

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

// ---- receiving

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

void on_req(const wire::CmReq& m, const wire::Gid16& src, std::uint64_t tid) {
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
    wire::build_cm_rej(mad, tid, rej);
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
  c->id.route.addr.addr.ibaddr.pkey = htons(0xFFFF);
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
  auto& p = ev->ev.param.conn;
  p.responder_resources = m.initiator_depth;
  p.initiator_depth = m.responder_resources;
  p.flow_control = m.end_to_end_flow_control;
  p.retry_count = m.retry_count;
  p.rnr_retry_count = m.rnr_retry_count;
  p.srq = m.srq;
  p.qp_num = m.local_qpn;
  offer_request(c, in.listener, ev);
}

void on_rep(const wire::CmRep& m) {
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
    auto& p = ev->ev.param.conn;
    p.responder_resources = m.initiator_depth;
    p.initiator_depth = m.responder_resources;
    p.flow_control = m.end_to_end_flow_control;
    p.rnr_retry_count = m.rnr_retry_count;
    p.srq = m.srq;
    p.qp_num = m.local_qpn;
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

void on_rtu(const wire::CmRtu& m) {
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

void on_rej(const wire::CmRej& m) {
  CmId* id = find_by_local(m.remote_comm_id);
  if (!id) return;
  if (id->state != State::kReqSent && id->state != State::kRepSent &&
      id->state != State::kRepRcvd) {
    return;
  }
  id->waiting = false;
  id->state = State::kClosed;
  if (id->destroyed) return;
  Event* ev = make_event(id, RDMA_CM_EVENT_REJECTED, m.reason);  // QP to ERR when taken
  copy_private(ev, m.private_data.data(), m.private_data.size(), false);
  deliver(ev);
}

void on_mra(const wire::CmMra& m) {
  CmId* id = find_by_local(m.remote_comm_id);
  if (!id || !id->waiting) return;
  // The peer needs service_timeout more: 4.096 us * 2^t, on top of our own timeout.
  const auto extra = std::chrono::microseconds(static_cast<std::int64_t>(
      4.096 * static_cast<double>(1ull << std::min<int>(m.service_timeout, 31))));
  id->deadline = Clock::now() + id->resp_timeout + extra;
  wake();
}

void disconnected(CmId* id) {
  id->waiting = false;
  enter_timewait(id);
  if (!id->destroyed) deliver(make_event(id, RDMA_CM_EVENT_DISCONNECTED, 0));
}

void on_dreq(const wire::CmDreq& m, const wire::Gid16& src, std::uint64_t tid) {
  CmId* id = find_by_local(m.remote_comm_id);
  wire::CmDrep drep;
  drep.local_comm_id = m.remote_comm_id;
  drep.remote_comm_id = m.local_comm_id;
  std::array<std::uint8_t, wire::kMadSize> mad;
  wire::build_cm_drep(mad, tid, drep);
  agent().gsi.send(src, mad.data(), id ? id->tos : 0);
  if (!id) return;
  if (id->state == State::kEstablished || id->state == State::kRepSent ||
      id->state == State::kRepRcvd) {
    id->state = State::kTimewait;
    disconnected(id);
  }
}

void on_drep(const wire::CmDrep& m) {
  CmId* id = find_by_local(m.remote_comm_id);
  if (!id || id->state != State::kDreqSent) return;
  id->state = State::kTimewait;
  disconnected(id);
}

void on_sidr_req(const wire::CmSidrReq& m, const wire::Gid16& src, std::uint64_t tid) {
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
    wire::build_cm_sidr_rep(mad, tid, rep);
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

void on_sidr_rep(const wire::CmSidrRep& m) {
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

void on_mad(const std::uint8_t* mad, const wire::Gid16& src) {
  wire::Bytes b(mad, wire::kMadSize);
  auto h = wire::parse_mad_header(b);
  if (!h) return drop("bad MAD header");
  if (h->mgmt_class != wire::kMgmtClassCm) return drop("not a CM MAD (class unsupported)");
  switch (static_cast<wire::CmAttr>(h->attr_id)) {
    case wire::CmAttr::kReq:
      if (auto m = wire::parse_cm_req(b)) return on_req(*m, src, h->tid);
      break;
    case wire::CmAttr::kRep:
      if (auto m = wire::parse_cm_rep(b)) return on_rep(*m);
      break;
    case wire::CmAttr::kRtu:
      if (auto m = wire::parse_cm_rtu(b)) return on_rtu(*m);
      break;
    case wire::CmAttr::kRej:
      if (auto m = wire::parse_cm_rej(b)) return on_rej(*m);
      break;
    case wire::CmAttr::kMra:
      if (auto m = wire::parse_cm_mra(b)) return on_mra(*m);
      break;
    case wire::CmAttr::kDreq:
      if (auto m = wire::parse_cm_dreq(b)) return on_dreq(*m, src, h->tid);
      break;
    case wire::CmAttr::kDrep:
      if (auto m = wire::parse_cm_drep(b)) return on_drep(*m);
      break;
    case wire::CmAttr::kSidrReq:
      if (auto m = wire::parse_cm_sidr_req(b)) return on_sidr_req(*m, src, h->tid);
      break;
    case wire::CmAttr::kSidrRep:
      if (auto m = wire::parse_cm_sidr_rep(b)) return on_sidr_rep(*m);
      break;
    default:
      return drop("CM attribute not supported (LAP/APR/ClassPortInfo)");
  }
  drop("malformed CM message");
}

// ---- timers

void on_timeout(CmId* id) {
  if (id->retries_left > 0) {
    id->retries_left--;
    id->deadline = Clock::now() + id->resp_timeout;
    send_mad(id, id->peer_gid);
    return;
  }
  id->waiting = false;
  switch (id->state) {
    case State::kReqSent:
    case State::kRepSent:
    case State::kSidrReqSent:
      id->state = State::kClosed;
      if (!id->destroyed) deliver(make_event(id, RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT));
      break;
    case State::kDreqSent:
      id->state = State::kTimewait;
      disconnected(id);
      break;
    default:
      break;
  }
}

void peer_gone(const wire::Gid16& peer);

int run_timers() {
  const auto now = Clock::now();
  auto next = now + std::chrono::seconds(1);
  auto& gone = agent().gone;
  for (auto it = gone.begin(); it != gone.end();) {
    if (it->second <= now) {
      const wire::Gid16 peer = it->first;
      it = gone.erase(it);
      peer_gone(peer);
    } else {
      next = std::min(next, it->second);
      ++it;
    }
  }
  auto ids = agent().ids;  // handlers may free ids
  for (CmId* id : ids) {
    if (id->waiting && id->deadline <= now) on_timeout(id);
    if (id->timewait && id->timewait_end <= now) {
      id->timewait = false;
      if (id->state == State::kTimewait) id->state = State::kClosed;
      if (!id->destroyed) deliver(make_event(id, RDMA_CM_EVENT_TIMEWAIT_EXIT, 0));
    }
    maybe_free(id);
  }
  for (CmId* id : agent().ids) {
    if (id->waiting) next = std::min(next, id->deadline);
    if (id->timewait) next = std::min(next, id->timewait_end);
  }
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(next - Clock::now()).count();
  return static_cast<int>(std::clamp<std::int64_t>(ms + 1, 0, 1000));
}

// A peer process on this host ended: its connections end as if it had sent DREQs.
void peer_gone(const wire::Gid16& peer) {
  auto ids = agent().ids;
  for (CmId* id : ids) {
    if (id->peer_gid != peer) continue;
    switch (id->state) {
      case State::kEstablished:
      case State::kRepSent:
      case State::kRepRcvd:
      case State::kDreqSent:
        id->state = State::kTimewait;
        disconnected(id);
        break;
      case State::kReqSent:
      case State::kSidrReqSent:
        id->waiting = false;
        id->state = State::kClosed;
        if (!id->destroyed) deliver(make_event(id, RDMA_CM_EVENT_UNREACHABLE, -ECONNRESET));
        break;
      default:
        break;
    }
    maybe_free(id);
  }
}

void agent_loop() {
  auto& a = agent();
  int timeout = 0;
  for (;;) {
    epoll_event evs[16];
    int n = epoll_wait(a.epfd, evs, 16, timeout);
    std::lock_guard lock(mutex());
    for (int i = 0; i < n; ++i) {
      const int fd = evs[i].data.fd;
      if (fd == a.gsi.fd()) {
        a.gsi.poll(on_mad);
      } else if (fd == a.wake_fd) {
        std::uint64_t v;
        (void)!read(a.wake_fd, &v, sizeof v);
        std::vector<std::function<void()>> tasks;
        {
          std::lock_guard tl(a.tasks_mu);
          tasks.swap(a.tasks);
        }
        for (auto& t : tasks) t();
      } else if (a.iw && iw_handle_fd(fd, evs[i].events)) {
      } else if (std::optional<wire::Gid16> gone; a.liveness.handle(fd, gone)) {
        // A DREQ the peer sent just before it ended may still be on its way: honour it
        // first, and end what is left a moment later.
        if (gone) a.gone.emplace_back(*gone, Clock::now() + std::chrono::milliseconds(50));
      } else {
        for (CmId* id : a.ids) {
          if (id->registry_fd == fd) {
            registry::answer(fd, a.gsi.gid(), id->state == State::kListen && !id->destroyed);
          }
        }
      }
    }
    timeout = run_timers();
  }
}

bool start(std::string& error) {
  auto& a = agent();
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (!list || n == 0) {
    error = "no softrdma device";
    if (list) ibv_free_device_list(list);
    return false;
  }
  a.ctx = ibv_open_device(list[0]);
  ibv_free_device_list(list);
  if (!a.ctx) {
    error = "cannot open the device";
    return false;
  }
  ibv_query_device(a.ctx, &a.dattr);
  ibv_query_port(a.ctx, 1, &a.pattr);
  a.node_guid = a.dattr.node_guid;
  a.pd = ibv_alloc_pd(a.ctx);
  if (!a.pd) {
    error = "cannot allocate a PD";
    return false;
  }
  a.epfd = epoll_create1(EPOLL_CLOEXEC);
  a.wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  verbs::IwarpCm* iw = softrdma_iwarp_cm();
  if (iw && iw->is_iwarp(a.ctx)) {  // iWARP: TCP does what QP1 does on RoCE
    a.iw = iw;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = a.wake_fd;
    epoll_ctl(a.epfd, EPOLL_CTL_ADD, a.wake_fd, &ev);
    std::thread(agent_loop).detach();
    return true;
  }
  if (!a.gsi.open(a.ctx, error)) return false;
  fcntl(a.gsi.fd(), F_SETFL, fcntl(a.gsi.fd(), F_GETFL) | O_NONBLOCK);
  for (int fd : {a.gsi.fd(), a.wake_fd}) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    epoll_ctl(a.epfd, EPOLL_CTL_ADD, fd, &ev);
  }
  if (!a.liveness.open(a.gsi.gid(), a.epfd)) {
    std::fprintf(stderr,
                 "softrdma cm: cannot watch peers on this host (another process has"
                 " this device's address?)\n");
  }
  a.next_tid = (static_cast<std::uint64_t>(random_u32()) << 32);
  std::thread(agent_loop).detach();
  return true;
}

}  // namespace

ibv_context* agent_context() {
  auto& a = agent();
  if (!a.started) {
    a.started = true;
    std::string error;
    if (!start(error)) {
      std::fprintf(stderr, "softrdma cm: %s\n", error.c_str());
      a.start_errno = ENODEV;
      a.ctx = nullptr;
    } else {
      register_monitor_section();  // the ids in `softrdma res cm_id`
    }
  }
  if (!a.ctx || a.start_errno) {
    errno = a.start_errno ? a.start_errno : ENODEV;
    return nullptr;
  }
  return a.ctx;
}

verbs::IwarpCm* agent_iwarp() {
  return agent().iw;
}
int agent_epoll() {
  return agent().epfd;
}

void post_task(std::function<void()> fn) {
  {
    std::lock_guard tl(agent().tasks_mu);
    agent().tasks.push_back(std::move(fn));
  }
  wake();
}

const std::vector<CmId*>& agent_ids() {
  return agent().ids;
}

bool is_tracked(const CmId* id) {
  const auto& ids = agent().ids;
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

ibv_pd* agent_pd() {
  return agent().pd;
}
const wire::Gid16& agent_gid() {
  return agent().gsi.gid();
}

std::uint8_t agent_sgid_index() {
  return agent().gsi.sgid_index();
}

Event* make_event(CmId* id, rdma_cm_event_type type, int status) {
  auto* ev = new Event;
  std::memset(&ev->ev, 0, sizeof ev->ev);
  ev->ev.id = &id->id;
  ev->ev.event = type;
  ev->ev.status = status;
  ev->owner = id;
  return ev;
}

void deliver(Event* ev) {
  CmId* id = ev->owner;
  if (id->destroyed || id->destroying) {  // rdma_destroy_id has begun: nobody will read it
    delete ev;
    return;
  }
  id->events_out++;
  ev->queued_on = id->channel;
  id->channel->queue.push_back(ev);
  std::uint8_t one = 1;
  (void)!write(id->channel->write_fd, &one, 1);
}

void track(CmId* id) {
  agent().ids.push_back(id);
}

CmId* new_child(CmId* listener) {
  auto* c = new CmId;
  c->id.verbs = agent().ctx;
  c->id.context = listener->id.context;
  c->id.ps = listener->id.ps;
  c->id.qp_type = listener->id.qp_type;
  c->id.port_num = 1;
  c->id.pd = agent().pd;
  c->listener = listener;
  c->ep_qp_attr = listener->ep_qp_attr;
  c->channel = listener->channel;
  if (listener->sync) {  // librdmacm migrates a sync listener's requests to sync ids
    auto* ch = reinterpret_cast<Channel*>(rdma_create_event_channel());
    if (!ch) {
      delete c;
      return nullptr;
    }
    c->channel = ch;
    c->sync = true;
  }
  c->id.channel = &c->channel->ch;
  return c;
}

void offer_request(CmId* child, CmId* listener, Event* ev) {
  ev->ev.listen_id = &listener->id;
  Channel* ch = listener->channel;
  child->request_channel = ch;
  child->events_out++;
  ev->queued_on = ch;
  ch->queue.push_back(ev);
  std::uint8_t one = 1;
  (void)!write(ch->write_fd, &one, 1);
}

void untrack(CmId* id) {
  auto& ids = agent().ids;
  ids.erase(std::remove(ids.begin(), ids.end(), id), ids.end());
}

void watch_registry(CmId* id) {
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = id->registry_fd;
  epoll_ctl(agent().epfd, EPOLL_CTL_ADD, id->registry_fd, &ev);
}

void unwatch_registry(CmId* id) {
  if (id->registry_fd < 0) return;
  epoll_ctl(agent().epfd, EPOLL_CTL_DEL, id->registry_fd, nullptr);
  close(id->registry_fd);
  id->registry_fd = -1;
}

void destroy_channel(Channel* c) {
  if (c->closed) return;
  c->closed = true;
  static std::vector<Channel*>* graveyard = new std::vector<Channel*>;  // kept, see state.h
  graveyard->push_back(c);
  close(c->write_fd);  // a reader blocked in rdma_get_cm_event sees end-of-file
  close(c->ch.fd);
  auto queue = std::move(c->queue);
  for (Event* e : queue) {
    e->owner->events_out--;
    maybe_free(e->owner);
    delete e;
  }
  acked().notify_all();
}

void discard_queued(CmId* id) {
  auto drop_from = [&](Channel* ch) {
    if (!ch || ch->closed) return;
    auto& q = ch->queue;
    for (auto it = q.begin(); it != q.end();) {
      if ((*it)->owner == id) {
        id->events_out--;
        delete *it;
        it = q.erase(it);  // its byte stays in the pipe: readers skip it
      } else {
        ++it;
      }
    }
  };
  drop_from(id->channel);
  if (id->request_channel != id->channel) drop_from(id->request_channel);
}

void maybe_free(CmId* id) {
  if (!id->destroyed || id->events_out > 0 || id->waiting) return;
  untrack(id);
  unwatch_registry(id);
  if (id->sync && id->channel) destroy_channel(id->channel);
  delete id;
}

void flush_sends() {
  auto& a = agent();
  const auto until = Clock::now() + std::chrono::milliseconds(200);
  while (a.gsi.sends_pending() > 0 && Clock::now() < until) {
    a.gsi.poll(on_mad);
    if (a.gsi.sends_pending() > 0) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

void enter_timewait(CmId* id) {
  id->timewait = true;
  id->timewait_end = Clock::now() + kTimewait;
  wake();
}

namespace {
std::uint64_t new_tid() {
  return ++agent().next_tid;
}
}  // namespace

int send_req(CmId* id, const std::uint8_t* pdata, std::size_t len) {
  auto& a = agent();
  wire::CmReq m;
  id->local_comm_id = random_u32();
  id->local_psn = random_u32() & 0xFFFFFF;
  id->tid = new_tid();
  m.local_comm_id = id->local_comm_id;
  m.service_id = wire::ip_cm_service_id(static_cast<std::uint16_t>(id->id.ps),
                                        ntohs(rdma_get_dst_port(&id->id)));
  m.local_ca_guid = a.node_guid;
  m.local_qpn = id->id.qp ? id->id.qp->qp_num : id->qp_num;
  m.responder_resources = id->responder_resources;
  m.initiator_depth = id->initiator_depth;
  m.remote_cm_response_timeout = kRespTimeoutCode;
  m.transport_service_type = id->id.qp_type == IBV_QPT_UC ? 1 : 0;
  m.starting_psn = id->local_psn;
  m.local_cm_response_timeout = kRespTimeoutCode;
  m.retry_count = id->retry_count & 7;
  m.path_mtu = id->path_mtu;
  m.rnr_retry_count = id->rnr_retry_count & 7;
  m.max_cm_retries = kMaxCmRetries;
  m.srq = id->id.qp ? id->id.qp->srq != nullptr : id->srq;
  m.primary.local_gid = a.gsi.gid();
  m.primary.remote_gid = id->peer_gid;
  m.primary.traffic_class = id->tos;
  m.primary.hop_limit = 64;
  m.primary.packet_rate = 0x10;  // 100 Gb/s-class, informational
  m.primary.subnet_local = true;
  m.primary.local_ack_timeout = id->ack_timeout;
  put_request_private(id, m.private_data, pdata, len);
  wire::build_cm_req(id->last_mad, id->tid, m);
  id->state = State::kReqSent;
  return send_and_wait(id);
}

int send_rep(CmId* id, const std::uint8_t* pdata, std::size_t len) {
  auto& a = agent();
  wire::CmRep m;
  m.local_comm_id = id->local_comm_id;
  m.remote_comm_id = id->remote_comm_id;
  m.local_qpn = id->id.qp ? id->id.qp->qp_num : id->qp_num;
  m.starting_psn = id->local_psn;
  m.responder_resources = id->responder_resources;
  m.initiator_depth = id->initiator_depth;
  m.rnr_retry_count = id->rnr_retry_count & 7;
  m.srq = id->id.qp ? id->id.qp->srq != nullptr : id->srq;
  m.local_ca_guid = a.node_guid;
  put_private(m.private_data.data(), pdata, len, wire::kRepPrivate);
  wire::build_cm_rep(id->last_mad, id->tid, m);
  id->state = State::kRepSent;
  a.liveness.watch(id->peer_gid);
  id->answer_sent = true;
  return send_and_wait(id);
}

int send_rtu(CmId* id) {
  wire::CmRtu m;
  m.local_comm_id = id->local_comm_id;
  m.remote_comm_id = id->remote_comm_id;
  wire::build_cm_rtu(id->last_mad, id->tid, m);
  id->answer_sent = true;
  return send_mad(id, id->peer_gid);
}

int send_rej(CmId* id, std::uint16_t reason, const std::uint8_t* pdata, std::size_t len) {
  wire::CmRej m;
  m.local_comm_id = id->local_comm_id;
  m.remote_comm_id = id->remote_comm_id;
  m.message_rejected = id->state == State::kReqRcvd ? 0 : 1;
  m.reason = reason;
  put_private(m.private_data.data(), pdata, len, wire::kRejPrivate);
  std::array<std::uint8_t, wire::kMadSize> mad;
  wire::build_cm_rej(mad, id->tid, m);
  return agent().gsi.send(id->peer_gid, mad.data(), id->tos);
}

int send_dreq(CmId* id) {
  wire::CmDreq m;
  m.local_comm_id = id->local_comm_id;
  m.remote_comm_id = id->remote_comm_id;
  m.remote_qpn = id->remote_qpn;
  id->tid = new_tid();
  wire::build_cm_dreq(id->last_mad, id->tid, m);
  id->state = State::kDreqSent;
  return send_and_wait(id);
}

int send_sidr_req(CmId* id, const std::uint8_t* pdata, std::size_t len) {
  wire::CmSidrReq m;
  id->local_comm_id = random_u32();
  id->tid = new_tid();
  m.request_id = id->local_comm_id;
  m.service_id = wire::ip_cm_service_id(static_cast<std::uint16_t>(id->id.ps),
                                        ntohs(rdma_get_dst_port(&id->id)));
  put_request_private(id, m.private_data, pdata, len);
  wire::build_cm_sidr_req(id->last_mad, id->tid, m);
  id->state = State::kSidrReqSent;
  return send_and_wait(id);
}

int send_sidr_rep(CmId* id, std::uint8_t status, const std::uint8_t* pdata, std::size_t len) {
  wire::CmSidrRep m;
  m.request_id = id->remote_comm_id;
  m.status = status;
  m.qpn = id->id.qp ? id->id.qp->qp_num : id->qp_num;
  m.qkey = RDMA_UDP_QKEY;
  m.service_id = wire::ip_cm_service_id(static_cast<std::uint16_t>(id->id.ps),
                                        ntohs(rdma_get_src_port(&id->id)));
  put_private(m.private_data.data(), pdata, len, wire::kSidrRepPrivate);
  wire::build_cm_sidr_rep(id->last_mad, id->tid, m);
  id->answer_sent = true;
  id->state = status == wire::sidr_status::kSuccess ? State::kEstablished : State::kClosed;
  return send_mad(id, id->peer_gid);
}

int init_qp_attr(CmId* id, ibv_qp_attr* attr, int* mask) {
  if (agent().iw) {  // iWARP (as the kernel's iw_cm): the MPA negotiation does the rest
    *mask = IBV_QP_STATE;
    if (attr->qp_state == IBV_QPS_INIT || attr->qp_state == IBV_QPS_RTR) {
      attr->qp_access_flags =
          IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
      *mask |= IBV_QP_ACCESS_FLAGS;
    }
    return attr->qp_state == IBV_QPS_INIT || attr->qp_state == IBV_QPS_RTR ||
                   attr->qp_state == IBV_QPS_RTS
               ? 0
               : EINVAL;
  }
  const bool ud = id->id.qp_type == IBV_QPT_UD;
  const bool rc = id->id.qp_type == IBV_QPT_RC;
  switch (attr->qp_state) {
    case IBV_QPS_INIT:
      attr->pkey_index = 0;
      attr->port_num = 1;
      *mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
      if (ud) {
        attr->qkey = RDMA_UDP_QKEY;
        *mask |= IBV_QP_QKEY;
      } else {
        attr->qp_access_flags = 0;
        if (id->state != State::kIdle && id->state != State::kBound &&
            id->state != State::kAddrResolved && id->state != State::kRouteResolved) {
          attr->qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
          if (id->responder_resources) {
            attr->qp_access_flags |= IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
          }
        }
        *mask |= IBV_QP_ACCESS_FLAGS;
      }
      return 0;
    case IBV_QPS_RTR:
      *mask = IBV_QP_STATE;
      if (ud) return 0;
      if (id->remote_qpn == 0) return EINVAL;  // not connected yet
      std::memset(&attr->ah_attr, 0, sizeof attr->ah_attr);
      attr->ah_attr.is_global = 1;
      std::memcpy(attr->ah_attr.grh.dgid.raw, id->peer_gid.data(), 16);
      attr->ah_attr.grh.sgid_index = agent().gsi.sgid_index();
      attr->ah_attr.grh.hop_limit = 64;
      attr->ah_attr.grh.traffic_class = id->tos;
      attr->ah_attr.port_num = 1;
      attr->path_mtu = id->path_mtu ? static_cast<ibv_mtu>(id->path_mtu) : IBV_MTU_1024;
      attr->dest_qp_num = id->remote_qpn;
      attr->rq_psn = id->remote_psn;
      *mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
      if (rc) {
        attr->max_dest_rd_atomic = id->responder_resources;
        attr->min_rnr_timer = 0;
        *mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
      }
      return 0;
    case IBV_QPS_RTS:
      *mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
      attr->sq_psn = ud ? 0 : id->local_psn;
      if (rc) {
        attr->timeout = id->ack_timeout;
        attr->retry_cnt = id->retry_count & 7;
        attr->rnr_retry = id->rnr_retry_count & 7;
        attr->max_rd_atomic = id->initiator_depth;
        *mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
      }
      return 0;
    default:
      return EINVAL;
  }
}

int qp_to_rtr_rts(CmId* id) {
  if (!id->id.qp) return 0;
  ibv_qp_attr attr{};
  int mask = 0;
  for (ibv_qp_state s : {IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS}) {
    std::memset(&attr, 0, sizeof attr);
    attr.qp_state = s;
    int rc = init_qp_attr(id, &attr, &mask);
    if (!rc) rc = ibv_modify_qp(id->id.qp, &attr, mask);
    if (rc) return rc;
  }
  return 0;
}

int qp_to_err(CmId* id) {
  if (!id->id.qp) return 0;
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_ERR;
  return ibv_modify_qp(id->id.qp, &attr, IBV_QP_STATE);
}

wire::Gid16 gid_of(const sockaddr* addr) {
  wire::Gid16 g{};
  if (addr->sa_family == AF_INET) {
    g[10] = g[11] = 0xFF;
    std::memcpy(g.data() + 12, &reinterpret_cast<const sockaddr_in*>(addr)->sin_addr, 4);
  } else if (addr->sa_family == AF_INET6) {
    std::memcpy(g.data(), &reinterpret_cast<const sockaddr_in6*>(addr)->sin6_addr, 16);
  }
  return g;
}

void sockaddr_of(const wire::Gid16& gid, std::uint16_t port, sockaddr_storage& out) {
  std::memset(&out, 0, sizeof out);
  const bool v4 = std::all_of(gid.begin(), gid.begin() + 10, [](auto b) { return b == 0; }) &&
                  gid[10] == 0xFF && gid[11] == 0xFF;
  if (v4) {
    auto* s = reinterpret_cast<sockaddr_in*>(&out);
    s->sin_family = AF_INET;
    s->sin_port = htons(port);
    std::memcpy(&s->sin_addr, gid.data() + 12, 4);
  } else {
    auto* s = reinterpret_cast<sockaddr_in6*>(&out);
    s->sin6_family = AF_INET6;
    s->sin6_port = htons(port);
    std::memcpy(&s->sin6_addr, gid.data(), 16);
  }
}

}  // namespace softrdma::cm
