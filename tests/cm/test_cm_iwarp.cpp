// rdma_cm over iWARP with MPA revision 1 (SOFTRDMA_TRANSPORT=iwarp, SOFTRDMA_MPA=rev=1, set
// before the library starts), in one process: a revision 1 request carries no IRD/ORD, so the
// CONNECT_REQUEST offers the device's limits (as siw does) and a server accepting with
// rdma_accept(NULL), as rping does, can READ. Completions are waited for on completion
// channels (rdma_get_*_comp), as event-driven programs do.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include <cstdlib>
#include <cstring>
#include <random>

#include "helpers.h"

namespace {

// Before any rdma_cm / verbs call: the engine reads its settings on first use.
[[maybe_unused]] const int kEnv =
    (setenv("SOFTRDMA_TRANSPORT", "iwarp", 1), setenv("SOFTRDMA_MPA", "rev=1", 1), 0);

using softrdma::cm_test::loopback;

// MPA over TCP on a loaded machine: a wider wait than the helper's default.
rdma_cm_event* expect_event(rdma_event_channel* ch, rdma_cm_event_type type) {
  return softrdma::cm_test::expect_event(ch, type, true, 10000);
}

ibv_qp_init_attr qp_attr() {
  ibv_qp_init_attr a{};
  a.qp_type = IBV_QPT_RC;
  a.cap.max_send_wr = a.cap.max_recv_wr = 8;
  a.cap.max_send_sge = a.cap.max_recv_sge = 1;
  a.sq_sig_all = 1;
  return a;
}

TEST(CmIwarpRev1, AcceptWithoutParamsTakesTheOfferedDepthsAndReadsWork) {
  rdma_event_channel* sch = rdma_create_event_channel();
  rdma_event_channel* cch = rdma_create_event_channel();
  ASSERT_TRUE(sch && cch);
  rdma_cm_id *listener = nullptr, *client = nullptr;
  ASSERT_EQ(rdma_create_id(sch, &listener, nullptr, RDMA_PS_TCP), 0);
  ASSERT_EQ(rdma_create_id(cch, &client, nullptr, RDMA_PS_TCP), 0);
  std::mt19937 rng(std::random_device{}());
  std::uint16_t port = 0;
  for (int i = 0; i < 100 && !port; ++i) {
    const auto p = static_cast<std::uint16_t>(30000 + rng() % 9000);
    sockaddr_in a = loopback(p);
    if (rdma_bind_addr(listener, reinterpret_cast<sockaddr*>(&a)) == 0) port = p;
  }
  ASSERT_NE(port, 0);
  ASSERT_EQ(rdma_listen(listener, 4), 0);
  sockaddr_in dst = loopback(port);
  ASSERT_EQ(rdma_resolve_addr(client, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000), 0);
  rdma_ack_cm_event(expect_event(cch, RDMA_CM_EVENT_ADDR_RESOLVED));
  ASSERT_EQ(rdma_resolve_route(client, 2000), 0);
  rdma_ack_cm_event(expect_event(cch, RDMA_CM_EVENT_ROUTE_RESOLVED));
  ibv_device_attr da{};
  ASSERT_EQ(ibv_query_device(client->verbs, &da), 0);
  ASSERT_EQ(std::strcmp(ibv_get_device_name(client->verbs->device), "softiwarp0"), 0);

  ibv_qp_init_attr ca = qp_attr();
  ASSERT_EQ(rdma_create_qp(client, nullptr, &ca), 0);
  char cbuf[4096];
  for (std::size_t i = 0; i < sizeof cbuf; ++i) cbuf[i] = static_cast<char>(i * 7 + 3);
  ibv_mr* cmr =
      ibv_reg_mr(client->pd, cbuf, sizeof cbuf, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
  ASSERT_NE(cmr, nullptr);
  rdma_conn_param cp{};
  cp.responder_resources = 1;  // as rping's client
  cp.initiator_depth = 1;
  ASSERT_EQ(rdma_connect(client, &cp), 0);

  rdma_cm_event* req = expect_event(sch, RDMA_CM_EVENT_CONNECT_REQUEST);
  ASSERT_NE(req, nullptr);
  rdma_cm_id* child = req->id;
  // Revision 1 said nothing about IRD/ORD: the device's limits are offered, not 0.
  EXPECT_EQ(req->param.conn.responder_resources, std::min(da.max_qp_rd_atom, 255));
  EXPECT_EQ(req->param.conn.initiator_depth, std::min(da.max_qp_init_rd_atom, 255));
  rdma_ack_cm_event(req);
  ibv_qp_init_attr sa = qp_attr();
  ASSERT_EQ(rdma_create_qp(child, nullptr, &sa), 0);
  char sbuf[4096] = {};
  ibv_mr* smr = rdma_reg_msgs(child, sbuf, sizeof sbuf);
  ASSERT_NE(smr, nullptr);
  ASSERT_EQ(rdma_accept(child, nullptr), 0);  // as rping's server
  rdma_cm_event* est = expect_event(cch, RDMA_CM_EVENT_ESTABLISHED);
  ASSERT_NE(est, nullptr);
  // The revision 1 reply carries no IRD/ORD: the client reports its own (as siw does).
  EXPECT_EQ(est->param.conn.responder_resources, 1);
  EXPECT_EQ(est->param.conn.initiator_depth, 1);
  rdma_ack_cm_event(est);
  rdma_ack_cm_event(expect_event(sch, RDMA_CM_EVENT_ESTABLISHED));

  // The server READs the client's buffer and waits on its completion channel.
  ASSERT_EQ(rdma_post_read(child, nullptr, sbuf, sizeof sbuf, smr, IBV_SEND_SIGNALED,
                           reinterpret_cast<std::uintptr_t>(cbuf), cmr->rkey),
            0);
  ibv_wc wc{};
  ASSERT_EQ(rdma_get_send_comp(child, &wc), 1);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc.opcode, IBV_WC_RDMA_READ);
  EXPECT_EQ(std::memcmp(sbuf, cbuf, sizeof cbuf), 0);

  ASSERT_EQ(rdma_disconnect(client), 0);
  rdma_ack_cm_event(expect_event(sch, RDMA_CM_EVENT_DISCONNECTED));
  rdma_dereg_mr(smr);
  ibv_dereg_mr(cmr);
  rdma_destroy_ep(child);
  rdma_destroy_ep(client);
  rdma_destroy_id(listener);
  rdma_destroy_event_channel(sch);
  rdma_destroy_event_channel(cch);
}

}  // namespace
