// rdma_cm over iWARP (softiwarp0, SOFTRDMA_TRANSPORT=iwarp): ids bind and listen on real
// TCP sockets (the kernel demultiplexes ports), connect opens a TCP connection and hands it to
// the device for the MPA negotiation, accept/reject answer the MPA request. The device's
// callbacks come back to the CM agent as tasks. Functions expect cm::mutex() held.
#pragma once

#include <rdma/rdma_cma.h>

#include "cm/state.h"

namespace softrdma::cm {

bool iwarp_mode();  // the agent runs on softiwarp0
// With a userspace TCP under softiwarp0 (it owns an address the kernel does not): true when
// `addr` is its address or the wildcard (null: whether there is one), and the address it
// connects from in `source` (when given). False without one: the kernel's rules apply.
bool iw_user_tcp_source(const sockaddr* addr, sockaddr_storage* source);
int iw_bind(CmId* id, const sockaddr* addr);
int iw_listen(CmId* id, int backlog);
int iw_connect(CmId* id, const rdma_conn_param* param);
int iw_accept(CmId* id, const rdma_conn_param* param);
int iw_reject(CmId* id, const void* private_data, std::uint8_t len);
int iw_disconnect(CmId* id);
void iw_destroy(CmId* id);
// The agent's loop hands over readable/writable fds; true if `fd` was an iWARP socket.
bool iw_handle_fd(int fd, std::uint32_t events);

}  // namespace softrdma::cm
