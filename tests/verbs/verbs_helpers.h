// Helpers of the gtests that use the drop-in libibverbs through its C API.
#pragma once

#include <fcntl.h>
#include <infiniband/verbs.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "../wait_until.h"

namespace softrdma::verbs::test {

using softrdma::test::wait_until;

// The device named `name`, opened; nullptr when there is none.
inline ibv_context* open_by_name(const char* name) {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  ibv_context* ctx = nullptr;
  for (int i = 0; i < n && !ctx; ++i) {
    if (std::strcmp(ibv_get_device_name(list[i]), name) == 0) ctx = ibv_open_device(list[i]);
  }
  ibv_free_device_list(list);
  return ctx;
}

// A work request of `op` with the one SGE `*s` (which must outlive it); RDMA and atomic
// requests set their remote address and key after.
inline ibv_send_wr one_sge_wr(ibv_wr_opcode op, ibv_sge* s, std::uint64_t id = 0,
                              unsigned flags = IBV_SEND_SIGNALED) {
  ibv_send_wr w{};
  w.wr_id = id;
  w.sg_list = s;
  w.num_sge = 1;
  w.opcode = op;
  w.send_flags = flags;
  return w;
}
// An RDMA WRITE or READ of `*s` to or from `remote` under `rkey`.
inline ibv_send_wr rdma_wr(ibv_wr_opcode op, ibv_sge* s, std::uint64_t remote, std::uint32_t rkey,
                           std::uint64_t id = 0, unsigned flags = IBV_SEND_SIGNALED) {
  ibv_send_wr w = one_sge_wr(op, s, id, flags);
  w.wr.rdma.remote_addr = remote;
  w.wr.rdma.rkey = rkey;
  return w;
}
// Posts `w` on `qp`: ibv_post_send's result.
inline int post_wr(ibv_qp* qp, ibv_send_wr w) {
  ibv_send_wr* bad = nullptr;
  return ibv_post_send(qp, &w, &bad);
}
// A receive work request of the one SGE `*s` (which must outlive it).
inline ibv_recv_wr one_sge_recv(ibv_sge* s, std::uint64_t id) {
  ibv_recv_wr w{};
  w.wr_id = id;
  w.sg_list = s;
  w.num_sge = 1;
  return w;
}
// Posts a receive of the one SGE `*s` on `qp`: ibv_post_recv's result.
inline int post_recv_sge(ibv_qp* qp, ibv_sge* s, std::uint64_t id) {
  ibv_recv_wr w = one_sge_recv(s, id);
  ibv_recv_wr* bad = nullptr;
  return ibv_post_recv(qp, &w, &bad);
}
// The same on the SRQ `srq`: ibv_post_srq_recv's result.
inline int post_srq_recv_sge(ibv_srq* srq, ibv_sge* s, std::uint64_t id) {
  ibv_recv_wr w = one_sge_recv(s, id);
  ibv_recv_wr* bad = nullptr;
  return ibv_post_srq_recv(srq, &w, &bad);
}

// Polls `cq` until it has given `want` completions, it fails, or 10 s passed.
inline std::vector<ibv_wc> poll_n(ibv_cq* cq, std::size_t want) {
  using namespace std::chrono_literals;
  std::vector<ibv_wc> got;
  wait_until(
      [&] {
        ibv_wc wc[16];
        const int n = ibv_poll_cq(cq, 16, wc);
        if (n > 0) got.insert(got.end(), wc, wc + n);
        return n < 0 || got.size() >= want;
      },
      10s);
  return got;
}

// The asynchronous events `ctx` reports within `window` (each acknowledged): long enough for
// one that comes late, or for a second one, to show.
inline std::vector<ibv_async_event> async_events(ibv_context* ctx,
                                                 std::chrono::milliseconds window) {
  using namespace std::chrono_literals;
  fcntl(ctx->async_fd, F_SETFL, fcntl(ctx->async_fd, F_GETFL) | O_NONBLOCK);
  std::vector<ibv_async_event> events;
  const auto deadline = std::chrono::steady_clock::now() + window;
  while (std::chrono::steady_clock::now() < deadline) {
    ibv_async_event ev;
    if (ibv_get_async_event(ctx, &ev) == 0) {
      events.push_back(ev);
      ibv_ack_async_event(&ev);
    } else {
      std::this_thread::sleep_for(10ms);  // time itself: a window for a late event
    }
  }
  return events;
}
// The events among `events` of `type` for `qp`.
inline std::size_t count_qp_events(const std::vector<ibv_async_event>& events, ibv_event_type type,
                                   const ibv_qp* qp) {
  std::size_t n = 0;
  for (const ibv_async_event& e : events) n += e.event_type == type && e.element.qp == qp;
  return n;
}

// Posts `w` on `qp` signaled and waits for one completion on `cq`: its status, -2 when posting
// failed, -1 when none came.
inline int complete_one(ibv_qp* qp, ibv_cq* cq, ibv_send_wr w) {
  w.send_flags |= IBV_SEND_SIGNALED;
  if (post_wr(qp, w) != 0) return -2;
  const std::vector<ibv_wc> wcs = poll_n(cq, 1);
  return wcs.empty() ? -1 : static_cast<int>(wcs[0].status);
}

// Two RC QPs of one device connected to each other, with a buffer each.
struct Loop {
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_cq* cq = nullptr;
  ibv_qp* qp[2] = {};
  std::vector<std::uint8_t> buf = std::vector<std::uint8_t>(2 * 65536);
  ibv_mr* mr = nullptr;
  unsigned mr_access = IBV_ACCESS_LOCAL_WRITE;   // of `mr`, over all of `buf`
  unsigned qp_access = IBV_ACCESS_REMOTE_WRITE;  // both QPs' qp_access_flags

