// softiwarp0 through the drop-in libibverbs.so.1: listed after softroce0 with node type RNIC
// and transport iWARP, its PD/MR/CQ/QP calls served by the iWARP device, connected through
// softrdma_iwarp_cm() (the CM layer's interface) over loopback TCP, data moved with
// ibv_post_send / ibv_post_recv / ibv_poll_cq, events on the async fd.
#include <gtest/gtest.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "tests/tcp_pair.h"
#include "tests/verbs/verbs_helpers.h"
#include "tests/wait_until.h"
#include "verbs/iwarp_cm.h"

namespace {

using namespace std::chrono_literals;
using softrdma::test::wait_until;
using softrdma::verbs::test::one_sge_wr;
using softrdma::verbs::test::post_recv_sge;
using softrdma::verbs::test::post_wr;
using softrdma::verbs::test::rdma_wr;

ibv_context* open_by_name(const char* name, int* index) {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  ibv_context* ctx = nullptr;
  for (int i = 0; i < n; ++i) {
    if (std::strcmp(ibv_get_device_name(list[i]), name) == 0) {
      ctx = ibv_open_device(list[i]);
      if (index) *index = i;
    }
  }
  ibv_free_device_list(list);
  return ctx;
}

struct End {
  ibv_pd* pd = nullptr;
  ibv_cq* cq = nullptr;
  ibv_qp* qp = nullptr;
  ibv_mr* mr = nullptr;
  bool own_pd = true;
  std::vector<std::uint8_t> buf = std::vector<std::uint8_t>(1 << 20);
  void init(ibv_context* ctx, int cqe = 256, ibv_srq* srq = nullptr, ibv_pd* shared_pd = nullptr) {
    pd = shared_pd ? shared_pd : ibv_alloc_pd(ctx);
    own_pd = !shared_pd;
    cq = ibv_create_cq(ctx, cqe, nullptr, nullptr, 0);
    ibv_qp_init_attr a{};
    a.send_cq = cq;
    a.recv_cq = cq;
    a.srq = srq;
    a.qp_type = IBV_QPT_RC;
    a.cap.max_send_wr = 64;
    a.cap.max_recv_wr = 64;
    a.cap.max_send_sge = 1;
    a.cap.max_recv_sge = 1;
    qp = ibv_create_qp(pd, &a);
    mr = ibv_reg_mr(pd, buf.data(), buf.size(),
                    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
  }
  bool poll(ibv_wc& wc) {
    const auto end = std::chrono::steady_clock::now() + 10s;
    while (std::chrono::steady_clock::now() < end) {
      const int n = ibv_poll_cq(cq, 1, &wc);
      if (n == 1) return true;
      if (n < 0) return false;
    }
    return false;
  }
  void destroy() {
    if (qp) ibv_destroy_qp(qp);
    if (mr) ibv_dereg_mr(mr);
    if (cq) ibv_destroy_cq(cq);
    if (pd && own_pd) ibv_dealloc_pd(pd);
  }
};

// Connects a and b (INIT, then the MPA exchange over a loopback TCP pair) through the CM
// interface; whether both sides got there.
bool connect_pair(softrdma::verbs::IwarpCm* cm, ibv_context* ctx, End& a, End& b) {
  ibv_qp_attr init{};
  init.qp_state = IBV_QPS_INIT;
  if (ibv_modify_qp(a.qp, &init, IBV_QP_STATE) || ibv_modify_qp(b.qp, &init, IBV_QP_STATE)) {
    return false;
  }
  const softrdma::test::TcpPair tcp;
  if (tcp.server < 0) return false;
  std::atomic<int> req_err{-1}, acc{-1}, con{-1};
  softrdma::iwarp::MpaParams params;
  params.crc = true;
  params.private_data = {7, 7};
  const int r = cm->read_request(ctx, tcp.server, 5s, [&](const softrdma::iwarp::RequestResult& q) {
    if (q.error == 0 && q.request.private_data.size() == 2) {
      req_err = cm->accept(b.qp, tcp.server, params, [&](int e) { acc = e; });
    } else {
      req_err = q.error ? q.error : EPROTO;
      acc = req_err.load();
    }
  });
  const int c = cm->connect(a.qp, tcp.client, params, [&](const softrdma::iwarp::ConnectResult& x) {
    con = x.kind == softrdma::iwarp::ConnectResult::Kind::kAccepted ? 0 : 1;
  });
  if (r != 0 || c != 0) return false;
  wait_until([&] { return acc >= 0 && con >= 0; });
  return req_err == 0 && con == 0 && acc == 0;
}

// The next async event of ctx other than COMM_EST, within 5 s; false when none came.
bool next_event(ibv_context* ctx, ibv_async_event& ev) {
  for (;;) {
    pollfd pfd{ctx->async_fd, POLLIN, 0};
    if (::poll(&pfd, 1, 5000) != 1 || ibv_get_async_event(ctx, &ev) != 0) return false;
    if (ev.event_type != IBV_EVENT_COMM_EST) return true;
    ibv_ack_async_event(&ev);
  }
}

void post_send(End& from, std::size_t len, std::uint64_t id) {
  ibv_sge ss{reinterpret_cast<std::uintptr_t>(from.buf.data()), static_cast<std::uint32_t>(len),
             from.mr->lkey};
  ASSERT_EQ(post_wr(from.qp, one_sge_wr(IBV_WR_SEND, &ss, id)), 0);
}

TEST(VerbsIwarp, DeviceIsListedAfterSoftroceAsAnRnic) {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  ASSERT_EQ(n, 2);
  EXPECT_STREQ(ibv_get_device_name(list[0]), "softroce0");
  EXPECT_STREQ(ibv_get_device_name(list[1]), "softiwarp0");
  EXPECT_EQ(list[1]->node_type, IBV_NODE_RNIC);
  EXPECT_EQ(list[1]->transport_type, IBV_TRANSPORT_IWARP);
  EXPECT_EQ(list[0]->transport_type, IBV_TRANSPORT_IB);
  ibv_free_device_list(list);
  ibv_context* ctx = open_by_name("softiwarp0", nullptr);
  ASSERT_TRUE(ctx);
  ibv_device_attr da{};
  ASSERT_EQ(ibv_query_device(ctx, &da), 0);
  EXPECT_EQ(da.atomic_cap, IBV_ATOMIC_NONE);
  EXPECT_EQ(da.max_sge_rd, 1);
  ibv_port_attr pa{};
  ASSERT_EQ(ibv_query_port(ctx, 1, &pa), 0);
  EXPECT_EQ(pa.link_layer, IBV_LINK_LAYER_ETHERNET);
  EXPECT_EQ(pa.gid_tbl_len, 1);
  ibv_gid gid{};
  ASSERT_EQ(ibv_query_gid(ctx, 1, 0, &gid), 0);
  EXPECT_EQ(gid.raw[0], 0x02);  // the locally administered MAC
  EXPECT_NE(ibv_query_gid(ctx, 1, 1, &gid), 0);
  // The node GUID is the MAC, as the GID shows it.
  EXPECT_EQ(std::memcmp(&da.node_guid, gid.raw, 6), 0);
  // UD: not iWARP.
  ibv_pd* pd = ibv_alloc_pd(ctx);
  ibv_cq* cq = ibv_create_cq(ctx, 8, nullptr, nullptr, 0);
  ibv_qp_init_attr a{};
  a.send_cq = a.recv_cq = cq;
  a.qp_type = IBV_QPT_UD;
  a.cap = {4, 4, 1, 1, 0};
  errno = 0;
  EXPECT_EQ(ibv_create_qp(pd, &a), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
  ibv_ah_attr ah{};
  EXPECT_EQ(ibv_create_ah(pd, &ah), nullptr);
  EXPECT_EQ(ibv_destroy_cq(cq), 0);
  EXPECT_EQ(ibv_dealloc_pd(pd), 0);
  EXPECT_EQ(ibv_close_device(ctx), 0);
}

TEST(VerbsIwarp, ConnectThroughTheCmInterfaceAndMoveData) {
  softrdma::verbs::IwarpCm* cm = softrdma_iwarp_cm();
  ASSERT_TRUE(cm);
  ibv_context* ctx = open_by_name("softiwarp0", nullptr);
  ibv_context* roce = open_by_name("softroce0", nullptr);
  ASSERT_TRUE(ctx && roce);
  EXPECT_TRUE(cm->is_iwarp(ctx));
  EXPECT_FALSE(cm->is_iwarp(roce));
  End a, b;
  a.init(ctx);
  b.init(ctx);
  ASSERT_TRUE(a.qp && b.qp && a.mr && b.mr);
  EXPECT_EQ(a.qp->state, IBV_QPS_INIT);  // iWARP QPs start in INIT (siw: IDLE)
  {
    ibv_qp_attr q{};
    ibv_qp_init_attr qi{};
    ASSERT_EQ(ibv_query_qp(a.qp, &q, IBV_QP_STATE, &qi), 0);
    EXPECT_EQ(q.qp_state, IBV_QPS_INIT);
  }
  ibv_qp_attr rts{};
  rts.qp_state = IBV_QPS_RTS;
  EXPECT_EQ(ibv_modify_qp(a.qp, &rts, IBV_QP_STATE), EINVAL);  // only the CM gets there

  std::atomic<int> disconnected{0};
  cm->set_event_handler(b.qp, [&](const softrdma::iwarp::QpEvent& e) {
    if (e.kind == softrdma::iwarp::QpEvent::Kind::kDisconnected) ++disconnected;
  });
  ASSERT_TRUE(connect_pair(cm, ctx, a, b));
  ibv_qp_attr qa{};
  ibv_qp_init_attr qi{};
  ASSERT_EQ(ibv_query_qp(a.qp, &qa, IBV_QP_STATE, &qi), 0);
  EXPECT_EQ(qa.qp_state, IBV_QPS_RTS);
  // The established QP shows up on the async fd as COMM_EST.
  pollfd pfd{ctx->async_fd, POLLIN, 0};
  ASSERT_EQ(::poll(&pfd, 1, 5000), 1);
  ibv_async_event ev{};
  ASSERT_EQ(ibv_get_async_event(ctx, &ev), 0);
  EXPECT_EQ(ev.event_type, IBV_EVENT_COMM_EST);
  ibv_ack_async_event(&ev);

  // WRITE then SEND, through the verbs data path.
  for (std::size_t i = 0; i < 100000; ++i) a.buf[i] = static_cast<std::uint8_t>(i * 3);
  ibv_sge rs{reinterpret_cast<std::uintptr_t>(b.buf.data()) + 500000, 64, b.mr->lkey};
  ASSERT_EQ(post_recv_sge(b.qp, &rs, 9), 0);
  ibv_sge ws{reinterpret_cast<std::uintptr_t>(a.buf.data()), 100000, a.mr->lkey};
  ibv_send_wr w = rdma_wr(IBV_WR_RDMA_WRITE, &ws, reinterpret_cast<std::uintptr_t>(b.buf.data()),
                          b.mr->rkey, 1);
  ibv_sge ss{reinterpret_cast<std::uintptr_t>(a.buf.data()), 10, a.mr->lkey};
  ibv_send_wr s = one_sge_wr(IBV_WR_SEND, &ss, 2);
  w.next = &s;
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(a.qp, &w, &bad), 0);
  // Immediate data is not iWARP.
  ibv_send_wr imm = s;
  imm.next = nullptr;
  imm.opcode = IBV_WR_SEND_WITH_IMM;
  EXPECT_EQ(ibv_post_send(a.qp, &imm, &bad), EOPNOTSUPP);
  int sends = 0, recvs = 0;
  while (sends < 2 || recvs < 1) {
    ibv_wc wc{};
    ASSERT_TRUE(a.poll(wc));  // both QPs share the context; each polls its own CQ
    ASSERT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
    ++sends;
    if (sends == 2) {
      ibv_wc rc{};
      ASSERT_TRUE(b.poll(rc));
      EXPECT_EQ(rc.status, IBV_WC_SUCCESS);
      EXPECT_EQ(rc.opcode, IBV_WC_RECV);
      EXPECT_EQ(rc.byte_len, 10u);
      EXPECT_EQ(rc.wr_id, 9u);
      ++recvs;
    }
  }
  EXPECT_TRUE(std::equal(a.buf.begin(), a.buf.begin() + 100000, b.buf.begin()));
  EXPECT_EQ(b.buf[500000], a.buf[0]);

  ASSERT_EQ(cm->disconnect(a.qp), 0);
  wait_until([&] { return disconnected != 0; });
  EXPECT_EQ(disconnected.load(), 1);
  EXPECT_EQ(b.qp->state, IBV_QPS_ERR);
  a.destroy();
  b.destroy();
  ibv_close_device(ctx);
  ibv_close_device(roce);
}

// A CQ that overflows and an SRQ that falls below its limit are reported on the async fd, as
// softroce0 reports them (IBV_EVENT_CQ_ERR, IBV_EVENT_SRQ_LIMIT_REACHED).
TEST(VerbsIwarp, CqOverflowAndSrqLimitAreAsyncEvents) {
  softrdma::verbs::IwarpCm* cm = softrdma_iwarp_cm();
  ASSERT_TRUE(cm);
  ibv_context* ctx = open_by_name("softiwarp0", nullptr);
  ASSERT_TRUE(ctx);
  ibv_pd* pd = ibv_alloc_pd(ctx);
  ibv_srq_init_attr sa{};
  sa.attr.max_wr = 16;
  sa.attr.max_sge = 1;
  ibv_srq* srq = ibv_create_srq(pd, &sa);
  ASSERT_TRUE(srq);
  End a, b;
  a.init(ctx, 256, nullptr, pd);
  b.init(ctx, 1, srq, pd);  // b's CQ holds one completion (or what the device rounds it up to)
  ASSERT_TRUE(a.qp && b.qp && a.mr && b.mr);
  ASSERT_TRUE(connect_pair(cm, ctx, a, b));

  // The SRQ holds 8 receives and is armed at 6: the third message takes it below.
  for (std::uint64_t i = 0; i < 8; ++i) {
    ibv_sge rs{reinterpret_cast<std::uintptr_t>(b.buf.data()) + i * 64, 64, b.mr->lkey};
    ibv_recv_wr r{};
    r.wr_id = i;
    r.sg_list = &rs;
    r.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    ASSERT_EQ(ibv_post_srq_recv(srq, &r, &bad), 0);
  }
  ibv_srq_attr limit{};
  limit.srq_limit = 6;
  ASSERT_EQ(ibv_modify_srq(srq, &limit, IBV_SRQ_LIMIT), 0);
  const int depth = b.cq->cqe;
  ASSERT_LT(depth, 8);
  for (int i = 0; i < 8; ++i) post_send(a, 8, static_cast<std::uint64_t>(i));
  int sent = 0;
  while (sent < 8) {
    ibv_wc wc{};
    ASSERT_TRUE(a.poll(wc));
    ASSERT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
    ++sent;
  }
  // b never polled: 8 receive completions into a CQ of `depth`.
  bool cq_err = false, srq_limit = false;
  ibv_async_event ev{};
  while ((!cq_err || !srq_limit) && next_event(ctx, ev)) {
    if (ev.event_type == IBV_EVENT_CQ_ERR) {
      EXPECT_EQ(ev.element.cq, b.cq);
      cq_err = true;
    } else if (ev.event_type == IBV_EVENT_SRQ_LIMIT_REACHED) {
      EXPECT_EQ(ev.element.srq, srq);
      srq_limit = true;
    }
    ibv_ack_async_event(&ev);
  }
  EXPECT_TRUE(cq_err);
  EXPECT_TRUE(srq_limit);
  cm->abort(a.qp);
  a.destroy();
  b.destroy();
  ibv_destroy_srq(srq);
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
}

}  // namespace
