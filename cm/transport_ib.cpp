// The IB CM transport (RoCE): ports claimed in the host's registry, peers found through it,
// and connections made by the CM agent's MADs on the GSI QP (cm/agent.h).
#include <fcntl.h>
#include <sys/epoll.h>

#include <cstdio>
#include <cstring>
#include <thread>

#include "cm/agent_internal.h"
#include "cm/registry.h"
#include "cm/sockaddr.h"
#include "cm/transport.h"

namespace softrdma::cm {
namespace {

class IbCm final : public Transport {
 public:
  const char* device_name() const override { return "softroce0"; }

  // MADs come to the GSI QP; peers on this host are watched (cm/liveness.h).
  bool open_agent(Agent& a, std::string& error) const override {
    if (!a.gsi.open(a.ctx, error)) return false;
    fcntl(a.gsi.fd(), F_SETFL, fcntl(a.gsi.fd(), F_GETFL) | O_NONBLOCK);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = a.gsi.fd();
    epoll_ctl(a.epfd, EPOLL_CTL_ADD, a.gsi.fd(), &ev);
    if (!a.liveness.open(a.gsi.gid(), a.epfd)) {
      std::fprintf(stderr,
                   "softrdma cm: cannot watch peers on this host (another process has"
                   " this device's address?)\n");
    }
    a.next_tid = (static_cast<std::uint64_t>(random_u32()) << 32);
    return true;
  }

  bool partitions() const override { return true; }

  bool local_address(const sockaddr* addr) const override { return registry::is_local(addr); }
  bool bound(const CmId* id) const override { return id->registry_fd >= 0; }

  int bind(CmId* id, const sockaddr* addr) const override {
    std::uint16_t port = port_of(addr);
    int fd = registry::claim(static_cast<std::uint16_t>(id->id.ps), addr, port);
    if (fd < 0) return -fd;
    id->registry_fd = fd;
    std::memcpy(&id->id.route.addr.src_storage, addr, addr_len(addr));
    set_port(&id->id.route.addr.src_addr, port);
    std::memcpy(id->id.route.addr.addr.ibaddr.sgid.raw, agent_gid().data(), 16);
    id->id.route.addr.addr.ibaddr.pkey = htons(cm_partition());
    watch_registry(id);
    return 0;
  }

  // A local listener's device, our own device when nobody on this host holds the port (our
  // agent then rejects the REQ), or the address itself for another host (or a group).
  wire::Gid16 peer_for(CmId* id, const sockaddr* dst,
                       std::chrono::milliseconds patience) const override {
    if (is_multicast(dst) || !registry::is_local(dst)) return gid_of(dst);
    const auto until = std::chrono::steady_clock::now() + patience;
    for (;;) {
      auto ans = registry::lookup(static_cast<std::uint16_t>(id->id.ps), dst, port_of(dst));
      if (ans.found && ans.gid != wire::Gid16{} && ans.listening) return ans.gid;
      if (std::chrono::steady_clock::now() >= until) {
        return ans.found && ans.gid != wire::Gid16{} ? ans.gid : agent_gid();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }

  int listen(CmId*, int) const override { return 0; }  // REQs come to the agent's QP1

  int connect(CmId* id, const rdma_conn_param*, const std::uint8_t* pdata,
              std::size_t len) const override {
    return id->id.qp_type == IBV_QPT_UD ? send_sidr_req(id, pdata, len) : send_req(id, pdata, len);
  }

  int accept(CmId* id, const rdma_conn_param*, const std::uint8_t* pdata,
             std::size_t len) const override {
    if (id->state == State::kSidrReqRcvd) {
      return send_sidr_rep(id, wire::sidr_status::kSuccess, pdata, len);
    }
    id->local_psn = id->local_psn ? id->local_psn : 1;
    int rc = qp_to_rtr_rts(id);
    if (rc) {
      qp_to_err(id);
      return rc;
    }
    return send_rep(id, pdata, len);
  }

  int reject(CmId* id, const void* private_data, std::uint8_t len) const override {
    const auto* p = static_cast<const std::uint8_t*>(private_data);
    if (id->state == State::kSidrReqRcvd) {
      send_sidr_rep(id, wire::sidr_status::kRejected, p, p ? len : 0);
      return 0;
    }
    if (len > wire::kRejPrivate) return EINVAL;
    send_rej(id, wire::rej_reason::kConsumerDefined, p, p ? len : 0);
    id->state = State::kClosed;
    flush_sends();
    return 0;
  }

  int establish(CmId* id) const override {
    int rc = send_rtu(id);
    if (rc) return rc;
    id->state = State::kEstablished;
    flush_sends();
    return 0;
  }

  int disconnect(CmId* id, bool& wait) const override {
    release_disconnect(id);  // the peer's, held back: the application ends it now
    qp_to_err(id);
    switch (id->state) {
      case State::kEstablished:
      case State::kRepSent:
      case State::kRepRcvd: {
        int rc = send_dreq(id);
        if (rc) return rc;
        flush_sends();
        wait = true;
        return 0;
      }
      case State::kDreqSent:
      case State::kTimewait:
      case State::kClosed:
        // The peer disconnected first: its DISCONNECTED event is already queued (or read).
        wait = id->sync && !id->channel->queue.empty();
        return 0;
      default:
        return EINVAL;
    }
  }

  void destroy(CmId* id) const override {
    switch (id->state) {
      case State::kEstablished:
      case State::kRepSent:
      case State::kRepRcvd:
        if (id->id.qp_type != IBV_QPT_UD) send_dreq(id);  // id->qp may be gone: not touched
        break;
      case State::kReqRcvd:
        send_rej(id, wire::rej_reason::kConsumerDefined, nullptr, 0);
        break;
      case State::kSidrReqRcvd:
        send_sidr_rep(id, wire::sidr_status::kRejected, nullptr, 0);
        break;
      case State::kReqSent:
      case State::kSidrReqSent:
        id->waiting = false;
        break;
      default:
        break;
    }
    // An id in kDreqSent keeps retransmitting its DREQ; it is freed when that ends.
  }

  // As librdmacm: a connect response for an id with a QP brings the QP up and sends the RTU
  // (then ESTABLISHED); a rejection moves the id's QP to the error state.
  void take_event(Event* e) const override {
    CmId* id = e->owner;
    if (e->establish && id->state == State::kRepRcvd) {
      e->establish = false;
      if (!id->id.qp) return;  // CONNECT_RESPONSE: the application calls rdma_establish
      const int rc = qp_to_rtr_rts(id);
      if (rc) {
        send_rej(id, wire::rej_reason::kConsumerDefined, nullptr, 0);
        id->state = State::kClosed;
        qp_to_err(id);
        e->ev.event = RDMA_CM_EVENT_CONNECT_ERROR;
        e->ev.status = -rc;
        return;
      }
      send_rtu(id);
      id->state = State::kEstablished;
      e->ev.event = RDMA_CM_EVENT_ESTABLISHED;
      return;
    }
    if (e->ev.event == RDMA_CM_EVENT_REJECTED) qp_to_err(id);
  }

  int init_qp_attr(CmId* id, ibv_qp_attr* attr, int* mask) const override {
    return cm::init_qp_attr(id, attr, mask);
  }
};

}  // namespace

const Transport& ib_cm_transport() {
  // Never destroyed: the agent thread still handles fds while the process exits, after
  // function-local statics are gone (UBSan saw the call through a destroyed object).
  static const IbCm* const ops = new IbCm;
  return *ops;
}

}  // namespace softrdma::cm
