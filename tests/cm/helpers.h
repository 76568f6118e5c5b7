// Test helpers for the rdma_cm API: waiting for events, loopback addresses.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <rdma/rdma_cma.h>

#include <cstdint>

namespace softrdma::cm_test {

// Waits up to `ms` for the next event on `ch`; nullptr on timeout.
inline rdma_cm_event* next_event(rdma_event_channel* ch, int ms = 5000) {
  pollfd p{ch->fd, POLLIN, 0};
  if (poll(&p, 1, ms) <= 0) return nullptr;
  rdma_cm_event* ev = nullptr;
  if (rdma_get_cm_event(ch, &ev) != 0) return nullptr;
  return ev;
}

// The next event within `ms`, which must be `type` (status 0); acked (and nullptr returned)
// unless `keep`.
inline rdma_cm_event* expect_event(rdma_event_channel* ch, rdma_cm_event_type type,
                                   bool keep = false, int ms = 5000) {
  rdma_cm_event* ev = next_event(ch, ms);
  EXPECT_NE(ev, nullptr) << "no event, wanted " << rdma_event_str(type);
  if (!ev) return nullptr;
  EXPECT_EQ(ev->event, type) << rdma_event_str(ev->event) << " status " << ev->status;
  if (!keep) {
    rdma_ack_cm_event(ev);
    return nullptr;
  }
  return ev;
}

inline sockaddr_in loopback(std::uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

}  // namespace softrdma::cm_test
