// The objects librdmacm hands to applications (each starts with the public struct
// from <rdma/rdma_cma.h>) and the connection state the CM agent keeps for them.
// Everything here is guarded by cm::mutex(), except what the comments say.
#pragma once

#include <rdma/rdma_cma.h>

#include <array>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <vector>

#include "wire/ib_cm.h"

namespace softrdma::cm {

using Clock = std::chrono::steady_clock;

std::mutex& mutex();               // the one CM lock (connection setup is not a hot path)
std::condition_variable& acked();  // signalled (under mutex()) when an event is acked

struct Event {
  rdma_cm_event ev{};  // first: applications get &ev
  std::array<std::uint8_t, 256> private_data{};
  struct CmId* owner = nullptr;
  struct Channel* queued_on = nullptr;  // until rdma_get_cm_event hands it out
  bool establish = false;               // a REP for an id with a QP: taken, it becomes ESTABLISHED
};

struct Channel {
  rdma_event_channel ch{};  // first; ch.fd is the read end of a pipe, one byte per event
  int write_fd = -1;
  std::deque<Event*> queue;
  // Destroyed channels keep their memory (a thread may still be inside
  // rdma_get_cm_event on them); their fds are closed.
  bool closed = false;
};

enum class State : std::uint8_t {
  kIdle,
  kBound,
  kAddrResolved,
  kRouteResolved,
  kListen,
  kReqSent,  // active: REQ out, waiting for REP
  kRepRcvd,  // active without a QP: CONNECT_RESPONSE given, waiting for rdma_establish
  kReqRcvd,  // passive: CONNECT_REQUEST given, waiting for accept/reject
  kRepSent,  // passive: REP out, waiting for RTU
  kEstablished,
  kDreqSent,
  kTimewait,
  kSidrReqSent,  // UD active
  kSidrReqRcvd,  // UD passive
  kClosed,       // rejected, disconnected or failed
};

struct Multicast {
  sockaddr_storage addr{};
  wire::Gid16 mgid{};
  void* context = nullptr;
  bool attached = false;
};

class Transport;

struct CmId {
  rdma_cm_id id{};                       // first: applications get &id
  const Transport* transport = nullptr;  // its device's CM (cm/transport.h), set at creation
  Channel* channel = nullptr;
  bool sync = false;  // created with a NULL channel: calls wait for their event
  State state = State::kIdle;
  bool destroying = false;  // rdma_destroy_id waits for its events to be acked
  bool destroyed = false;   // rdma_destroy_id called; freed once no event refers to it
  int events_out = 0;       // events queued or handed out, not yet acked

  // Addressing. `port` is the rdma_cm port (host order), claimed in the registry when bound.
  int registry_fd = -1;
  bool wildcard = false;
  int backlog = 0;
  CmId* listener = nullptr;  // passive ids: the listening id they came from (may be freed:
                             // never dereferenced after creation)
  Channel* request_channel = nullptr;      // where their CONNECT_REQUEST was queued
  ibv_qp_init_attr* ep_qp_attr = nullptr;  // rdma_create_ep on a passive id (rdma_get_request)
  wire::Gid16 peer_gid{};                  // where the peer's CM agent is (its device address)
  std::uint8_t tos = 0;
  bool tos_set = false;
  std::uint8_t ack_timeout = 14;

  // Connection.
  std::uint32_t local_comm_id = 0, remote_comm_id = 0;
  std::uint64_t tid = 0;
  std::uint32_t remote_qpn = 0, remote_psn = 0, local_psn = 0, remote_qkey = 0;
  std::uint8_t responder_resources = 0, initiator_depth = 0;
  std::uint8_t retry_count = 7, rnr_retry_count = 7;
  std::uint8_t path_mtu = 0;  // enum ibv_mtu
  std::uint32_t qp_num = 0;   // when the application brings its own QP (conn_param.qp_num)
  bool srq = false;
  ibv_ece local_ece{}, remote_ece{};

  // Retransmission of the last MAD we are waiting on an answer for.
  std::array<std::uint8_t, wire::kMadSize> last_mad{};
  bool waiting = false;
  int retries_left = 0;
  Clock::time_point deadline{};
  Clock::time_point timewait_end{};
  bool timewait = false;
  std::chrono::milliseconds resp_timeout{1000};
  // The QP number this side offered in its REQ or REP, and a peer's disconnect held back until
  // the application has polled that QP's completions (peer_disconnected, cm/cm_timers.cpp).
  std::uint32_t conn_qpn = 0;
  bool disconnect_pending = false;
  Clock::time_point disconnect_due{};

  std::vector<Multicast> mcast;

  // iWARP: the TCP socket (listening, connecting, or accepted and not yet handed to the QP)
  // and what the connect will send once TCP is up.
  int tcp_fd = -1;
  bool tcp_connecting = false;
  std::vector<std::uint8_t> mpa_private;
  Clock::time_point iw_refused_since{};  // first ECONNREFUSED of this connect
  // IB CM: the first REJ for want of a listener on another host, and the REQ due again.
  Clock::time_point no_listener_since{};
  bool resend_req = false;

  // Passive ids remember the REP/SIDR_REP they sent, to answer a duplicate request.
  bool answer_sent = false;
};

inline CmId* cm_id(rdma_cm_id* id) {
  return reinterpret_cast<CmId*>(id);
}
inline Channel* channel(rdma_event_channel* c) {
  return reinterpret_cast<Channel*>(c);
}

}  // namespace softrdma::cm
