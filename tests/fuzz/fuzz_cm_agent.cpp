// Fuzz target: the CM agent's state machine (cm/cm_handlers.cpp, cm_timers.cpp and the rdma_cm
// calls over the IB CM), in-process on a real softroce0 device. The input is a sequence of
// steps: MADs as the GSI QP would hand them over (REQ, REP, RTU, REJ, MRA, DREQ, DREP, SIDR_REQ,
// SIDR_REP built with the comm IDs of the ids that exist, so that they hit, or raw bytes), the
// application's calls (connect, which goes to this process's own listeners, accept, reject,
// establish, notify, disconnect, destroy) and timer expiry. Properties: no crash; no id in a
// state its flags contradict; every id's events in a legal order, none for an id destroyed or
// never announced; once every id is destroyed and its timers have run out, the agent holds none.
#include <arpa/inet.h>
#include <fcntl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "cm/agent_internal.h"
#include "tests/fuzz/reader.h"

namespace {
using namespace softrdma;
using namespace softrdma::cm;

[[noreturn]] void fail(const char* what, int detail = 0) {
  std::fprintf(stderr, "fuzz_cm_agent: %s (%d)\n", what, detail);
  std::abort();
}

struct Known {
  rdma_cm_id* id = nullptr;
  std::vector<rdma_cm_event_type> events;
  bool seen(rdma_cm_event_type t) const {
    return std::find(events.begin(), events.end(), t) != events.end();
  }
};

struct World {
  rdma_event_channel* ch = nullptr;
  std::vector<Known> ids;
  std::uint16_t port[2] = {0, 0};  // the TCP and the UDP listener's
  wire::Gid16 self{};              // the agent's GID
};

// The events an id may see next, given those it saw.
void check_order(const Known& k, rdma_cm_event_type e) {
  const bool ended = k.seen(RDMA_CM_EVENT_REJECTED) || k.seen(RDMA_CM_EVENT_UNREACHABLE) ||
                     k.seen(RDMA_CM_EVENT_CONNECT_ERROR);
  const bool disconnected = k.seen(RDMA_CM_EVENT_DISCONNECTED);
  switch (e) {
    case RDMA_CM_EVENT_CONNECT_REQUEST:
      if (!k.events.empty()) fail("CONNECT_REQUEST for an id that had events");
      break;
    case RDMA_CM_EVENT_CONNECT_RESPONSE:
      if (k.seen(e) || k.seen(RDMA_CM_EVENT_ESTABLISHED) || ended || disconnected) {
        fail("CONNECT_RESPONSE out of order");
      }
      break;
    case RDMA_CM_EVENT_ESTABLISHED:
      if (k.seen(e) || ended || disconnected) fail("ESTABLISHED out of order");
      break;
    case RDMA_CM_EVENT_REJECTED:
    case RDMA_CM_EVENT_UNREACHABLE:
    case RDMA_CM_EVENT_CONNECT_ERROR:
      if (ended || disconnected || k.seen(RDMA_CM_EVENT_ESTABLISHED)) {
        fail("a failure after the connection ended or was established", e);
      }
      break;
    case RDMA_CM_EVENT_DISCONNECTED:
      if (ended || disconnected) fail("DISCONNECTED after the connection ended");
      break;
    case RDMA_CM_EVENT_TIMEWAIT_EXIT:
      if (!disconnected || k.seen(e)) fail("TIMEWAIT_EXIT without DISCONNECTED, or twice");
      break;
    default:
      break;
  }
}

// The state an id is in must agree with its flags. Under the CM lock.
void check_states() {
  for (const CmId* c : agent().ids) {
    if (c->state > State::kClosed) fail("an id in no state", static_cast<int>(c->state));
    if (c->events_out < 0) fail("an id acked more events than it had", c->events_out);
    const bool may_wait = c->state == State::kReqSent || c->state == State::kRepSent ||
                          c->state == State::kSidrReqSent || c->state == State::kDreqSent;
    if (c->waiting && !may_wait)
      fail("an id waits for an answer in a state that expects none", static_cast<int>(c->state));
    if (c->timewait && c->state != State::kTimewait && c->state != State::kClosed) {
      fail("an id in timewait in another state", static_cast<int>(c->state));
    }
    if (c->disconnect_pending && (c->state != State::kTimewait || c->timewait)) {
      fail("a held disconnect outside timewait's state, or timewait already begun",
           static_cast<int>(c->state));
    }
  }
}

// FUZZ_CM_TRACE=1: every event and step on stderr (to replay an input).
bool trace() {
  static const bool on = std::getenv("FUZZ_CM_TRACE") != nullptr;
  return on;
}

Known* find(World& w, rdma_cm_id* id) {
  for (Known& k : w.ids) {
    if (k.id == id) return &k;
  }
  return nullptr;
}

// Takes and acks every event, checking each against its id's history.
void drain(World& w) {
  rdma_cm_event* ev = nullptr;
  while (rdma_get_cm_event(w.ch, &ev) == 0) {
    Known* k = find(w, ev->id);
    if (!k) {
      if (ev->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
        fail("an event for an id destroyed or never announced", ev->event);
      }
      w.ids.push_back({ev->id, {}});
      k = &w.ids.back();
    }
    if (trace()) {
      std::fprintf(stderr, "fuzz_cm_agent: id %p %s\n", static_cast<void*>(ev->id),
                   rdma_event_str(ev->event));
    }
    check_order(*k, ev->event);
    k->events.push_back(ev->event);
    rdma_ack_cm_event(ev);
  }
}

void destroy(World& w, std::size_t i) {
  drain(w);
  rdma_destroy_id(w.ids[i].id);
  w.ids.erase(w.ids.begin() + static_cast<std::ptrdiff_t>(i));
}

wire::Gid16 peer_gid(std::uint8_t k) {
  wire::Gid16 g{};
  g[10] = g[11] = 0xFF;
  g[12] = 127;
  g[13] = 1;
  g[14] = 254;
  g[15] = static_cast<std::uint8_t>(1 + k % 4);
  return g;
}

// The IP CM header of a request from `src` to `dst`, in its IPv4 form.
void put_ip_cm(std::uint8_t* out, const wire::Gid16& src, const wire::Gid16& dst,
               std::uint16_t src_port) {
  wire::IpCmHeader h;
  h.ip_version = 4;
  h.src_port = src_port;
  h.src_addr = src;
  h.dst_addr = dst;
  h.src_addr[10] = h.src_addr[11] = h.dst_addr[10] = h.dst_addr[11] = 0;
  wire::build_ip_cm_header(wire::MutBytes(out, wire::kIpCmHeaderSize), h);
}

void set_up(World& w) {
  static rdma_event_channel* ch = [] {
    rdma_event_channel* c = rdma_create_event_channel();
    if (!c) fail("no event channel", errno);
    fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK);
    return c;
  }();
  w.ch = ch;
  const rdma_port_space ps[2] = {RDMA_PS_TCP, RDMA_PS_UDP};
  for (int i = 0; i < 2; ++i) {
    rdma_cm_id* id = nullptr;
    if (rdma_create_id(w.ch, &id, nullptr, ps[i]) != 0) fail("rdma_create_id", errno);
    if (rdma_listen(id, 4) != 0) fail("rdma_listen", errno);
    w.port[i] = ntohs(rdma_get_src_port(id));
    w.ids.push_back({id, {}});
  }
  std::lock_guard lock(mutex());
  w.self = agent_gid();
}

