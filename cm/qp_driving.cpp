// Driving an id's QP through its states the way librdmacm does over the IB CM
// (rdma_init_qp_attr's values), and the address <-> GID conversions rdma_cm uses.
#include <arpa/inet.h>

#include <algorithm>
#include <cstring>

#include "cm/agent_internal.h"

namespace softrdma::cm {

int init_qp_attr(CmId* id, ibv_qp_attr* attr, int* mask) {
  const ibv_qp_type type = id->id.qp_type;
  const bool ud = type == IBV_QPT_UD;
  // Which sides of RC the QP has: an XRC initiator only the requester's, an XRC target only
  // the responder's (as the kernel's IB CM drives them).
  const bool requester = type == IBV_QPT_RC || type == IBV_QPT_XRC_SEND;
  const bool responder = type == IBV_QPT_RC || type == IBV_QPT_XRC_RECV;
  switch (attr->qp_state) {
    case IBV_QPS_INIT: {
      // The id's partition (a REQ's, or ours): its entry in the table, or none (EINVAL).
      const std::uint16_t pkey = ntohs(id->id.route.addr.addr.ibaddr.pkey);
      const int index =
          pkey == 0 ? 0 : pkey_index_for(id->id.verbs ? id->id.verbs : agent().ctx, pkey);
      if (index < 0) return EINVAL;
      attr->pkey_index = static_cast<std::uint16_t>(index);
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
    }
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
      if (responder) {
        attr->max_dest_rd_atomic = id->responder_resources;
        attr->min_rnr_timer = 0;
        *mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
      }
      return 0;
    case IBV_QPS_RTS:
      *mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
      attr->sq_psn = ud ? 0 : id->local_psn;
      if (requester || responder) {
        attr->timeout = id->ack_timeout;
        *mask |= IBV_QP_TIMEOUT;
      }
      if (requester) {
        attr->retry_cnt = id->retry_count & 7;
        attr->rnr_retry = id->rnr_retry_count & 7;
        attr->max_rd_atomic = id->initiator_depth;
        *mask |= IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
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