  bool open(ibv_context* c) {
    ctx = c;
    pd = ibv_alloc_pd(ctx);
    cq = ibv_create_cq(ctx, 256, nullptr, nullptr, 0);
    if (!pd || !cq) return false;
    mr = ibv_reg_mr(pd, buf.data(), buf.size(), static_cast<int>(mr_access));
    for (auto& q : qp) {
      ibv_qp_init_attr a{};
      a.send_cq = a.recv_cq = cq;
      a.qp_type = IBV_QPT_RC;
      a.cap.max_send_wr = a.cap.max_recv_wr = 32;
      a.cap.max_send_sge = a.cap.max_recv_sge = 1;
      q = ibv_create_qp(pd, &a);
      if (!q) return false;
    }
    return mr != nullptr;
  }

  // QP i: RESET -> INIT on port 1 with `qp_access`.
  bool init(int i) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.port_num = 1;
    a.qp_access_flags = qp_access;
    return ibv_modify_qp(qp[i], &a,
                         IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) == 0;
  }
  // QP i: INIT -> RTR towards the other QP at `dgid`, from GID `sgid_index`; ibv_modify_qp's
  // result.
  int rtr(int i, const ibv_gid& dgid, std::uint8_t sgid_index) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = IBV_MTU_1024;
    a.dest_qp_num = qp[1 - i]->qp_num;
    a.rq_psn = 0;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 1;
    a.ah_attr.is_global = 1;
    a.ah_attr.grh.dgid = dgid;
    a.ah_attr.grh.sgid_index = sgid_index;
    a.ah_attr.grh.hop_limit = 64;
    a.ah_attr.port_num = 1;
    return ibv_modify_qp(qp[i], &a,
                         IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                             IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
  }
  // QP i: RTR -> RTS.
  bool rts(int i) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RTS;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.max_rd_atomic = 1;
    return ibv_modify_qp(qp[i], &a,
                         IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                             IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC) == 0;
  }

  // Both QPs to RTS, each addressed to the other through the device's address (GID index 1;
  // 0 is the link-local default GID).
  bool connect() {
    ibv_gid gid;
    if (ibv_query_gid(ctx, 1, 1, &gid)) return false;
    for (int i = 0; i < 2; ++i) {
      if (!init(i) || rtr(i, gid, 1) != 0 || !rts(i)) return false;
    }
    return true;
  }

  int post_recv(int q, std::uint64_t id, std::size_t off, std::uint32_t len) {
    ibv_sge s{reinterpret_cast<std::uint64_t>(buf.data() + off), len, mr->lkey};
    return post_recv_sge(qp[q], &s, id);
  }

  int send(int q, std::uint64_t id, std::size_t off, std::uint32_t len,
           ibv_wr_opcode op = IBV_WR_SEND) {
    ibv_sge s{reinterpret_cast<std::uint64_t>(buf.data() + off), len, mr->lkey};
    return post_wr(qp[q], one_sge_wr(op, &s, id));
  }

  // A 4000-byte SEND from QP 0 to QP 1, its bytes checked: true when it arrived whole.
  bool transfer(std::uint8_t tag) {
    for (std::size_t i = 0; i < 4000; ++i) buf[i] = static_cast<std::uint8_t>(tag + i);
    if (post_recv(1, 7, 65536, 4000) || send(0, 8, 0, 4000)) return false;
    const auto wcs = poll_n(cq, 2);
    if (wcs.size() != 2) return false;
    for (const ibv_wc& wc : wcs) {
      if (wc.status != IBV_WC_SUCCESS) return false;
    }
    return std::memcmp(buf.data(), buf.data() + 65536, 4000) == 0;
  }

  void close() {
    for (auto& q : qp) {
      if (q) ibv_destroy_qp(q);
    }
    if (mr) ibv_dereg_mr(mr);
    if (cq) ibv_destroy_cq(cq);
    if (pd) ibv_dealloc_pd(pd);
    if (ctx) ibv_close_device(ctx);
  }
};

}  // namespace softrdma::verbs::test
