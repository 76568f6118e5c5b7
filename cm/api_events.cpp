// The rdma_cm calls on event channels and events: creating and destroying channels,
// rdma_get_cm_event (with what librdmacm does as it hands an event out), acking, migrating.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <deque>
#include <mutex>

#include "cm/agent.h"
#include "cm/api_common.h"
#include "cm/transport.h"

using namespace softrdma;
using namespace softrdma::cm;

extern "C" {

rdma_event_channel* rdma_create_event_channel(void) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return nullptr;
  auto* c = new Channel;
  c->ch.fd = fds[0];
  c->write_fd = fds[1];
  return &c->ch;
}

void rdma_destroy_event_channel(rdma_event_channel* channel) {
  if (!channel) return;
  std::lock_guard lock(mutex());
  destroy_channel(cm::channel(channel));
}
int rdma_get_cm_event(rdma_event_channel* channel, rdma_cm_event** event) {
  if (!channel || !event) return fail(EINVAL);
  Channel* ch = cm::channel(channel);
  {
    std::unique_lock lock(mutex());
    if (ch->closed) {
      // Called on a channel already destroyed (an event thread racing the program's exit):
      // as with a reader that was already waiting, the call stays blocked.
      lock.unlock();
      for (;;) pause();
    }
  }
  for (;;) {
    std::uint8_t b;
    ssize_t n = read(ch->ch.fd, &b, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) {
      // The channel was destroyed under this call. With the kernel's rdma_cm the call
      // would stay blocked (programs destroy the channel while their event thread
      // waits, then exit): so does this one.
      for (;;) pause();
    }
    if (n < 0) {
      if (errno == EBADF) {  // destroyed while this call began: stay blocked, as above
        std::unique_lock lock(mutex());
        if (ch->closed) {
          lock.unlock();
          for (;;) pause();
        }
        errno = EBADF;
      }
      return -1;  // EAGAIN on a non-blocking channel
    }
    std::unique_lock lock(mutex());
    if (ch->closed) {  // destroyed after the byte was read: stay blocked, as above
      lock.unlock();
      for (;;) pause();
    }
    if (ch->queue.empty()) {  // the byte of an event dropped by rdma_destroy_id
      if (fcntl(ch->ch.fd, F_GETFL) & O_NONBLOCK) return fail(EAGAIN);
      continue;
    }
    Event* e = ch->queue.front();
    ch->queue.pop_front();
    e->queued_on = nullptr;
    e->owner->transport->take_event(e);
    *event = &e->ev;
    return 0;
  }
}

int rdma_ack_cm_event(rdma_cm_event* event) {
  if (!event) return fail(EINVAL);
  auto* e = reinterpret_cast<Event*>(event);
  std::lock_guard lock(mutex());
  e->owner->events_out--;
  maybe_free(e->owner);
  delete e;
  acked().notify_all();
  return 0;
}

int rdma_migrate_id(rdma_cm_id* id, rdma_event_channel* channel) {
  if (!id) return fail(EINVAL);
  CmId* c = cm_id(id);
  // As librdmacm: a synchronous id stays one only by moving to a channel of the caller's.
  if (c->sync && !channel) return fail(EINVAL);
  bool sync = false;
  if (!channel) {
    channel = rdma_create_event_channel();
    if (!channel) return -1;
    sync = true;
  }
  // A synchronous id's last event (the one its call waited for) is acked first, as
  // librdmacm does: nobody else will, and rdma_destroy_id would wait for it.
  if (c->sync && id->event) {
    rdma_ack_cm_event(id->event);
    id->event = nullptr;
  }
  std::unique_lock lock(mutex());
  Channel* old = c->channel;
  const bool old_private = c->sync;
  // Events of this id still queued move along with it.
  std::deque<Event*> keep, moved;
  for (Event* e : old->queue) (e->owner == c ? moved : keep).push_back(e);
  std::uint8_t b;
  if (!old->closed) {
    for (std::size_t i = 0; i < moved.size(); ++i) (void)!read(old->ch.fd, &b, 1);
  }
  old->queue = std::move(keep);
  c->channel = cm::channel(channel);
  c->sync = sync;
  id->channel = channel;
  for (Event* e : moved) {
    e->queued_on = c->channel;
    c->channel->queue.push_back(e);
    b = 1;
    (void)!write(c->channel->write_fd, &b, 1);
  }
  if (old_private) destroy_channel(old);
  // As the kernel's rdma_cm: the call returns once the events of this id handed out on
  // the old channel have been acked, so none is processed there afterwards.
  acked().wait(lock, [&] {
    int queued = 0;
    for (const Event* e : c->channel->queue) queued += e->owner == c;
    if (c->request_channel && c->request_channel != c->channel && !c->request_channel->closed) {
      for (const Event* e : c->request_channel->queue) queued += e->owner == c;
    }
    return c->events_out <= queued;
  });
  return 0;
}
const char* rdma_event_str(rdma_cm_event_type event) {
  static const char* const names[] = {
      "RDMA_CM_EVENT_ADDR_RESOLVED",   "RDMA_CM_EVENT_ADDR_ERROR",
      "RDMA_CM_EVENT_ROUTE_RESOLVED",  "RDMA_CM_EVENT_ROUTE_ERROR",
      "RDMA_CM_EVENT_CONNECT_REQUEST", "RDMA_CM_EVENT_CONNECT_RESPONSE",
      "RDMA_CM_EVENT_CONNECT_ERROR",   "RDMA_CM_EVENT_UNREACHABLE",
      "RDMA_CM_EVENT_REJECTED",        "RDMA_CM_EVENT_ESTABLISHED",
      "RDMA_CM_EVENT_DISCONNECTED",    "RDMA_CM_EVENT_DEVICE_REMOVAL",
      "RDMA_CM_EVENT_MULTICAST_JOIN",  "RDMA_CM_EVENT_MULTICAST_ERROR",
      "RDMA_CM_EVENT_ADDR_CHANGE",     "RDMA_CM_EVENT_TIMEWAIT_EXIT"};
  const auto i = static_cast<unsigned>(event);
  return i < sizeof names / sizeof names[0] ? names[i] : "UNKNOWN EVENT";
}

}  // extern "C"