void inject(const std::array<std::uint8_t, wire::kMadSize>& mad, const wire::Gid16& src) {
  std::lock_guard lock(mutex());
  on_mad(mad.data(), src);
  check_states();
}

// The comm IDs of id `k` (0 when there is none).
std::pair<std::uint32_t, std::uint32_t> comm_ids(World& w, std::uint8_t k) {
  if (w.ids.empty()) return {0, 0};
  const CmId* c = cm_id(w.ids[k % w.ids.size()].id);
  std::lock_guard lock(mutex());
  return {c->local_comm_id, c->remote_comm_id};
}

// A CM message of type M answering the exchange whose comm IDs are (local, remote) here: the
// peer's own ID is our remote one, and ours its remote one.
template <class M>
M answering(std::uint32_t local, std::uint32_t remote) {
  M m;
  m.local_comm_id = remote;
  m.remote_comm_id = local;
  return m;
}

// Id `k` of the world (modulo their number), or nullptr when there is none.
rdma_cm_id* picked(const World& w, std::uint8_t k) {
  return w.ids.empty() ? nullptr : w.ids[k % w.ids.size()].id;
}

// Connection parameters from the input: the QPN, responder resources and initiator depth.
rdma_conn_param conn_param_from(fuzz::Reader& r) {
  rdma_conn_param p{};
  p.qp_num = r.u32() & 0xFFFFFF;
  p.responder_resources = r.u8();
  p.initiator_depth = r.u8();
  return p;
}

