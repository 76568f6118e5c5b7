// The lifetime of rdma_cm ids, their events and channels: tracking, new passive ids,
// event delivery, the registry watch, and freeing once nothing refers to them.
#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "cm/agent_internal.h"

namespace softrdma::cm {

bool is_tracked(const CmId* id) {
  const auto& ids = agent().ids;
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

Event* make_event(CmId* id, rdma_cm_event_type type, int status) {
  auto* ev = new Event;
  std::memset(&ev->ev, 0, sizeof ev->ev);
  ev->ev.id = &id->id;
  ev->ev.event = type;
  ev->ev.status = status;
  ev->owner = id;
  return ev;
}

void deliver(Event* ev) {
  CmId* id = ev->owner;
  if (id->destroyed || id->destroying) {  // rdma_destroy_id has begun: nobody will read it
    delete ev;
    return;
  }
  id->events_out++;
  ev->queued_on = id->channel;
  id->channel->queue.push_back(ev);
  std::uint8_t one = 1;
  (void)!write(id->channel->write_fd, &one, 1);
}

void track(CmId* id) {
  agent().ids.push_back(id);
}

CmId* new_child(CmId* listener) {
  auto* c = new CmId;
  c->id.verbs = agent().ctx;
  c->id.context = listener->id.context;
  c->id.ps = listener->id.ps;
  c->id.qp_type = listener->id.qp_type;
  c->id.port_num = 1;
  c->id.pd = agent().pd;
  c->transport = listener->transport;
  c->listener = listener;
  c->ep_qp_attr = listener->ep_qp_attr;
  c->channel = listener->channel;
  if (listener->sync) {  // librdmacm migrates a sync listener's requests to sync ids
    auto* ch = reinterpret_cast<Channel*>(rdma_create_event_channel());
    if (!ch) {
      delete c;
      return nullptr;
    }
    c->channel = ch;
    c->sync = true;
  }
  c->id.channel = &c->channel->ch;
  return c;
}

void offer_request(CmId* child, CmId* listener, Event* ev) {
  ev->ev.listen_id = &listener->id;
  Channel* ch = listener->channel;
  child->request_channel = ch;
  child->events_out++;
  ev->queued_on = ch;
  ch->queue.push_back(ev);
  std::uint8_t one = 1;
  (void)!write(ch->write_fd, &one, 1);
}

void untrack(CmId* id) {
  auto& ids = agent().ids;
  ids.erase(std::remove(ids.begin(), ids.end(), id), ids.end());
}

void watch_registry(CmId* id) {
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = id->registry_fd;
  epoll_ctl(agent().epfd, EPOLL_CTL_ADD, id->registry_fd, &ev);
}

void unwatch_registry(CmId* id) {
  if (id->registry_fd < 0) return;
  epoll_ctl(agent().epfd, EPOLL_CTL_DEL, id->registry_fd, nullptr);
  close(id->registry_fd);
  id->registry_fd = -1;
}

void destroy_channel(Channel* c) {
  if (c->closed) return;
  c->closed = true;
  static std::vector<Channel*>* graveyard = new std::vector<Channel*>;  // kept, see state.h
  graveyard->push_back(c);
  close(c->write_fd);  // a reader blocked in rdma_get_cm_event sees end-of-file
  close(c->ch.fd);
  auto queue = std::move(c->queue);
  for (Event* e : queue) {
    e->owner->events_out--;
    maybe_free(e->owner);
    delete e;
  }
  acked().notify_all();
}

void discard_queued(CmId* id) {
  auto drop_from = [&](Channel* ch) {
    if (!ch || ch->closed) return;
    auto& q = ch->queue;
    for (auto it = q.begin(); it != q.end();) {
      if ((*it)->owner == id) {
        id->events_out--;
        delete *it;
        it = q.erase(it);  // its byte stays in the pipe: readers skip it
      } else {
        ++it;
      }
    }
  };
  drop_from(id->channel);
  if (id->request_channel != id->channel) drop_from(id->request_channel);
}

void maybe_free(CmId* id) {
  if (!id->destroyed || id->events_out > 0 || id->waiting) return;
  untrack(id);
  unwatch_registry(id);
  if (id->sync && id->channel) destroy_channel(id->channel);
  delete id;
}

}  // namespace softrdma::cm
