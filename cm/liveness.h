// Peer liveness on one host. Every CM agent listens on an abstract unix socket named
// after its device GID; for each peer process on this host that it has a connection
// with, it holds one connection to the peer's socket. When the peer process ends (even
// killed), the kernel closes that socket: the agent then ends its connections with the
// peer as a DREQ would, so the survivor is never left waiting. Peers on other hosts
// are not watched (as with real RoCE, their loss shows as transport errors).
#pragma once

#include <map>
#include <optional>
#include <set>

#include "wire/ib_cm.h"

namespace softrdma::cm {

class Liveness {
 public:
  // Binds this agent's socket and registers it with `epfd`. False if it cannot.
  bool open(const wire::Gid16& self, int epfd);
  // Starts watching `peer` (once per peer; a peer that is not on this host is ignored).
  void watch(const wire::Gid16& peer);
  // Handles a readable fd: true if it was one of ours; `gone` is set when a peer ended.
  bool handle(int fd, std::optional<wire::Gid16>& gone);

 private:
  int epfd_ = -1;
  int listen_fd_ = -1;
  wire::Gid16 self_{};
  std::map<int, wire::Gid16> links_;  // outbound: fd -> peer
  std::set<int> inbound_;
};

}  // namespace softrdma::cm
