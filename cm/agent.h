// The process's CM agent: one thread that owns the GSI QP, answers registry queries,
// runs the IB CM protocol (REQ/REP/RTU/REJ/MRA/DREQ/DREP, SIDR) for every rdma_cm_id,
// retransmits and times out, and queues rdma_cm events on the ids' channels (its files share
// cm/agent_internal.h).
// Functions here expect cm::mutex() held unless they say otherwise.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "cm/state.h"

namespace softrdma::verbs {
class IwarpCm;
}

namespace softrdma::cm {

// Starts the agent on first use (takes the lock itself). nullptr context and errno set
// when the device cannot start.
ibv_context* agent_context();
// The partition rdma_cm uses (partition.cpp): the P_Key at index 0 of the port's table (0xFFFF
// on iWARP), host order; and the index of the table entry of `ctx` that matches `pkey` (IBTA
// 10.9.3: low 15 bits equal, one side a full member), or -1.
std::uint16_t cm_partition();
int pkey_index_for(ibv_context* ctx, std::uint16_t pkey);
ibv_pd* agent_pd();
const wire::Gid16& agent_gid();
// agent_gid()'s index in the port's GID table: the sgid_index of rdma_cm's address vectors.
std::uint8_t agent_sgid_index();

// The device's CM transport (cm/transport.h), chosen as the agent starts: only once
// agent_context() has succeeded.
const Transport& agent_transport();
// iWARP mode: the device's CM interface (nullptr on RoCE).
verbs::IwarpCm* agent_iwarp();
int agent_epoll();
// Runs `fn` on the agent thread under the CM lock (any thread; wakes the agent).
void post_task(std::function<void()> fn);
bool is_tracked(const CmId* id);
const std::vector<CmId*>& agent_ids();

// Events.
Event* make_event(CmId* id, rdma_cm_event_type type, int status);
void deliver(Event* ev);  // queues on the id's channel and makes its fd readable

// A new passive id for a request that came to `listener`: its events go to the listener's
// channel, or to a channel of its own for a sync listener. nullptr if that cannot be made.
// The caller tracks it and offers the request.
CmId* new_child(CmId* listener);
// Queues `child`'s CONNECT_REQUEST `ev` on its listener's channel.
void offer_request(CmId* child, CmId* listener, Event* ev);

// Ids known to the agent (every live CmId).
void track(CmId* id);
void untrack(CmId* id);
// A bound id's registry socket starts (or stops) being answered.
void watch_registry(CmId* id);
void unwatch_registry(CmId* id);

// Protocol actions on an id.
int send_req(CmId* id, const std::uint8_t* pdata, std::size_t len);
int send_rep(CmId* id, const std::uint8_t* pdata, std::size_t len);
int send_rtu(CmId* id);
int send_rej(CmId* id, std::uint16_t reason, const std::uint8_t* pdata, std::size_t len);
int send_dreq(CmId* id);
int send_sidr_req(CmId* id, const std::uint8_t* pdata, std::size_t len);
int send_sidr_rep(CmId* id, std::uint8_t status, const std::uint8_t* pdata, std::size_t len);
// Waits (briefly) until every MAD sent so far has left the device: before a program
// exits, its last DREQ or REJ must be on the wire.
void flush_sends();
// Ends a connection locally: timewait, then TIMEWAIT_EXIT if the id still exists.
void enter_timewait(CmId* id);
// A peer's disconnect that the agent holds back until its QP's completions are polled
// (cm/agent_internal.h, peer_disconnected) is delivered now: the application disconnects itself.
void release_disconnect(CmId* id);

// QP transitions the way librdmacm makes them over the IB CM (rdma_init_qp_attr's values;
// iWARP's are its Transport's, cm/transport.h). In cm/qp_driving.cpp.
int init_qp_attr(CmId* id, ibv_qp_attr* attr, int* mask);
int qp_to_rtr_rts(CmId* id);  // INIT (again, with the final access flags), RTR, RTS
int qp_to_err(CmId* id);

// Closes a channel, dropping the events still queued on it.
void destroy_channel(Channel* c);
// Drops the events of `id` not yet handed to the application (rdma_destroy_id).
void discard_queued(CmId* id);
// Frees the id if it is destroyed and no event refers to it.
void maybe_free(CmId* id);

// An address as a GID (IPv4-mapped for IPv4) and back.
wire::Gid16 gid_of(const sockaddr* addr);
void sockaddr_of(const wire::Gid16& gid, std::uint16_t port, sockaddr_storage& out);

}  // namespace softrdma::cm
