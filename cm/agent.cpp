// The CM agent: its singleton, its thread (the event loop over the GSI QP, the registry
// sockets, its transport's sockets (iWARP's TCP), peer liveness and posted tasks) and its
// accessors. See docs/rdma-cm.md.
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <string>
#include <thread>

#include "cm/agent_internal.h"
#include "cm/monitor_section.h"
#include "cm/registry.h"
#include "cm/transport.h"
#include "verbs/iwarp_cm.h"

namespace softrdma::cm {

// Both are never destroyed: a program may exit (a signal handler calling exit(), as
// libinfinipath's does) while one of its threads waits on them, and glibc's
// pthread_cond_destroy would then wait for that thread forever.
std::mutex& mutex() {
  static auto* m = new std::mutex;
  return *m;
}

std::condition_variable& acked() {
  static auto* cv = new std::condition_variable;
  return *cv;
}

namespace {

// The process's agent, which lives as long as the process (its thread never stops). A forked
// child starts with a fresh one: the parent's thread did not come along, and its ids and their
// connections stay the parent's (the child's verbs device is its own too, verbs/engine.h).
Agent* g_agent = nullptr;

void before_fork() {
  mutex().lock();
}
void after_fork_parent() {
  mutex().unlock();
}
void after_fork_child() {
  // The child's copies of the parent's bound ports would keep them claimed while it lives.
  for (CmId* id : g_agent->ids) {
    if (id->registry_fd >= 0) close(id->registry_fd);
    id->registry_fd = -1;
  }
  g_agent = new Agent;  // the parent's is left as it is
  mutex().unlock();
}

}  // namespace

Agent& agent() {
  static std::once_flag once;
  std::call_once(once, [] {
    g_agent = new Agent;
    pthread_atfork(before_fork, after_fork_parent, after_fork_child);
  });
  return *g_agent;
}

void drop(const char* why) {
  auto& a = agent();
  if (++a.drops <= 20) std::fprintf(stderr, "softrdma cm: dropped a MAD: %s\n", why);
}

std::uint32_t random_u32() {
  return static_cast<std::uint32_t>(agent().rng());
}

void wake() {
  std::uint64_t one = 1;
  (void)!write(agent().wake_fd, &one, sizeof one);
}

namespace {

void agent_loop() {
  auto& a = agent();
  int timeout = 0;
  for (;;) {
    epoll_event evs[16];
    int n = epoll_wait(a.epfd, evs, 16, timeout);
    std::lock_guard lock(mutex());
    for (int i = 0; i < n; ++i) {
      const int fd = evs[i].data.fd;
      if (fd == a.gsi.fd()) {
        a.gsi.poll(on_mad);
      } else if (fd == a.wake_fd) {
        std::uint64_t v;
        (void)!read(a.wake_fd, &v, sizeof v);
        std::vector<std::function<void()>> tasks;
        {
          std::lock_guard tl(a.tasks_mu);
          tasks.swap(a.tasks);
        }
        for (auto& t : tasks) t();
      } else if (a.transport->handle_fd(fd, evs[i].events)) {
      } else if (std::optional<wire::Gid16> gone; a.liveness.handle(fd, gone)) {
        // A DREQ the peer sent just before it ended may still be on its way: honour it
        // first, and end what is left a moment later.
        if (gone) a.gone.emplace_back(*gone, Clock::now() + std::chrono::milliseconds(50));
      } else {
        for (CmId* id : a.ids) {
          if (id->registry_fd == fd) {
            registry::answer(fd, a.gsi.gid(), id->state == State::kListen && !id->destroyed);
          }
        }
      }
    }
    timeout = run_timers();
  }
}

bool start(std::string& error) {
  auto& a = agent();
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (!list || n == 0) {
    error = "no softrdma device";
    if (list) ibv_free_device_list(list);
    return false;
  }
  a.ctx = ibv_open_device(list[0]);
  ibv_free_device_list(list);
  if (!a.ctx) {
    error = "cannot open the device";
    return false;
  }
  ibv_query_device(a.ctx, &a.dattr);
  ibv_query_port(a.ctx, 1, &a.pattr);
  a.node_guid = a.dattr.node_guid;
  a.pd = ibv_alloc_pd(a.ctx);
  if (!a.pd) {
    error = "cannot allocate a PD";
    return false;
  }
  a.epfd = epoll_create1(EPOLL_CLOEXEC);
  a.wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  // The one choice between the transports: softiwarp0's CM interface, else the IB CM on QP1.
  verbs::IwarpCm* iw = softrdma_iwarp_cm();
  a.transport = iw && iw->is_iwarp(a.ctx) ? &iwarp_cm_transport() : &ib_cm_transport();
  if (!a.transport->open_agent(a, error)) return false;
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = a.wake_fd;
  epoll_ctl(a.epfd, EPOLL_CTL_ADD, a.wake_fd, &ev);
  std::thread(agent_loop).detach();
  return true;
}

}  // namespace

ibv_context* agent_context() {
  auto& a = agent();
  if (!a.started) {
    a.started = true;
    std::string error;
    if (!start(error)) {
      std::fprintf(stderr, "softrdma cm: %s\n", error.c_str());
      a.start_errno = ENODEV;
      a.ctx = nullptr;
    } else {
      register_monitor_section();  // the ids in `softrdma res cm_id`
    }
  }
  if (!a.ctx || a.start_errno) {
    errno = a.start_errno ? a.start_errno : ENODEV;
    return nullptr;
  }
  return a.ctx;
}

const Transport& agent_transport() {
  return *agent().transport;
}
verbs::IwarpCm* agent_iwarp() {
  return agent().iw;
}
int agent_epoll() {
  return agent().epfd;
}

void post_task(std::function<void()> fn) {
  {
    std::lock_guard tl(agent().tasks_mu);
    agent().tasks.push_back(std::move(fn));
  }
  wake();
}

const std::vector<CmId*>& agent_ids() {
  return agent().ids;
}

ibv_pd* agent_pd() {
  return agent().pd;
}
const wire::Gid16& agent_gid() {
  return agent().gsi.gid();
}

std::uint8_t agent_sgid_index() {
  return agent().gsi.sgid_index();
}

}  // namespace softrdma::cm
