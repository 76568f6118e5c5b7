// One rdma_cm transport's connection manager, as an ops table (rdma-core's providers are the
// model): the IB CM (MADs on the GSI QP, for RoCE) or the iWARP CM (TCP + MPA, softiwarp0).
// The CM agent chooses its device's as it starts (agent_transport()), and runs its own part
// through it; an id takes it at rdma_create_id. cm/api.cpp and the agent know neither.
// cm::mutex() held.
#pragma once

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "cm/state.h"

namespace softrdma::cm {

struct Agent;

class Transport {
 public:
  virtual ~Transport() = default;

  // The device this is the CM of, by name (the ifname of `softrdma res cm_id`).
  virtual const char* device_name() const = 0;
  // The CM agent's transport part, as it starts on the device (a.ctx open, a.epfd made): what it
  // listens on besides its wake fd. False and `error` when the device cannot carry it.
  virtual bool open_agent(Agent& a, std::string& error) const = 0;
  // An fd the agent's loop found ready that is none of its own: true if it was this
  // transport's (its sockets), handled.
  virtual bool handle_fd(int, std::uint32_t) const { return false; }
  // Whether the CM's partition is the port's P_Key table (IBTA 10.9; cm/partition.cpp), else
  // the default partition.
  virtual bool partitions() const { return false; }

  // Whether `addr` is this host's, so that an id may bind it.
  virtual bool local_address(const sockaddr* addr) const = 0;
  // The address ids connect from whatever the destination (a userspace TCP's own), in
  // `source` (port 0); false where the kernel's routing picks one per destination.
  virtual bool own_source(sockaddr_storage&) const { return false; }
  // Whether the id holds a port (rdma_bind_addr done, explicitly or by another call).
  virtual bool bound(const CmId* id) const = 0;

  // rdma_bind_addr's transport part: claims `addr` (port 0: an ephemeral one) and fills the
  // id's source address and SGID. 0 or an errno value.
  virtual int bind(CmId* id, const sockaddr* addr) const = 0;
  // Where the CM that answers for `dst` is. Called WITHOUT the lock (the holder of a port
  // may be this process, whose agent answers under it); `patience`: how long a port nobody
  // holds on this host may take to be bound.
  virtual wire::Gid16 peer_for(CmId* id, const sockaddr* dst,
                               std::chrono::milliseconds patience) const = 0;
  virtual int listen(CmId* id, int backlog) const = 0;
  // rdma_connect once the id holds its parameters (UD ids too).
  virtual int connect(CmId* id, const rdma_conn_param* param, const std::uint8_t* pdata,
                      std::size_t len) const = 0;
  // rdma_accept of a request (kReqRcvd, or kSidrReqRcvd) once the id holds its parameters.
  virtual int accept(CmId* id, const rdma_conn_param* param, const std::uint8_t* pdata,
                     std::size_t len) const = 0;
  // rdma_reject of a request (kReqRcvd or kSidrReqRcvd).
  virtual int reject(CmId* id, const void* pdata, std::uint8_t len) const = 0;
  // rdma_establish of a connect response taken without a QP (kRepRcvd).
  virtual int establish(CmId* id) const = 0;
  // rdma_disconnect. `wait`: the call then waits for the id's event (sync ids).
  virtual int disconnect(CmId* id, bool& wait) const = 0;
  // rdma_destroy_id: ends whatever the id has under way (its QP may be gone: not touched).
  virtual void destroy(CmId* id) const = 0;
  // What happens on the application's thread as rdma_get_cm_event hands `ev` out.
  virtual void take_event(Event* ev) const = 0;
  // rdma_init_qp_attr's values for attr->qp_state.
  virtual int init_qp_attr(CmId* id, ibv_qp_attr* attr, int* mask) const = 0;
};

const Transport& ib_cm_transport();     // cm/transport_ib.cpp
const Transport& iwarp_cm_transport();  // cm/transport_iwarp.cpp

}  // namespace softrdma::cm
