// Device discovery, contexts, queries and the async event fd.
#include <fcntl.h>
#include <net/if.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "verbs/kernel_view.h"
#include "verbs/objects.h"

using namespace softrdma;
using namespace softrdma::verbs;

#undef ibv_query_port

namespace {

const int kSoftOps = 0;  // the address identifies our devices

// A device as ibv_get_device_list lists it: `name`, backed by /sys/class/infiniband_verbs/uverbsN.
SoftDevice* make_device(ibv_node_type node, ibv_transport_type transport, const char* name,
                        int uverbs) {
  auto* sd = new SoftDevice{};
  sd->dev.node_type = node;
  sd->dev.transport_type = transport;
  std::snprintf(sd->dev.name, sizeof sd->dev.name, "%s", name);
  std::snprintf(sd->dev.dev_name, sizeof sd->dev.dev_name, "uverbs%d", uverbs);
  std::snprintf(sd->dev.dev_path, sizeof sd->dev.dev_path, "/sys/class/infiniband_verbs/uverbs%d",
                uverbs);
  std::snprintf(sd->dev.ibdev_path, sizeof sd->dev.ibdev_path, "/sys/class/infiniband/%s",
                sd->dev.name);
  sd->ops = &kSoftOps;
  return sd;
}

SoftDevice* the_device() {
  static SoftDevice* d = [] {
    Engine* e = Engine::get();
    if (!e) return static_cast<SoftDevice*>(nullptr);
    return make_device(IBV_NODE_CA, IBV_TRANSPORT_IB, e->config().device_name.c_str(), kRoceUverbs);
  }();
  return d;
}

// softiwarp0: listed after softroce0, so programs that take the first device keep it.
SoftDevice* the_iwarp_device() {
  static SoftDevice* d = [] {
    Engine* e = Engine::get();
    if (!e) return static_cast<SoftDevice*>(nullptr);
    return make_device(IBV_NODE_RNIC, IBV_TRANSPORT_IWARP, kIwarpDeviceName, kIwarpUverbs);
  }();
  return d;
}

bool is_iwarp_device(ibv_device* device) {
  SoftDevice* d = the_iwarp_device();
  return d && device == &d->dev;
}

// The one choice of transport: a device's provider (verbs/provider.h).
const Provider& provider_for(ibv_device* device) {
  return is_iwarp_device(device) ? iwarp_provider() : roce_provider();
}

int query_port_impl(ibv_context* ctx, uint8_t port, ibv_port_attr* attr, size_t len) {
  if (port != 1) return EINVAL;
  ibv_port_attr a{};
  provider(ctx).query_port(ctx, a);
  std::memcpy(attr, &a, std::min(len, sizeof a));
  return 0;
}

int query_device_ex_impl(ibv_context* ctx, const ibv_query_device_ex_input* input,
                         ibv_device_attr_ex* attr, size_t attr_size) {
  if (input && input->comp_mask) return EINVAL;
  if (attr_size < sizeof(ibv_device_attr)) return EINVAL;
  ibv_device_attr_ex a{};
  provider(ctx).query_device(ctx, a.orig_attr);
  // The extended fields that repeat the plain ones, as rdma-core fills them.
  a.device_cap_flags_ex =
      static_cast<std::uint64_t>(a.orig_attr.device_cap_flags) | provider(ctx).cap_flags_ex_high();
  a.phys_port_cnt_ex = a.orig_attr.phys_port_cnt;
  a.max_dm_size = 0;
  a.completion_timestamp_mask = ~uint64_t{0};
  a.hca_core_clock = 1'000'000;  // kHz: timestamps are nanoseconds
  a.raw_packet_caps = 0;
  fill_odp_caps(ctx, a);
  std::memcpy(attr, &a, std::min(attr_size, sizeof a));
  return 0;
}

int query_rt_values_impl(ibv_context*, ibv_values_ex* values) {
  if (values->comp_mask & ~static_cast<uint32_t>(IBV_VALUES_MASK_RAW_CLOCK)) return EINVAL;
  if (values->comp_mask & IBV_VALUES_MASK_RAW_CLOCK) {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    values->raw_clock = ts;
  }
  return 0;
}

std::vector<core::Gid> gid_table(ibv_context* context) {
  return provider(context).gids(context);
}

const std::vector<std::uint16_t>& pkey_table(ibv_context* context) {
  return provider(context).pkeys(context);
}

}  // namespace

