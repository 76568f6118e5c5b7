// The rdma_cm multicast calls: joining (attaching the id's UD QP to the group's GID) and
// leaving. RoCE groups need no SA: a join completes at once.
#include <algorithm>
#include <cstring>
#include <mutex>

#include "cm/agent.h"
#include "cm/api_common.h"
#include "cm/sockaddr.h"

using namespace softrdma;
using namespace softrdma::cm;

extern "C" {

int rdma_join_multicast_ex(rdma_cm_id* id, rdma_cm_join_mc_attr_ex* attr, void* context) {
  if (!id || !attr || !(attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_ADDRESS) || !attr->addr) {
    return fail(EINVAL);
  }
  if (attr->comp_mask & ~(RDMA_CM_JOIN_MC_ATTR_ADDRESS | RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS)) {
    return fail(EINVAL);
  }
  const std::uint32_t flags = (attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS)
                                  ? attr->join_flags
                                  : std::uint32_t{RDMA_MC_JOIN_FLAG_FULLMEMBER};
  if (flags >= RDMA_MC_JOIN_FLAG_RESERVED) return fail(EINVAL);
  if (!is_multicast(attr->addr) || id->qp_type != IBV_QPT_UD) return fail(EINVAL);
  CmId* c = cm_id(id);
  std::lock_guard lock(mutex());
  if (!id->verbs) {  // not bound: the device's own address
    sockaddr_storage src{};
    sockaddr_of(agent_gid(), 0, src);
    int rc = bind_locked(c, reinterpret_cast<sockaddr*>(&src));
    if (rc) return fail(rc);
  }
  Multicast m;
  std::memcpy(&m.addr, attr->addr, addr_len(attr->addr));
  m.mgid = gid_of(attr->addr);
  m.context = context;
  int status = 0;
  if (id->qp && flags != RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER) {
    ibv_gid g;
    std::memcpy(g.raw, m.mgid.data(), 16);
    status = ibv_attach_mcast(id->qp, &g, 0);
    m.attached = status == 0;
  }
  c->mcast.push_back(m);
  Event* ev = make_event(c, status ? RDMA_CM_EVENT_MULTICAST_ERROR : RDMA_CM_EVENT_MULTICAST_JOIN,
                         status ? -status : 0);
  auto& ud = ev->ev.param.ud;
  ud.private_data = context;
  ud.ah_attr.is_global = 1;
  std::memcpy(ud.ah_attr.grh.dgid.raw, m.mgid.data(), 16);
  ud.ah_attr.grh.sgid_index = agent_sgid_index();
  ud.ah_attr.grh.hop_limit = 1;
  ud.ah_attr.grh.traffic_class = c->tos;
  ud.ah_attr.port_num = 1;
  ud.qp_num = 0xFFFFFF;
  ud.qkey = RDMA_UDP_QKEY;
  deliver(ev);
  return 0;
}

int rdma_join_multicast(rdma_cm_id* id, sockaddr* addr, void* context) {
  rdma_cm_join_mc_attr_ex attr{};
  attr.comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS;
  attr.addr = addr;
  return rdma_join_multicast_ex(id, &attr, context);
}

int rdma_leave_multicast(rdma_cm_id* id, sockaddr* addr) {
  if (!id || !addr_len(addr)) return fail(EINVAL);
  CmId* c = cm_id(id);
  std::lock_guard lock(mutex());
  const wire::Gid16 g16 = gid_of(addr);
  auto it = std::find_if(c->mcast.begin(), c->mcast.end(),
                         [&](const Multicast& m) { return m.mgid == g16; });
  if (it == c->mcast.end()) return fail(EADDRNOTAVAIL);
  if (it->attached && id->qp) {
    ibv_gid g;
    std::memcpy(g.raw, g16.data(), 16);
    ibv_detach_mcast(id->qp, &g, 0);
  }
  c->mcast.erase(it);
  return 0;
}

}  // extern "C"
