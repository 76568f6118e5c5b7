// Host-local registry of bound rdma_cm ports. Each bound id holds an abstract unix
// socket named "softrdma-cm/<port space>/<address or *>/<port>" (per network namespace,
// released by the kernel when the process ends); a process that wants to reach
// ADDRESS:PORT on this host connects to it and its owner's CM agent answers with the
// GID of its device. See docs/rdma-cm.md.
#pragma once

#include <sys/socket.h>

#include <cstdint>

#include "wire/ib_cm.h"

namespace softrdma::cm::registry {

// Claims (ps, addr, port) for a bound id: returns a listening socket, or -EADDRINUSE
// when another id (of any process) has the same address and port, or a wildcard bind
// and a specific one overlap. `port` 0 picks a free ephemeral port and stores it.
int claim(std::uint16_t ps, const sockaddr* addr, std::uint16_t& port);

struct Answer {
  bool found = false;
  bool listening = false;
  wire::Gid16 gid{};
};
// Who holds ADDRESS:PORT on this host (the specific address first, then the wildcard).
Answer lookup(std::uint16_t ps, const sockaddr* addr, std::uint16_t port);

// Accepts and answers one query on a claimed socket (never blocks for long).
void answer(int listen_fd, const wire::Gid16& gid, bool listening);

// True when `addr` is an address of this host (binding a UDP socket to it works).
bool is_local(const sockaddr* addr);
bool is_wildcard(const sockaddr* addr);

}  // namespace softrdma::cm::registry
