// Strings, rates, sysfs helpers, fork support, kernel-struct copies and the
// import/ECE/dmabuf calls softrdma does not implement (EOPNOTSUPP).
#include <fcntl.h>
#include <infiniband/sa.h>
#include <rdma/ib_user_sa.h>
#include <rdma/ib_user_verbs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <type_traits>

#include "verbs/kernel_view.h"
#include "verbs/objects.h"

using namespace softrdma;
using namespace softrdma::verbs;

namespace {

// ibv_sa_path_rec and the kernel's ib_user_path_rec carry the same fields under the same names,
// with GIDs as a union or as bytes and some flags as int or __u32; one copy serves both ways.
std::uint8_t* gid_bytes(ibv_gid& g) {
  return g.raw;
}
std::uint8_t* gid_bytes(std::uint8_t* g) {
  return g;
}
template <class To, class From>
void copy_path_rec(To* dst, From* src) {
  std::memcpy(gid_bytes(dst->dgid), gid_bytes(src->dgid), 16);
  std::memcpy(gid_bytes(dst->sgid), gid_bytes(src->sgid), 16);
  auto set = [](auto& to, auto from) {
    to = static_cast<std::remove_reference_t<decltype(to)>>(from);
  };
  set(dst->dlid, src->dlid);
  set(dst->slid, src->slid);
  set(dst->raw_traffic, src->raw_traffic);
  set(dst->flow_label, src->flow_label);
  set(dst->reversible, src->reversible);
  set(dst->mtu, src->mtu);
  set(dst->pkey, src->pkey);
  set(dst->hop_limit, src->hop_limit);
  set(dst->traffic_class, src->traffic_class);
  set(dst->numb_path, src->numb_path);
  set(dst->sl, src->sl);
  set(dst->mtu_selector, src->mtu_selector);
  set(dst->rate_selector, src->rate_selector);
  set(dst->rate, src->rate);
  set(dst->packet_life_time_selector, src->packet_life_time_selector);
  set(dst->packet_life_time, src->packet_life_time);
  set(dst->preference, src->preference);
}

struct RateRow {
  ibv_rate rate;
  int mult;
  int mbps;
};

constexpr RateRow kRates[] = {
    {IBV_RATE_2_5_GBPS, 1, 2500},     {IBV_RATE_5_GBPS, 2, 5000},
    {IBV_RATE_10_GBPS, 4, 10000},     {IBV_RATE_20_GBPS, 8, 20000},
    {IBV_RATE_30_GBPS, 12, 30000},    {IBV_RATE_40_GBPS, 16, 40000},
    {IBV_RATE_60_GBPS, 24, 60000},    {IBV_RATE_80_GBPS, 32, 80000},
    {IBV_RATE_120_GBPS, 48, 120000},  {IBV_RATE_14_GBPS, 0, 14062},
    {IBV_RATE_56_GBPS, 0, 56250},     {IBV_RATE_112_GBPS, 0, 112500},
    {IBV_RATE_168_GBPS, 0, 168750},   {IBV_RATE_25_GBPS, 10, 25781},
    {IBV_RATE_100_GBPS, 40, 103125},  {IBV_RATE_200_GBPS, 80, 206250},
    {IBV_RATE_300_GBPS, 120, 309375}, {IBV_RATE_28_GBPS, 11, 28125},
    {IBV_RATE_50_GBPS, 20, 53125},    {IBV_RATE_400_GBPS, 160, 425000},
    {IBV_RATE_600_GBPS, 240, 637500},
};

// The device files of the kernel view (verbs/kernel_view.h) that programs read from sysfs.
bool virtual_sysfs(const char* dir, const char* file, std::string& out) {
  Engine* e = Engine::get();
  if (!e) return false;
  std::vector<core::Gid> gids;
  for (const PortGid& g : e->gid_table()) gids.push_back(g.gid);
  auto v = view_file(e->config(), dir, file, &gids);
  if (!v) return false;
  out = *v;
  return true;
}

}  // namespace

