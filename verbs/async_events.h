// The async fd's events as rdma-core's kernel delivers them. An event names its QP, CQ or SRQ
// by a number the object took when it was made (0: the port or device); ibv_get_async_event
// hands out only events of objects still alive and counts them per object; destroying an
// object drops its events not yet read and waits until the application has acked every one it
// read (rdma-core's destroy verbs wait the same way), so no event names a freed object.
#pragma once

#include <infiniband/verbs.h>
#include <pthread.h>

#include <cstdint>
#include <mutex>
#include <unordered_map>

namespace softrdma::verbs {

class AsyncEvents {
 public:
  // A number for a new QP, CQ or SRQ, whose events count from now on.
  std::uint64_t add();
  // The object is being destroyed: its events still to be read are dropped. Returns how many
  // of its events the application has read (and must ack).
  unsigned remove(std::uint64_t id);
  // Writes `ev` (of object `id`, 0 for none) to the context's async fd `write_fd`.
  static void post(int write_fd, const ibv_async_event& ev, std::uint64_t id);
  // Reads the next event of a live object from `read_fd`: false (errno set) as read() fails.
  bool take(int read_fd, ibv_async_event& ev);

 private:
  std::mutex mu_;
  std::uint64_t next_ = 1;
  std::unordered_map<std::uint64_t, unsigned> reported_;  // live objects: events read
};

// Waits, on an object's own mutex and condition, until `completed` (its events acked, which
// ibv_ack_async_event raises) reaches `reported`.
void wait_acked(pthread_mutex_t& mu, pthread_cond_t& cond, const unsigned& completed,
                unsigned reported);

}  // namespace softrdma::verbs