extern "C" {

ibv_device** ibv_get_device_list(int* num_devices) {
  auto** list = static_cast<ibv_device**>(calloc(3, sizeof(ibv_device*)));
  if (!list) {
    errno = ENOMEM;
    return nullptr;
  }
  SoftDevice* d = the_device();
  SoftDevice* i = the_iwarp_device();
  int n = 0;
  // SOFTRDMA_TRANSPORT=iwarp puts softiwarp0 first: programs that take the first device
  // (perftest, qperf, rping through librdmacm) then use iWARP.
  Engine* e = Engine::get();
  if (e && e->config().transport == "iwarp" && i) {
    list[n++] = &i->dev;
    i = nullptr;
  }
  if (d) list[n++] = &d->dev;
  if (i) list[n++] = &i->dev;
  if (num_devices) *num_devices = n;
  if (!n) errno = ENOSYS;
  return list;
}

void ibv_free_device_list(ibv_device** list) {
  free(list);
}

const char* ibv_get_device_name(ibv_device* device) {
  return device->name;
}

int ibv_get_device_index(ibv_device* device) {
  return provider_for(device).device_index();
}

__be64 ibv_get_device_guid(ibv_device* device) {
  Engine* e = Engine::get();
  if (!e) return 0;
  return htobe64(provider_for(device).node_guid(*e));
}

ibv_context* ibv_open_device(ibv_device* device) {
  SoftDevice* d = the_device();
  const bool iwarp = is_iwarp_device(device);
  if (iwarp) d = the_iwarp_device();
  if (!d || device != &d->dev) {
    errno = ENODEV;
    return nullptr;
  }
  Engine* engine = Engine::get();  // a forked child's own, made on its first call
  if (!engine) {
    errno = ENODEV;
    return nullptr;
  }
  // cmd_fd: programs dup() and poll it as they would a uverbs file; it is the null device
  // (nothing is ever read from it; importing a context from it is EOPNOTSUPP).
  const int cmd_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
  int fds[2];
  if (cmd_fd < 0 || pipe2(fds, O_CLOEXEC) != 0) {
    if (cmd_fd >= 0) close(cmd_fd);
    return nullptr;
  }
  auto* ctx = new SoftContext{};
  ctx->engine = engine;
  ctx->generation = Engine::generation();
  ctx->provider = &provider_for(device);
  ctx->provider->open(ctx);
  fcntl(fds[1], F_SETFL, O_NONBLOCK);
  ctx->async_write_fd = fds[1];
  ibv_context& c = ctx->vctx.context;
  c.device = device;
  c.cmd_fd = cmd_fd;
  c.async_fd = fds[0];
  c.num_comp_vectors = 1;
  pthread_mutex_init(&c.mutex, nullptr);
  c.abi_compat = __VERBS_ABI_IS_EXTENDED;
  ctx->vctx.sz = sizeof(verbs_context);
  ctx->vctx.query_port = query_port_impl;
  ctx->vctx.query_device_ex = query_device_ex_impl;
  ctx->vctx.query_rt_values = query_rt_values_impl;
  ctx->vctx.advise_mr = advise_mr;
  fill_context_ops(ctx);
  ++d->refcount;
  return &c;
}

int ibv_close_device(ibv_context* context) {
  SoftContext* ctx = soft(context);
  close(context->cmd_fd);
  close(context->async_fd);
  close(ctx->async_write_fd);
  pthread_mutex_destroy(&context->mutex);
  delete ctx;
  return 0;
}

int ibv_query_device(ibv_context* context, ibv_device_attr* attr) {
  provider(context).query_device(context, *attr);
  return 0;
}

// The old entry point: applications built against verbs.h call ___ibv_query_port,
// which uses the context's query_port; this symbol serves older binaries.
int ibv_query_port(ibv_context* context, uint8_t port_num, struct _compat_ibv_port_attr* attr) {
  // The old layout ends where ibv_port_attr.flags begins.
  return query_port_impl(context, port_num, reinterpret_cast<ibv_port_attr*>(attr),
                         offsetof(ibv_port_attr, flags));
}

int ibv_query_gid(ibv_context* context, uint8_t port_num, int index, union ibv_gid* gid) {
  const auto gids = gid_table(context);
  if (port_num != 1 || index < 0 || static_cast<std::size_t>(index) >= gids.size()) {
    errno = EINVAL;
    return -1;
  }
  std::memcpy(gid->raw, gids[static_cast<std::size_t>(index)].data(), 16);
  return 0;
}

int ibv_query_pkey(ibv_context* context, uint8_t port_num, int index, __be16* pkey) {
  const auto& table = pkey_table(context);
  if (port_num != 1 || index < 0 || static_cast<std::size_t>(index) >= table.size()) {
    errno = EINVAL;
    return -1;
  }
  *pkey = htobe16(table[static_cast<std::size_t>(index)]);
  return 0;
}

// The index of the entry equal to `pkey` (as rdma-core's: the exact value, membership bit too).
int ibv_get_pkey_index(ibv_context* context, uint8_t port_num, __be16 pkey) {
  if (port_num != 1) return -1;
  const auto& table = pkey_table(context);
  for (std::size_t i = 0; i < table.size(); ++i) {
    if (table[i] == be16toh(pkey)) return static_cast<int>(i);
  }
  return -1;
}

int _ibv_query_gid_ex(ibv_context* context, uint32_t port_num, uint32_t gid_index,
                      ibv_gid_entry* entry, uint32_t flags, size_t entry_size) {
  const auto gids = gid_table(context);
  if (flags || port_num != 1 || gid_index >= gids.size()) return EINVAL;
  if (entry_size < sizeof(ibv_gid_entry)) return EINVAL;
  std::memset(entry, 0, entry_size);
  std::memcpy(entry->gid.raw, gids[gid_index].data(), 16);
  entry->gid_index = gid_index;
  entry->port_num = 1;
  entry->gid_type = provider(context).roce_v2_gids() ? IBV_GID_TYPE_ROCE_V2 : IBV_GID_TYPE_IB;
  const std::string ndev = interface_name(soft(context)->engine->config());
  entry->ndev_ifindex = ndev.empty() ? 0 : if_nametoindex(ndev.c_str());  // gid_attrs/ndevs/N's
  return 0;
}

ssize_t _ibv_query_gid_table(ibv_context* context, ibv_gid_entry* entries, size_t max_entries,
                             uint32_t flags, size_t entry_size) {
  const auto gids = gid_table(context);
  if (flags || entry_size < sizeof(ibv_gid_entry)) return -EINVAL;
  if (max_entries < gids.size()) return -EINVAL;
  for (std::size_t i = 0; i < gids.size(); ++i) {
    auto* e = reinterpret_cast<ibv_gid_entry*>(reinterpret_cast<char*>(entries) + i * entry_size);
    _ibv_query_gid_ex(context, 1, static_cast<uint32_t>(i), e, 0, entry_size);
  }
  return static_cast<ssize_t>(gids.size());
}

// IBVERBS_PRIVATE_34, and what ibv_devinfo uses to print "RoCE v2". The enum
// (rdma-core's driver.h, not installed) has IB/RoCE v1 = 0 and RoCE v2 = 1.
int ibv_query_gid_type(ibv_context* context, uint8_t port_num, unsigned int index, int* type) {
  if (port_num != 1 || index >= gid_table(context).size()) {
    errno = EINVAL;
    return -1;
  }
  *type = provider(context).roce_v2_gids() ? 1 : 0;  // RoCE v2, IB/RoCE v1
  return 0;
}

int ibv_get_async_event(ibv_context* context, ibv_async_event* event) {
  return soft(context)->events.take(context->async_fd, *event) ? 0 : -1;
}

void ibv_ack_async_event(ibv_async_event* event) {
  switch (event->event_type) {
    case IBV_EVENT_CQ_ERR: {
      ibv_cq* cq = event->element.cq;
      pthread_mutex_lock(&cq->mutex);
      ++cq->async_events_completed;
      pthread_cond_signal(&cq->cond);
      pthread_mutex_unlock(&cq->mutex);
      break;
    }
    case IBV_EVENT_QP_FATAL:
    case IBV_EVENT_QP_REQ_ERR:
    case IBV_EVENT_QP_ACCESS_ERR:
    case IBV_EVENT_COMM_EST:
    case IBV_EVENT_SQ_DRAINED:
    case IBV_EVENT_PATH_MIG:
    case IBV_EVENT_PATH_MIG_ERR:
    case IBV_EVENT_QP_LAST_WQE_REACHED: {
      ibv_qp* qp = event->element.qp;
      pthread_mutex_lock(&qp->mutex);
      ++qp->events_completed;
      pthread_cond_signal(&qp->cond);
      pthread_mutex_unlock(&qp->mutex);
      break;
    }
    case IBV_EVENT_SRQ_ERR:
    case IBV_EVENT_SRQ_LIMIT_REACHED: {
      ibv_srq* srq = event->element.srq;
      pthread_mutex_lock(&srq->mutex);
      ++srq->events_completed;
      pthread_cond_signal(&srq->cond);
      pthread_mutex_unlock(&srq->mutex);
      break;
    }
    default:
      break;
  }
}

}  // extern "C"

