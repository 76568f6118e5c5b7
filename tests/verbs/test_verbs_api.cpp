// The drop-in libibverbs.so.1 against what rdma-core's own tests and middleware expect of a
// device: extended query fields, a usable cmd_fd, creation flags, ATOMIC_WRITE refused, CQs
// cleaned when a QP goes to RESET or is destroyed, iWARP QPs starting in INIT, and fork(): a
// child's device is its own while its parent's objects stay the parent's.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <infiniband/sa.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <rdma/ib_user_sa.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "verbs_helpers.h"

// librdmacm's conversions of path records; rdma-core exports them without a header.
extern "C" void ibv_copy_path_rec_from_kern(ibv_sa_path_rec* dst, ib_user_path_rec* src);
extern "C" void ibv_copy_path_rec_to_kern(ib_user_path_rec* dst, ibv_sa_path_rec* src);

namespace {

using namespace std::chrono_literals;
using namespace softrdma::verbs::test;

TEST(VerbsApi, QueryDeviceExRepeatsThePlainFields) {
  for (const char* name : {"softroce0", "softiwarp0"}) {
    ibv_context* ctx = open_by_name(name);
    ASSERT_TRUE(ctx) << name;
    ibv_device_attr_ex ex{};
    ASSERT_EQ(ibv_query_device_ex(ctx, nullptr, &ex), 0);
    EXPECT_EQ(ex.phys_port_cnt_ex, 1u) << name;
    EXPECT_EQ(ex.orig_attr.phys_port_cnt, 1) << name;
    EXPECT_NE(ex.device_cap_flags_ex, 0u) << name;
    // The low 32 bits are the plain flags; above them only ATOMIC WRITE (bit 40) and FLUSH to
    // global visibility (bit 38), on softroce0 (verbs/ibta15.h).
    EXPECT_EQ(ex.device_cap_flags_ex & 0xFFFFFFFFu,
              static_cast<std::uint64_t>(ex.orig_attr.device_cap_flags))
        << name;
    const std::uint64_t high = std::string(name) == "softroce0" ? (1ull << 40) | (1ull << 38) : 0;
    EXPECT_EQ(ex.device_cap_flags_ex >> 32, high >> 32) << name;
    ibv_close_device(ctx);
  }
}

TEST(VerbsApi, CmdFdIsADescriptorProgramsCanDup) {
  ibv_context* ctx = open_by_name("softroce0");
  ASSERT_TRUE(ctx);
  ASSERT_GE(ctx->cmd_fd, 0);
  EXPECT_GE(fcntl(ctx->cmd_fd, F_GETFD), 0);
  const int copy = dup(ctx->cmd_fd);
  ASSERT_GE(copy, 0);
  errno = 0;
  EXPECT_EQ(ibv_import_device(copy), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
  close(copy);
  const int fd = ctx->cmd_fd;
  ibv_close_device(ctx);
  EXPECT_EQ(fcntl(fd, F_GETFD), -1);  // closed with its context
}

TEST(VerbsApi, CreateQpExTakesCreateFlagsThatAreZero) {
  ibv_context* ctx = open_by_name("softroce0");
  ASSERT_TRUE(ctx);
  ibv_pd* pd = ibv_alloc_pd(ctx);
  ibv_cq* cq = ibv_create_cq(ctx, 16, nullptr, nullptr, 0);
  ibv_qp_init_attr_ex a{};
  a.send_cq = a.recv_cq = cq;
  a.qp_type = IBV_QPT_RC;
  a.cap.max_send_wr = a.cap.max_recv_wr = 4;
  a.cap.max_send_sge = a.cap.max_recv_sge = 1;
  a.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS;
  a.pd = pd;
  a.create_flags = 0;
  ibv_qp* qp = ibv_create_qp_ex(ctx, &a);
  ASSERT_TRUE(qp) << std::strerror(errno);
  EXPECT_EQ(ibv_destroy_qp(qp), 0);
  a.create_flags = IBV_QP_CREATE_SCATTER_FCS;
  errno = 0;
  EXPECT_EQ(ibv_create_qp_ex(ctx, &a), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
  ibv_destroy_cq(cq);
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
}

// A device with a PD, a CQ, an SRQ and two RC QPs, the first (or both) on the SRQ, moved to
// the error state; what is left of them goes with it.
struct TwoQpsInError {
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_cq* cq = nullptr;
  ibv_srq* srq = nullptr;
  ibv_qp* qps[2] = {};
  bool open(const char* device, bool both_on_srq) {
    ctx = open_by_name(device);
    if (!ctx) return false;
    pd = ibv_alloc_pd(ctx);
    cq = ibv_create_cq(ctx, 16, nullptr, nullptr, 0);
    ibv_srq_init_attr sa{};
    sa.attr.max_wr = 8;
    sa.attr.max_sge = 1;
    srq = pd ? ibv_create_srq(pd, &sa) : nullptr;
    if (!pd || !cq || !srq) return false;
    ibv_qp_attr err{};
    err.qp_state = IBV_QPS_ERR;
    for (int i = 0; i < 2; ++i) {
      ibv_qp_init_attr a{};
      a.send_cq = a.recv_cq = cq;
      a.srq = i == 0 || both_on_srq ? srq : nullptr;
      a.qp_type = IBV_QPT_RC;
      a.cap.max_send_wr = a.cap.max_recv_wr = 4;
      a.cap.max_send_sge = a.cap.max_recv_sge = 1;
      qps[i] = ibv_create_qp(pd, &a);
      if (!qps[i] || ibv_modify_qp(qps[i], &err, IBV_QP_STATE) != 0) return false;
    }
    return true;
  }
  ~TwoQpsInError() {
    for (ibv_qp* q : qps) {
      if (q) ibv_destroy_qp(q);
    }
    if (srq) ibv_destroy_srq(srq);
    if (cq) ibv_destroy_cq(cq);
    if (pd) ibv_dealloc_pd(pd);
    if (ctx) ibv_close_device(ctx);
  }
};

// A QP of an SRQ that enters the error state says so with IBV_EVENT_QP_LAST_WQE_REACHED (SPDK's
// NVMe-oF target waits for it before it destroys the QP), once; a QP without an SRQ does not.
void expect_last_wqe_event(const char* device) {
  TwoQpsInError t;
  ASSERT_TRUE(t.open(device, false)) << device;
  ibv_qp_attr err{};
  err.qp_state = IBV_QPS_ERR;
  ASSERT_EQ(ibv_modify_qp(t.qps[0], &err, IBV_QP_STATE), 0);  // already there: no second event
  const std::vector<ibv_async_event> events = async_events(t.ctx, 300ms);
  ASSERT_EQ(events.size(), 1u) << device;
  EXPECT_EQ(events[0].event_type, IBV_EVENT_QP_LAST_WQE_REACHED) << device;
  EXPECT_EQ(events[0].element.qp, t.qps[0]) << device;
}

TEST(VerbsApi, AnSrqQpEnteringErrorReportsItsLastWqe) {
  expect_last_wqe_event("softroce0");
  expect_last_wqe_event("softiwarp0");
}

// As rdma-core: an event still unread when its QP is destroyed is never handed out (it would
// name freed memory: UCX's async thread acked one after its QP was gone, under ASan), and
// ibv_destroy_qp returns only once every event read for the QP has been acked.
void expect_destroy_waits_for_events(const char* device) {
  TwoQpsInError t;
  ASSERT_TRUE(t.open(device, true)) << device;
  fcntl(t.ctx->async_fd, F_SETFL, fcntl(t.ctx->async_fd, F_GETFL) | O_NONBLOCK);
  ibv_async_event ev{};
  ASSERT_TRUE(wait_until([&] { return ibv_get_async_event(t.ctx, &ev) == 0; }, 5s, 1ms))
      << device;
  ASSERT_EQ(ev.event_type, IBV_EVENT_QP_LAST_WQE_REACHED) << device;
  // (either may report first)
  const int read = ev.element.qp == t.qps[0] ? 0 : 1;
  ASSERT_EQ(ev.element.qp, t.qps[read]) << device;
  std::atomic<bool> destroyed{false};
  std::thread th([&] {
    EXPECT_EQ(ibv_destroy_qp(t.qps[read]), 0);
    destroyed = true;
  });
  std::this_thread::sleep_for(100ms);  // time itself: the destroy must be waiting all along
  EXPECT_FALSE(destroyed) << device << ": ibv_destroy_qp returned before the ack";
  ibv_ack_async_event(&ev);
  th.join();
  EXPECT_TRUE(destroyed);
  t.qps[read] = nullptr;
  // The other QP's event is waiting in the async fd; its QP goes before it is read.
  ASSERT_TRUE(wait_until(
      [&] {
        pollfd p{t.ctx->async_fd, POLLIN, 0};
        return ::poll(&p, 1, 0) == 1;
      },
      5s, 1ms))
      << device;
  ASSERT_EQ(ibv_destroy_qp(t.qps[1 - read]), 0);
  t.qps[1 - read] = nullptr;
  EXPECT_TRUE(async_events(t.ctx, 100ms).empty()) << device << ": an event of a destroyed QP";
}

TEST(VerbsApi, DestroyingAQpDropsItsUnreadEventsAndWaitsForTheAckOfReadOnes) {
  expect_destroy_waits_for_events("softroce0");
  expect_destroy_waits_for_events("softiwarp0");
}

// A QP of an SRQ that fails a request (an RDMA WRITE under an rkey it does not know: a remote
// access error) enters the error state and reports the error, then its last WQE, once each;
// the requester, which has no SRQ, reports no last WQE.
TEST(VerbsApi, AnSrqQpFailingARequestReportsItsLastWqe) {
  Loop l;
  ASSERT_TRUE(l.open(open_by_name("softroce0")));
  ibv_srq_init_attr sa{};
  sa.attr.max_wr = 8;
  sa.attr.max_sge = 1;
  ibv_srq* srq = ibv_create_srq(l.pd, &sa);
  ASSERT_NE(srq, nullptr);
  ASSERT_EQ(ibv_destroy_qp(l.qp[1]), 0);
  ibv_qp_init_attr a{};
  a.send_cq = a.recv_cq = l.cq;
  a.srq = srq;
  a.qp_type = IBV_QPT_RC;
  a.cap.max_send_wr = 4;
  a.cap.max_send_sge = 1;
  l.qp[1] = ibv_create_qp(l.pd, &a);
  ASSERT_NE(l.qp[1], nullptr);
  ASSERT_TRUE(l.connect());
  ibv_sge s{reinterpret_cast<std::uint64_t>(l.buf.data()), 64, l.mr->lkey};
  EXPECT_EQ(complete_one(l.qp[0], l.cq, rdma_wr(IBV_WR_RDMA_WRITE, &s, 0, 0x7777, 1)),
            IBV_WC_REM_ACCESS_ERR);
  const std::vector<ibv_async_event> events = async_events(l.ctx, 300ms);
  EXPECT_EQ(count_qp_events(events, IBV_EVENT_QP_ACCESS_ERR, l.qp[1]), 1u);
  EXPECT_EQ(count_qp_events(events, IBV_EVENT_QP_LAST_WQE_REACHED, l.qp[1]), 1u);
  EXPECT_EQ(count_qp_events(events, IBV_EVENT_QP_LAST_WQE_REACHED, l.qp[0]), 0u);
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(events[0].event_type, IBV_EVENT_QP_ACCESS_ERR);  // the error, then the last WQE
  ibv_qp_attr attr{};
  ibv_qp_init_attr init{};
  ASSERT_EQ(ibv_query_qp(l.qp[1], &attr, IBV_QP_STATE, &init), 0);
  EXPECT_EQ(attr.qp_state, IBV_QPS_ERR);
  for (ibv_qp*& q : l.qp) {
    EXPECT_EQ(ibv_destroy_qp(q), 0);
    q = nullptr;
  }
  EXPECT_EQ(ibv_destroy_srq(srq), 0);
  l.close();
}

// ATOMIC WRITE itself: tests/verbs/test_atomic_write.cpp.
TEST(VerbsApi, AtomicWriteIsASendOperationOfExtendedQps) {
  Loop l;
  ASSERT_TRUE(l.open(open_by_name("softroce0")));
  ASSERT_TRUE(l.connect());
  ibv_qp_init_attr_ex a{};
  a.send_cq = a.recv_cq = l.cq;
  a.qp_type = IBV_QPT_RC;
  a.cap.max_send_wr = a.cap.max_recv_wr = 4;
  a.cap.max_send_sge = a.cap.max_recv_sge = 1;
  a.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
  a.pd = l.pd;
  a.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_ATOMIC_WRITE;
  ibv_qp* q = ibv_create_qp_ex(l.ctx, &a);
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(ibv_destroy_qp(q), 0);
  // Not 8 bytes: refused at post, and the QP goes on working.
  EXPECT_EQ(l.send(0, 1, 0, 4, IBV_WR_ATOMIC_WRITE), EINVAL);
  EXPECT_TRUE(l.transfer(3));
  l.close();
}

TEST(VerbsApi, ResetRemovesTheQpsCompletionsOnly) {
  Loop l;
  ASSERT_TRUE(l.open(open_by_name("softroce0")));
  ASSERT_TRUE(l.connect());
  for (int i = 0; i < 4; ++i) ASSERT_EQ(l.post_recv(0, 100 + i, 0, 64), 0);
  for (int i = 0; i < 2; ++i) ASSERT_EQ(l.post_recv(1, 200 + i, 0, 64), 0);
  ibv_qp_attr err{};
  err.qp_state = IBV_QPS_ERR;
  ASSERT_EQ(ibv_modify_qp(l.qp[0], &err, IBV_QP_STATE), 0);
  ASSERT_EQ(ibv_modify_qp(l.qp[1], &err, IBV_QP_STATE), 0);
  // Both QPs' flush errors are queued (modify to ERR flushes at once); QP 0 to RESET takes
  // its own away.
  ibv_qp_attr reset{};
  reset.qp_state = IBV_QPS_RESET;
  ASSERT_EQ(ibv_modify_qp(l.qp[0], &reset, IBV_QP_STATE), 0);
  const auto wcs = poll_n(l.cq, 2);
  ASSERT_EQ(wcs.size(), 2u);
  for (const ibv_wc& wc : wcs) {
    EXPECT_EQ(wc.status, IBV_WC_WR_FLUSH_ERR);
    EXPECT_EQ(wc.qp_num, l.qp[1]->qp_num);
  }
  ibv_wc extra;
  EXPECT_EQ(ibv_poll_cq(l.cq, 1, &extra), 0);
  // Re-used from RESET, QP 0 sees only its new traffic.
  ASSERT_EQ(ibv_modify_qp(l.qp[1], &reset, IBV_QP_STATE), 0);
  ASSERT_TRUE(l.connect());
  EXPECT_TRUE(l.transfer(9));
  l.close();
}

TEST(VerbsApi, ResetRemovesAnIwarpQpsCompletions) {
  Loop l;
  ASSERT_TRUE(l.open(open_by_name("softiwarp0")));
  for (int i = 0; i < 3; ++i) ASSERT_EQ(l.post_recv(0, 100 + i, 0, 64), 0);
  ibv_qp_attr err{};
  err.qp_state = IBV_QPS_ERR;
  ASSERT_EQ(ibv_modify_qp(l.qp[0], &err, IBV_QP_STATE), 0);
  ibv_qp_attr reset{};
  reset.qp_state = IBV_QPS_RESET;
  ASSERT_EQ(ibv_modify_qp(l.qp[0], &reset, IBV_QP_STATE), 0);
  ibv_wc wc;
  EXPECT_EQ(ibv_poll_cq(l.cq, 1, &wc), 0);
  l.close();
}

// As mlx5 (which cleans its CQs when a QP is destroyed): a destroyed QP leaves no completion
// behind, the other QPs' stay. libfabric's rxm reads its CQ after closing an endpoint and
// would take them for the completions of a live one.
TEST(VerbsApi, DestroyRemovesTheQpsCompletionsOnly) {
  for (const char* name : {"softroce0", "softiwarp0"}) {
    Loop l;
    ASSERT_TRUE(l.open(open_by_name(name)));
    if (std::strcmp(name, "softroce0") == 0) {  // (iWARP QPs start in INIT)
      ASSERT_TRUE(l.connect());
    }
    for (int i = 0; i < 3; ++i) ASSERT_EQ(l.post_recv(0, 100 + i, 0, 64), 0);
    for (int i = 0; i < 2; ++i) ASSERT_EQ(l.post_recv(1, 200 + i, 0, 64), 0);
    ibv_qp_attr err{};
    err.qp_state = IBV_QPS_ERR;
    ASSERT_EQ(ibv_modify_qp(l.qp[0], &err, IBV_QP_STATE), 0);
    ASSERT_EQ(ibv_modify_qp(l.qp[1], &err, IBV_QP_STATE), 0);
    const std::uint32_t gone = l.qp[0]->qp_num, kept = l.qp[1]->qp_num;
    ASSERT_EQ(ibv_destroy_qp(l.qp[0]), 0);
    l.qp[0] = nullptr;
    const auto wcs = poll_n(l.cq, 2);
    ASSERT_EQ(wcs.size(), 2u) << name;
    for (const ibv_wc& wc : wcs) {
      EXPECT_EQ(wc.status, IBV_WC_WR_FLUSH_ERR) << name;
      EXPECT_EQ(wc.qp_num, kept) << name;
      EXPECT_NE(wc.qp_num, gone) << name;
    }
    ibv_wc extra;
    EXPECT_EQ(ibv_poll_cq(l.cq, 1, &extra), 0) << name;
    l.close();
  }
}

TEST(VerbsApi, IwarpQpsStartInInit) {
  ibv_context* ctx = open_by_name("softiwarp0");
  ASSERT_TRUE(ctx);
  Loop l;
  ASSERT_TRUE(l.open(ctx));
  ibv_qp_attr a{};
  ibv_qp_init_attr ia{};
  ASSERT_EQ(ibv_query_qp(l.qp[0], &a, IBV_QP_STATE, &ia), 0);
  EXPECT_EQ(a.qp_state, IBV_QPS_INIT);
  EXPECT_EQ(l.qp[0]->state, IBV_QPS_INIT);
  l.close();
}

// Waits for `pid` for up to 30 s (then kills it); its exit status, or -1.
int wait_child(pid_t pid) {
  int status = 0;
  if (wait_until([&] { return waitpid(pid, &status, WNOHANG) == pid; }, 30s, 10ms)) {
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  return -1;
}

TEST(VerbsApi, AForkedChildGetsADeviceOfItsOwn) {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  ASSERT_GT(n, 0);
  ibv_context* parent = ibv_open_device(list[0]);
  ASSERT_TRUE(parent);
  ibv_gid parent_gid;
  ASSERT_EQ(ibv_query_gid(parent, 1, 1, &parent_gid), 0);  // its address
  Loop mine;
  ASSERT_TRUE(mine.open(parent));
  ASSERT_TRUE(mine.connect());
  ASSERT_TRUE(mine.transfer(1));

  const pid_t pid = fork();
  if (pid == 0) {
    // The parent's objects stay the parent's ...
    errno = 0;
    if (ibv_alloc_pd(parent) != nullptr || errno != ENODEV) _exit(10);
    if (mine.post_recv(1, 1, 0, 8) != ENODEV) _exit(11);
    ibv_wc wc;
    if (ibv_poll_cq(mine.cq, 1, &wc) != -1) _exit(12);
    // ... and the device opened from the parent's list is the child's own: another address,
    // its own progress thread (a transfer completes).
    ibv_context* own = ibv_open_device(list[0]);
    if (!own) _exit(13);
    ibv_gid gid;
    if (ibv_query_gid(own, 1, 1, &gid) || std::memcmp(&gid, &parent_gid, sizeof gid) == 0) {
      _exit(14);
    }
    Loop l;
    if (!l.open(own) || !l.connect()) _exit(15);
    if (!l.transfer(2)) _exit(16);
    l.close();
    _exit(0);
  }
  ASSERT_GT(pid, 0);
  EXPECT_EQ(wait_child(pid), 0);
  // The parent's device works on after the child.
  EXPECT_TRUE(mine.transfer(5));
  mine.close();
  ibv_free_device_list(list);
}

TEST(VerbsApi, AChildOfAProcessThatNeverUsedVerbsIsUnaffected) {
  const pid_t pid = fork();
  if (pid == 0) {
    Loop l;
    if (!l.open(open_by_name("softroce0")) || !l.connect() || !l.transfer(4)) _exit(1);
    l.close();
    _exit(0);
  }
  ASSERT_GT(pid, 0);
  EXPECT_EQ(wait_child(pid), 0);
}

TEST(VerbsAbi, PathRecordsCopyEveryFieldBothWays) {
  ib_user_path_rec k{};
  for (int i = 0; i < 16; ++i) {
    k.dgid[i] = static_cast<__u8>(i + 1);
    k.sgid[i] = static_cast<__u8>(0x80 + i);
  }
  k.dlid = 0x1234;
  k.slid = 0x5678;
  k.raw_traffic = 1;
  k.flow_label = 0xABCDE;
  k.reversible = 1;
  k.mtu = 4;
  k.pkey = 0x8001;
  k.hop_limit = 63;
  k.traffic_class = 0x28;
  k.numb_path = 2;
  k.sl = 5;
  k.mtu_selector = 2;
  k.rate_selector = 1;
  k.rate = 7;
  k.packet_life_time_selector = 3;
  k.packet_life_time = 18;
  k.preference = 9;
  ibv_sa_path_rec v{};
  ibv_copy_path_rec_from_kern(&v, &k);
  EXPECT_EQ(v.dgid.raw[0], 1);
  EXPECT_EQ(v.sgid.raw[15], 0x8F);
  EXPECT_EQ(v.dlid, 0x1234);
  EXPECT_EQ(v.flow_label, 0xABCDEu);
  EXPECT_EQ(v.pkey, 0x8001);
  EXPECT_EQ(v.packet_life_time, 18);
  EXPECT_EQ(v.preference, 9);
  ib_user_path_rec back{};
  ibv_copy_path_rec_to_kern(&back, &v);
  EXPECT_EQ(std::memcmp(&back, &k, sizeof k), 0);
}

}  // namespace
