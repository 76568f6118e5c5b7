// The iWARP CM transport (softiwarp0): real TCP sockets for ports, connections set up by the
// MPA negotiation of the device (cm/iwarp_conn.h), QPs moved as the kernel's iw_cm does.
#include "cm/agent_internal.h"
#include "cm/iwarp_conn.h"
#include "cm/registry.h"
#include "cm/transport.h"
#include "verbs/iwarp_cm.h"

namespace softrdma::cm {
namespace {

class IwarpCm final : public Transport {
 public:
  const char* device_name() const override { return "softiwarp0"; }

  // TCP does what QP1 does on RoCE: the agent watches the ids' sockets (handle_fd).
  bool open_agent(Agent& a, std::string&) const override {
    a.iw = softrdma_iwarp_cm();
    return true;
  }
  bool handle_fd(int fd, std::uint32_t events) const override { return iw_handle_fd(fd, events); }

  // A userspace TCP's address is this host's too, and the one every connection comes from.
  bool local_address(const sockaddr* addr) const override {
    return registry::is_local(addr) || iw_user_tcp_source(addr, nullptr);
  }
  bool own_source(sockaddr_storage& source) const override {
    return iw_user_tcp_source(nullptr, &source);
  }
  bool bound(const CmId* id) const override { return id->tcp_fd >= 0; }

  int bind(CmId* id, const sockaddr* addr) const override {  // the kernel owns iWARP ports
    int rc = iw_bind(id, addr);
    if (rc) return rc;
    ibv_gid g{};
    ibv_query_gid(agent_context(), 1, 0, &g);
    id->id.route.addr.addr.ibaddr.sgid = g;
    return 0;
  }

  // TCP finds the peer: its address is all there is to know.
  wire::Gid16 peer_for(CmId*, const sockaddr* dst, std::chrono::milliseconds) const override {
    return gid_of(dst);
  }

  int listen(CmId* id, int backlog) const override { return iw_listen(id, backlog); }

  int connect(CmId* id, const rdma_conn_param* param, const std::uint8_t* pdata,
              std::size_t len) const override {
    // iWARP has no datagram service: a UD id goes the IB CM's SIDR way (which this device,
    // without a GSI QP, cannot carry), as it always did.
    if (id->id.qp_type == IBV_QPT_UD) return ib_cm_transport().connect(id, param, pdata, len);
    return iw_connect(id, param);
  }

  int accept(CmId* id, const rdma_conn_param* param, const std::uint8_t*,
             std::size_t) const override {
    return iw_accept(id, param);
  }

  int reject(CmId* id, const void* pdata, std::uint8_t len) const override {
    return iw_reject(id, pdata, len);
  }

  // Never asked: an iWARP connect needs a QP, and MPA brings it up (no kRepRcvd).
  int establish(CmId*) const override { return EINVAL; }

  int disconnect(CmId* id, bool& wait) const override {
    const bool first = id->state == State::kEstablished;
    int rc = iw_disconnect(id);
    if (rc) return rc;
    wait = first || (id->sync && !id->channel->queue.empty());
    return 0;
  }

  void destroy(CmId* id) const override {
    iw_destroy(id);
    id->state = State::kClosed;
  }

  // The device moves its QPs itself (a rejection or an error ends them there).
  void take_event(Event*) const override {}

  // As the kernel's iw_cm: the MPA negotiation does the rest.
  int init_qp_attr(CmId*, ibv_qp_attr* attr, int* mask) const override {
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
};

}  // namespace

const Transport& iwarp_cm_transport() {
  // Never destroyed: the agent thread still handles fds while the process exits, after
  // function-local statics are gone (UBSan saw the call through a destroyed object).
  static const IwarpCm* const ops = new IwarpCm;
  return *ops;
}

}  // namespace softrdma::cm