// Ends the response timer, the timewait and the grace of a held disconnect of every id that
// `pick` chooses (it may take the id's retries away too) now, runs the timers and checks the
// states. Under the agent's mutex.
template <class Pick>
void run_out_timers(Pick pick) {
  const auto now = Clock::now();
  for (CmId* c : agent().ids) {
    if (!pick(c)) continue;
    c->deadline = now;
    c->timewait_end = now;
    c->disconnect_due = now;
  }
  run_timers();
  check_states();
}

void step(World& w, fuzz::Reader& r) {
  std::array<std::uint8_t, wire::kMadSize> mad{};
  const std::uint8_t op = r.u8() % 18;
  const std::uint8_t k = r.u8();
  const wire::Gid16 src = peer_gid(r.u8());
  const std::uint64_t tid = r.u8();
  const bool exact = (r.u8() & 7) != 0;  // mostly IDs that hit
  auto [local, remote] = comm_ids(w, k);
  if (trace())
    std::fprintf(stderr, "fuzz_cm_agent: step %u on id %zu of %zu\n", static_cast<unsigned>(op),
                 w.ids.empty() ? 0 : k % w.ids.size(), w.ids.size());
  if (!exact) {
    local = r.u32();
    remote = r.u32();
  }
  // Builds `m` into the MAD and hands it to the agent as if from `src`.
  const auto send = [&](const auto& m) {
    wire::build_cm(mad, tid, m);
    inject(mad, src);
  };
  switch (op) {
    case 0: {  // REQ to the TCP listener (or a retransmission of one that came)
      wire::CmReq m;
      m.local_comm_id = exact && remote ? remote : r.u32();
      m.service_id = wire::ip_cm_service_id(RDMA_PS_TCP, exact ? w.port[0] : r.u16());
      m.local_qpn = r.u32() & 0xFFFFFF;
      m.starting_psn = r.u32() & 0xFFFFFF;
      m.responder_resources = r.u8();
      m.initiator_depth = r.u8();
      m.path_mtu = r.u8() & 0xF;
      m.retry_count = r.u8() & 7;
      m.rnr_retry_count = r.u8() & 7;
      m.primary.traffic_class = r.u8();
      m.primary.local_ack_timeout = r.u8() & 0x1F;
      put_ip_cm(m.private_data.data(), src, w.self, r.u16());
      if (!exact) m.private_data[0] = r.u8();
      send(m);
      break;
    }
    case 1: {
      wire::CmRep m;
      m.local_comm_id = r.u32();
      m.remote_comm_id = local;
      m.local_qpn = r.u32() & 0xFFFFFF;
      m.starting_psn = r.u32() & 0xFFFFFF;
      m.responder_resources = r.u8();
      m.initiator_depth = r.u8();
      send(m);
      break;
    }
    case 2:
      send(answering<wire::CmRtu>(local, remote));
      break;
    case 3: {
      auto m = answering<wire::CmRej>(local, remote);
      m.reason = r.u16();
      m.message_rejected = r.u8() & 3;
      send(m);
      break;
    }
    case 4: {
      auto m = answering<wire::CmMra>(local, remote);
      m.service_timeout = r.u8() & 0x1F;
      send(m);
      break;
    }
    case 5:
      send(answering<wire::CmDreq>(local, remote));
      break;
    case 6:
      send(answering<wire::CmDrep>(local, remote));
      break;
    case 7: {  // SIDR_REQ to the UDP listener
      wire::CmSidrReq m;
      m.request_id = exact && remote ? remote : r.u32();
      m.service_id = wire::ip_cm_service_id(RDMA_PS_UDP, exact ? w.port[1] : r.u16());
      put_ip_cm(m.private_data.data(), src, w.self, r.u16());
      send(m);
      break;
    }
    case 8: {
      wire::CmSidrRep m;
      m.request_id = local;
      m.status = r.u8() % 6;
      m.qpn = r.u32() & 0xFFFFFF;
      m.qkey = r.u32();
      send(m);
      break;
    }
    case 9: {  // whatever bytes
      const std::string b = r.bytes(wire::kMadSize);
      std::memcpy(mad.data(), b.data(), b.size());
      inject(mad, src);
      break;
    }
    case 10: {  // connect to this process's own TCP or UDP listener
      const int udp = k & 1;
      rdma_cm_id* id = nullptr;
      if (rdma_create_id(w.ch, &id, nullptr, udp ? RDMA_PS_UDP : RDMA_PS_TCP) != 0) break;
      w.ids.push_back({id, {}});
      sockaddr_in dst{};
      dst.sin_family = AF_INET;
      std::memcpy(&dst.sin_addr, w.self.data() + 12, 4);
      dst.sin_port = htons(exact ? w.port[udp] : r.u16());
      if (rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&dst), 100) != 0) break;
      if (rdma_resolve_route(id, 100) != 0) break;
      std::uint8_t pdata[64] = {};
      const auto pdata_len = static_cast<std::uint8_t>(r.u8() % 64);
      rdma_conn_param p = conn_param_from(r);
      p.private_data = pdata;
      p.private_data_len = pdata_len;
      rdma_connect(id, &p);
      break;
    }
    case 11: {
      rdma_cm_id* id = picked(w, k);
      if (!id) break;
      rdma_conn_param p = conn_param_from(r);
      rdma_accept(id, &p);
      break;
    }
    case 12: {
      rdma_cm_id* id = picked(w, k);
      if (!id) break;
      std::uint8_t pdata[160] = {};
      rdma_reject(id, pdata, static_cast<std::uint8_t>(r.u8() % 160));
      break;
    }
    case 13:
      if (rdma_cm_id* id = picked(w, k)) rdma_establish(id);
      break;
    case 14:
      if (rdma_cm_id* id = picked(w, k)) rdma_disconnect(id);
      break;
    case 15:
      if (!w.ids.empty()) destroy(w, k % w.ids.size());
      break;
    case 16: {  // the response timer or the timewait of an id (or of all) runs out now
      std::lock_guard lock(mutex());
      run_out_timers([&](CmId* c) {
        if (!(k & 1) && !w.ids.empty() && &c->id != picked(w, k)) return false;
        if (r.u8() & 1) c->retries_left = 0;
        return true;
      });
      break;
    }
    default:
      if (rdma_cm_id* id = picked(w, k)) rdma_notify(id, IBV_EVENT_COMM_EST);
      break;
  }
  drain(w);
  std::lock_guard lock(mutex());
  check_states();
}

// Destroys everything, then runs every timer out until the agent holds no id (a connect's own
// REQ may still be on its way to this process's listener, and make one more).
void tear_down(World& w) {
  for (int round = 0; round < 400; ++round) {
    drain(w);
    while (!w.ids.empty()) destroy(w, w.ids.size() - 1);
    {
      std::lock_guard lock(mutex());
      run_out_timers([](CmId* c) {
        c->retries_left = 0;
        return true;
      });
      if (agent().ids.empty()) return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::lock_guard lock(mutex());
  fail("ids left after everything was destroyed", static_cast<int>(agent().ids.size()));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  World w;
  set_up(w);
  fuzz::Reader r{data, size};
  for (int i = 0; i < 48 && !r.empty(); ++i) step(w, r);
  tear_down(w);
  return 0;
}