namespace softrdma::verbs {

// Turns an engine event into an ibv_async_event on the context's async fd.
void post_async_event(SoftContext* ctx, const rxe::AsyncEvent& ev) {
  ibv_async_event out{};
  out.event_type = static_cast<ibv_event_type>(ev.type);
  std::uint64_t id = 0;
  if (ev.qp && ev.qp->user) {
    auto* q = static_cast<SoftQp*>(ev.qp->user);
    out.element.qp = &q->qpx.qp_base;
    id = q->event_id;
  } else if (ev.cq && ev.cq->user) {
    auto* c = static_cast<SoftCq*>(ev.cq->user);
    out.element.cq = reinterpret_cast<ibv_cq*>(&c->cqx);
    id = c->event_id;
  } else if (ev.srq && ev.srq->user) {
    auto* s = static_cast<SoftSrq*>(ev.srq->user);
    out.element.srq = &s->srq;
    id = s->event_id;
  } else {
    out.element.port_num = 1;
  }
  AsyncEvents::post(ctx->async_write_fd, out, id);
}

// A CQ's or SRQ's event, to the async fd of the context that created it.
void post_object_event(core::AsyncEventType type, core::Cq* cq, core::Srq* srq) {
  SoftContext* ctx = nullptr;
  if (cq && cq->user) ctx = soft(static_cast<SoftCq*>(cq->user)->cqx.context);
  if (srq && srq->user) ctx = soft(static_cast<SoftSrq*>(srq->user)->srq.context);
  if (ctx) post_async_event(ctx, {type, nullptr, cq, srq});
}

}  // namespace softrdma::verbs