extern "C" {

const char* ibv_wc_status_str(enum ibv_wc_status status) {
  return core::to_string(static_cast<core::WcStatus>(status));
}

const char* ibv_node_type_str(enum ibv_node_type t) {
  switch (t) {
    case IBV_NODE_CA:
      return "InfiniBand channel adapter";
    case IBV_NODE_SWITCH:
      return "InfiniBand switch";
    case IBV_NODE_ROUTER:
      return "InfiniBand router";
    case IBV_NODE_RNIC:
      return "iWARP NIC";
    case IBV_NODE_USNIC:
      return "usNIC";
    case IBV_NODE_USNIC_UDP:
      return "usNIC UDP";
    case IBV_NODE_UNSPECIFIED:
      return "unspecified";
    default:
      return "unknown";
  }
}

const char* ibv_port_state_str(enum ibv_port_state s) {
  switch (s) {
    case IBV_PORT_NOP:
      return "PORT_NOP";
    case IBV_PORT_DOWN:
      return "PORT_DOWN";
    case IBV_PORT_INIT:
      return "PORT_INIT";
    case IBV_PORT_ARMED:
      return "PORT_ARMED";
    case IBV_PORT_ACTIVE:
      return "PORT_ACTIVE";
    case IBV_PORT_ACTIVE_DEFER:
      return "PORT_ACTIVE_DEFER";
    default:
      return "invalid state";
  }
}

const char* ibv_event_type_str(enum ibv_event_type e) {
  static const char* const names[] = {"CQ error",
                                      "local work queue catastrophic error",
                                      "invalid request local work queue error",
                                      "local access violation work queue error",
                                      "communication established",
                                      "send queue drained",
                                      "path migrated",
                                      "path migration request error",
                                      "local catastrophic error",
                                      "port active",
                                      "port error",
                                      "LID change",
                                      "P_Key change",
                                      "SM change",
                                      "SRQ catastrophic error",
                                      "SRQ limit reached",
                                      "last WQE reached",
                                      "client reregistration",
                                      "GID table change",
                                      "WQ fatal"};
  const auto i = static_cast<unsigned>(e);
  return i < sizeof names / sizeof names[0] ? names[i] : "unknown";
}

int ibv_rate_to_mult(enum ibv_rate rate) {
  for (const auto& r : kRates)
    if (r.rate == rate) return r.mult;
  return 0;
}
enum ibv_rate mult_to_ibv_rate(int mult) {
  for (const auto& r : kRates)
    if (r.mult == mult && mult) return r.rate;
  return IBV_RATE_MAX;
}
int ibv_rate_to_mbps(enum ibv_rate rate) {
  for (const auto& r : kRates)
    if (r.rate == rate) return r.mbps;
  return 0;
}
enum ibv_rate mbps_to_ibv_rate(int mbps) {
  for (const auto& r : kRates)
    if (r.mbps == mbps) return r.rate;
  return IBV_RATE_MAX;
}

const char* ibv_get_sysfs_path(void) {
  return "/sys";
}

int ibv_read_sysfs_file(const char* dir, const char* file, char* buf, size_t size) {
  std::string v;
  if (virtual_sysfs(dir, file, v)) {
    if (size == 0) return -1;
    const size_t n = std::min(v.size(), size - 1);
    std::memcpy(buf, v.data(), n);
    buf[n] = '\0';
    if (n && buf[n - 1] == '\n') buf[n - 1] = '\0';
    return static_cast<int>(n);
  }
  // Anything else: the real file, as rdma-core does.
  char path[512];
  std::snprintf(path, sizeof path, "%s/%s", dir, file);
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  const ssize_t n = read(fd, buf, size);
  close(fd);
  if (n <= 0) return -1;
  if (static_cast<size_t>(n) < size) buf[n] = '\0';
  if (buf[n - 1] == '\n') buf[n - 1] = '\0';
  return static_cast<int>(n);
}

// Registered memory stays in this process and the engine never pins pages, so
// fork() needs no preparation.
int ibv_fork_init(void) {
  return 0;
}
enum ibv_fork_status ibv_is_fork_initialized(void) {
  return IBV_FORK_UNNEEDED;
}
int ibv_dontfork_range(void*, size_t) {
  return 0;
}
int ibv_dofork_range(void*, size_t) {
  return 0;
}

int ibv_resolve_eth_l2_from_gid(ibv_context*, ibv_ah_attr*, uint8_t[6], uint16_t*) {
  return EOPNOTSUPP;
}

ibv_context* ibv_import_device(int) {
  errno = EOPNOTSUPP;
  return nullptr;
}
ibv_pd* ibv_import_pd(ibv_context*, uint32_t) {
  errno = EOPNOTSUPP;
  return nullptr;
}
void ibv_unimport_pd(ibv_pd*) {}
ibv_mr* ibv_import_mr(ibv_pd*, uint32_t) {
  errno = EOPNOTSUPP;
  return nullptr;
}
void ibv_unimport_mr(ibv_mr*) {}
ibv_dm* ibv_import_dm(ibv_context*, uint32_t) {
  errno = EOPNOTSUPP;
  return nullptr;
}
void ibv_unimport_dm(ibv_dm*) {}

// Providers register themselves through this in older rdma-core; no providers here.
void ibv_register_driver(const char*, void*) {}

// Conversions between kernel ABI structs and verbs structs (librdmacm uses them).
void ibv_copy_ah_attr_from_kern(ibv_ah_attr* dst, ib_uverbs_ah_attr* src) {
  std::memcpy(dst->grh.dgid.raw, src->grh.dgid, 16);
  dst->grh.flow_label = src->grh.flow_label;
  dst->grh.sgid_index = src->grh.sgid_index;
  dst->grh.hop_limit = src->grh.hop_limit;
  dst->grh.traffic_class = src->grh.traffic_class;
  dst->dlid = src->dlid;
  dst->sl = src->sl;
  dst->src_path_bits = src->src_path_bits;
  dst->static_rate = src->static_rate;
  dst->is_global = src->is_global;
  dst->port_num = src->port_num;
}

void ibv_copy_qp_attr_from_kern(ibv_qp_attr* dst, ib_uverbs_qp_attr* src) {
  dst->cur_qp_state = static_cast<ibv_qp_state>(src->cur_qp_state);
  dst->path_mtu = static_cast<ibv_mtu>(src->path_mtu);
  dst->path_mig_state = static_cast<ibv_mig_state>(src->path_mig_state);
  dst->qkey = src->qkey;
  dst->rq_psn = src->rq_psn;
  dst->sq_psn = src->sq_psn;
  dst->dest_qp_num = src->dest_qp_num;
  dst->qp_access_flags = src->qp_access_flags;
  dst->cap.max_send_wr = src->max_send_wr;
  dst->cap.max_recv_wr = src->max_recv_wr;
  dst->cap.max_send_sge = src->max_send_sge;
  dst->cap.max_recv_sge = src->max_recv_sge;
  dst->cap.max_inline_data = src->max_inline_data;
  ibv_copy_ah_attr_from_kern(&dst->ah_attr, &src->ah_attr);
  ibv_copy_ah_attr_from_kern(&dst->alt_ah_attr, &src->alt_ah_attr);
  dst->pkey_index = src->pkey_index;
  dst->alt_pkey_index = src->alt_pkey_index;
  dst->en_sqd_async_notify = src->en_sqd_async_notify;
  dst->sq_draining = src->sq_draining;
  dst->max_rd_atomic = src->max_rd_atomic;
  dst->max_dest_rd_atomic = src->max_dest_rd_atomic;
  dst->min_rnr_timer = src->min_rnr_timer;
  dst->port_num = src->port_num;
  dst->timeout = src->timeout;
  dst->retry_cnt = src->retry_cnt;
  dst->rnr_retry = src->rnr_retry;
  dst->alt_port_num = src->alt_port_num;
  dst->alt_timeout = src->alt_timeout;
}

void ibv_copy_path_rec_from_kern(ibv_sa_path_rec* dst, ib_user_path_rec* src) {
  copy_path_rec(dst, src);
}

void ibv_copy_path_rec_to_kern(ib_user_path_rec* dst, ibv_sa_path_rec* src) {
  copy_path_rec(dst, src);
}

}  // extern "C"
