// softrdma_iwarp_cm(): the CM layer's way to the softiwarp0 device (verbs/iwarp_cm.h), and the
// routing of iWARP QP events to the context's async fd and to the CM.
#include "verbs/iwarp_cm.h"

#include <cerrno>

#include "iwarp/mpa_spec.h"
#include "verbs/objects.h"

using namespace softrdma;
using namespace softrdma::verbs;

namespace softrdma::verbs {

void post_async_event(SoftContext* ctx, const rxe::AsyncEvent& ev);
iwarp::Qp* iwarp_qp(const SoftQp* s);

namespace {

// What a softiwarp0 QP's events reach: the context's async fd and the CM's handler. Shared
// with the callbacks in flight, so a QP destroyed meanwhile is never touched (alive = false).
struct IwQpHooks {
  std::mutex mu;
  bool alive = true;
  SoftContext* ctx = nullptr;
  ibv_qp* qp = nullptr;
  std::function<void(const iwarp::QpEvent&)> cm;
};

void post_qp_event(SoftContext* ctx, ibv_qp* qp, ibv_event_type type) {
  ibv_async_event out{};
  out.event_type = type;
  out.element.qp = qp;
  AsyncEvents::post(ctx->async_write_fd, out, soft(qp)->event_id);
}

IwQpHooks& hooks_of(ibv_qp* qp) {
  return *static_cast<IwQpHooks*>(soft(qp)->transport_state.get());
}

iwarp::Qp* iw_qp(ibv_qp* qp) {
  return qp && iw(qp->context) ? iwarp_qp(soft(qp)) : nullptr;
}

class Cm final : public IwarpCm {
 public:
  bool is_iwarp(ibv_context* ctx) override { return ctx && iw(ctx) != nullptr; }
  int connect(ibv_qp* qp, int fd, const iwarp::MpaParams& p, iwarp::ConnectCallback cb) override {
    iwarp::Qp* q = iw_qp(qp);
    return q ? iw(qp->context)->connect(q, fd, p, std::move(cb)) : EINVAL;
  }
  int read_request(ibv_context* ctx, int fd, std::chrono::milliseconds timeout,
                   iwarp::RequestCallback cb) override {
    return is_iwarp(ctx) ? iw(ctx)->read_request(fd, timeout, std::move(cb)) : EINVAL;
  }
  int accept(ibv_qp* qp, int fd, const iwarp::MpaParams& p, iwarp::AcceptCallback cb) override {
    iwarp::Qp* q = iw_qp(qp);
    return q ? iw(qp->context)->accept(q, fd, p, std::move(cb)) : EINVAL;
  }
  int reject(ibv_context* ctx, int fd, std::span<const std::uint8_t> pd) override {
    return is_iwarp(ctx) ? iw(ctx)->reject(fd, pd) : EINVAL;
  }
  int disconnect(ibv_qp* qp) override {
    iwarp::Qp* q = iw_qp(qp);
    return q ? iw(qp->context)->disconnect(q) : EINVAL;
  }
  int abort(ibv_qp* qp) override {
    iwarp::Qp* q = iw_qp(qp);
    return q ? iw(qp->context)->abort(q) : EINVAL;
  }
  iwarp::MpaParams configured_params() override {
    iwarp::MpaParams p;
    std::string error;
    if (Engine* e = Engine::get()) iwarp::parse_mpa_spec(e->config().mpa, p, error);  // checked
    return p;                                                                         // at start
  }
  iwarp::UserTcp* user_tcp() override {
    Engine* e = Engine::get();
    return e ? e->iwarp_device().config().user_tcp.get() : nullptr;
  }
  int set_event_handler(ibv_qp* qp, iwarp::QpEventCallback fn) override {
    if (!iw_qp(qp)) return EINVAL;
    IwQpHooks& h = hooks_of(qp);
    std::lock_guard lock(h.mu);
    h.cm = std::move(fn);
    return 0;
  }
};

}  // namespace

iwarp::Qp* iwarp_qp(const SoftQp* s) {
  return static_cast<iwarp::Qp*>(s->transport);
}

void register_iwarp_qp(SoftQp* s) {
  auto hooks = std::make_shared<IwQpHooks>();
  hooks->ctx = s->ctx;
  hooks->qp = &s->qpx.qp_base;
  s->transport_state = hooks;
  iwarp_qp(s)->set_event_handler([h = std::move(hooks)](const iwarp::QpEvent& ev) {
    std::function<void(const iwarp::QpEvent&)> cm;
    {
      std::lock_guard lock(h->mu);
      if (!h->alive) return;
      switch (ev.kind) {
        case iwarp::QpEvent::Kind::kEstablished:
          h->qp->state = IBV_QPS_RTS;
          post_qp_event(h->ctx, h->qp, IBV_EVENT_COMM_EST);
          break;
        case iwarp::QpEvent::Kind::kTermSent:
        case iwarp::QpEvent::Kind::kTermReceived:
        case iwarp::QpEvent::Kind::kConnError:
          h->qp->state = IBV_QPS_ERR;
          post_qp_event(h->ctx, h->qp, IBV_EVENT_QP_FATAL);
          break;
        case iwarp::QpEvent::Kind::kDisconnected:
          h->qp->state = IBV_QPS_ERR;
          break;
        case iwarp::QpEvent::Kind::kLastWqeReached:
          post_qp_event(h->ctx, h->qp, IBV_EVENT_QP_LAST_WQE_REACHED);
          return;  // not the connection's business
      }
      cm = h->cm;
    }
    if (cm) cm(ev);
  });
}

void unregister_iwarp_qp(SoftQp* s) {
  if (!s->transport_state) return;
  IwQpHooks& h = *static_cast<IwQpHooks*>(s->transport_state.get());
  std::lock_guard lock(h.mu);
  h.alive = false;
}

}  // namespace softrdma::verbs

extern "C" IwarpCm* softrdma_iwarp_cm() {
  static Cm* const cm = new Cm;  // never destroyed: the CM agent may call it as the process exits
  return cm;
}
