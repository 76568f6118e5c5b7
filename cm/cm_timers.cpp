// The CM agent's timers: MAD retransmission and response timeouts, timewait, the end of the
// connections of a peer process on this host that went away, and a peer's disconnect held back
// until the application has polled the completions before it.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>

#include "cm/agent_internal.h"

extern "C" std::size_t softrdma_unread_completions(ibv_context* context, std::uint32_t qpn);

namespace softrdma::cm {
namespace {

// How long a peer's disconnect waits at most for the application to poll its QP's completions.
constexpr auto kDisconnectGrace = std::chrono::milliseconds(500);

std::size_t unread_completions(const CmId* id) {
  if (id->conn_qpn == 0 || id->id.verbs == nullptr) return 0;
  return softrdma_unread_completions(id->id.verbs, id->conn_qpn);
}

void on_timeout(CmId* id) {
  if (id->resend_req) {  // the REQ again after a REJ for want of a listener (cm_handlers.cpp)
    id->resend_req = false;
    id->deadline = Clock::now() + id->resp_timeout;
    send_mad(id, id->peer_gid);
    return;
  }
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
      if (id->state != State::kRepSent && cm_partition() != 0xFFFF) {
        // On a partition of its own, the likeliest cause: a peer that is not a member of it
        // drops the MADs (IBTA 10.9.3; its drop_bad_pkey counts them), as a NIC would.
        std::fprintf(stderr,
                     "softrdma: rdma_cm: no answer to the connection request on partition "
                     "0x%04x (P_Key index 0 of --pkeys) after %d retries: a peer whose P_Key "
                     "table lacks that partition drops it; RDMA_CM_EVENT_UNREACHABLE\n",
                     cm_partition(), kMaxCmRetries);
      }
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

// A peer process on this host ended: its connections end as if it had sent DREQs.
void peer_gone(const wire::Gid16& peer) {
  auto ids = agent().ids;
  for (CmId* id : ids) {
    if (id->peer_gid != peer) continue;
    switch (id->state) {
      case State::kEstablished:
      case State::kRepSent:
      case State::kRepRcvd:
        id->state = State::kTimewait;
        peer_disconnected(id);
        break;
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

}  // namespace

void disconnected(CmId* id) {
  id->waiting = false;
  enter_timewait(id);
  if (!id->destroyed) deliver(make_event(id, RDMA_CM_EVENT_DISCONNECTED, 0));
}

void peer_disconnected(CmId* id) {
  id->waiting = false;
  if (id->destroyed || unread_completions(id) == 0) {
    disconnected(id);
    return;
  }
  id->disconnect_pending = true;
  id->disconnect_due = Clock::now() + kDisconnectGrace;
  wake();
}

void release_disconnect(CmId* id) {
  if (!id->disconnect_pending) return;
  id->disconnect_pending = false;
  disconnected(id);
}

void enter_timewait(CmId* id) {
  id->timewait = true;
  id->timewait_end = Clock::now() + kTimewait;
  wake();
}

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
    if (id->disconnect_pending &&
        (id->destroyed || id->disconnect_due <= now || unread_completions(id) == 0)) {
      release_disconnect(id);
    }
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
    // A held disconnect looks at the QP's completions again each millisecond.
    if (id->disconnect_pending) next = std::min(next, now + std::chrono::milliseconds(1));
  }
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(next - Clock::now()).count();
  return static_cast<int>(std::clamp<std::int64_t>(ms + 1, 0, 1000));
}

}  // namespace softrdma::cm
