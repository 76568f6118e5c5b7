// The rdma_cm API of softrdma's librdmacm.so.1, exercised in one process (the process's
// CM agent talks to itself over the wire: REQ, REP, RTU... go out on UDP 4791 and come
// back): events and their parameters, private data, rejection, sync ids, addresses.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>
#include <memory>
#include <random>
#include <string>
#include <thread>

#include "../wait_until.h"
#include "helpers.h"

namespace {

using softrdma::cm_test::expect_event;
using softrdma::cm_test::loopback;
using softrdma::cm_test::next_event;

// Binds `id` to 127.0.0.1 on a free port of the 20000s; returns the port.
std::uint16_t bind_free(rdma_cm_id* id) {
  static std::mt19937 rng(std::random_device{}());
  for (int i = 0; i < 100; ++i) {
    auto port = static_cast<std::uint16_t>(20000 + rng() % 9000);
    sockaddr_in a = loopback(port);
    if (rdma_bind_addr(id, reinterpret_cast<sockaddr*>(&a)) == 0) return port;
  }
  ADD_FAILURE() << "no free port";
  return 0;
}

ibv_qp_init_attr qp_attr(ibv_qp_type type = IBV_QPT_RC) {
  ibv_qp_init_attr a{};
  a.qp_type = type;
  a.cap.max_send_wr = a.cap.max_recv_wr = 8;
  a.cap.max_send_sge = a.cap.max_recv_sge = 1;
  a.cap.max_inline_data = 64;
  a.sq_sig_all = 1;
  return a;
}

struct Pair {
  rdma_event_channel* sch = rdma_create_event_channel();
  rdma_event_channel* cch = rdma_create_event_channel();
  rdma_cm_id* listener = nullptr;
  rdma_cm_id* client = nullptr;
  rdma_cm_id* child = nullptr;
  std::uint16_t port = 0;
  explicit Pair(rdma_port_space ps = RDMA_PS_TCP) {
    EXPECT_EQ(rdma_create_id(sch, &listener, nullptr, ps), 0);
    EXPECT_EQ(rdma_create_id(cch, &client, nullptr, ps), 0);
    port = bind_free(listener);
    EXPECT_EQ(rdma_listen(listener, 4), 0);
  }
  void resolve() {
    sockaddr_in dst = loopback(port);
    ASSERT_EQ(rdma_resolve_addr(client, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000), 0);
    expect_event(cch, RDMA_CM_EVENT_ADDR_RESOLVED);
    ASSERT_EQ(rdma_resolve_route(client, 2000), 0);
    expect_event(cch, RDMA_CM_EVENT_ROUTE_RESOLVED);
  }
  // A SEND of `text` (inline) from the client lands whole in the child's receive; the
  // receive's completion.
  ibv_wc send_to_child(const char* text) {
    char rbuf[64] = {}, sbuf[64] = {};
    std::strncpy(sbuf, text, sizeof sbuf - 1);
    ibv_wc wc{};
    ibv_mr* rmr = rdma_reg_msgs(child, rbuf, sizeof rbuf);
    EXPECT_NE(rmr, nullptr);
    if (!rmr) return wc;
    EXPECT_EQ(rdma_post_recv(child, nullptr, rbuf, sizeof rbuf, rmr), 0);
    EXPECT_EQ(rdma_post_send(client, nullptr, sbuf, sizeof sbuf, nullptr, IBV_SEND_INLINE), 0);
    EXPECT_EQ(rdma_get_recv_comp(child, &wc), 1);
    EXPECT_STREQ(rbuf, sbuf);
    rdma_dereg_mr(rmr);
    return wc;
  }
  ~Pair() {
    if (child) rdma_destroy_ep(child);
    if (client) rdma_destroy_ep(client);
    if (listener) rdma_destroy_id(listener);
    rdma_destroy_event_channel(sch);
    rdma_destroy_event_channel(cch);
  }
};

}  // namespace

TEST(CmApi, NonBlockingChannelSaysEagain) {
  rdma_event_channel* ch = rdma_create_event_channel();
  ASSERT_NE(ch, nullptr);
  fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK);
  rdma_cm_event* ev = nullptr;
  EXPECT_EQ(rdma_get_cm_event(ch, &ev), -1);
  EXPECT_EQ(errno, EAGAIN);
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP), 0);
  sockaddr_in dst = loopback(9);
  ASSERT_EQ(rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000), 0);
  pollfd p{ch->fd, POLLIN, 0};
  ASSERT_EQ(poll(&p, 1, 2000), 1);  // the fd became readable
  ASSERT_EQ(rdma_get_cm_event(ch, &ev), 0);
  EXPECT_EQ(ev->event, RDMA_CM_EVENT_ADDR_RESOLVED);
  EXPECT_EQ(ev->id, id);
  EXPECT_NE(id->verbs, nullptr);
  rdma_ack_cm_event(ev);
  EXPECT_EQ(rdma_get_cm_event(ch, &ev), -1);
  EXPECT_EQ(errno, EAGAIN);
  rdma_destroy_id(id);
  rdma_destroy_event_channel(ch);
}

TEST(CmApi, ConnectAcceptCarriesPrivateDataAndConnectsTheQps) {
  Pair p;
  p.resolve();
  ibv_qp_init_attr ca = qp_attr();
  ASSERT_EQ(rdma_create_qp(p.client, nullptr, &ca), 0);
  EXPECT_NE(p.client->send_cq_channel, nullptr);  // created for the rdma_get_*_comp helpers
  EXPECT_NE(p.client->recv_cq, nullptr);
  const char hello[] = "hello from the active side";
  rdma_conn_param cp{};
  cp.private_data = hello;
  cp.private_data_len = sizeof hello;
  cp.responder_resources = 3;
  cp.initiator_depth = 2;
  cp.retry_count = 5;
  cp.rnr_retry_count = 6;
  ASSERT_EQ(rdma_connect(p.client, &cp), 0);

  rdma_cm_event* req = expect_event(p.sch, RDMA_CM_EVENT_CONNECT_REQUEST, true);
  ASSERT_NE(req, nullptr);
  EXPECT_EQ(req->listen_id, p.listener);
  p.child = req->id;
  ASSERT_GE(req->param.conn.private_data_len, sizeof hello);
  EXPECT_EQ(std::memcmp(req->param.conn.private_data, hello, sizeof hello), 0);
  EXPECT_EQ(req->param.conn.responder_resources, 2);  // the peer's initiator depth
  EXPECT_EQ(req->param.conn.initiator_depth, 3);
  EXPECT_EQ(req->param.conn.retry_count, 5);
  EXPECT_EQ(req->param.conn.rnr_retry_count, 6);
  EXPECT_EQ(req->param.conn.qp_num, p.client->qp->qp_num);
  auto* peer = reinterpret_cast<sockaddr_in*>(rdma_get_peer_addr(p.child));
  EXPECT_EQ(peer->sin_family, AF_INET);
  EXPECT_EQ(ntohs(rdma_get_src_port(p.child)), p.port);
  rdma_ack_cm_event(req);

  // What rdma_init_qp_attr gives for the passive side's QP.
  ibv_qp_attr qa{};
  int mask = 0;
  qa.qp_state = IBV_QPS_INIT;
  ASSERT_EQ(rdma_init_qp_attr(p.child, &qa, &mask), 0);
  EXPECT_TRUE(qa.qp_access_flags & IBV_ACCESS_REMOTE_READ);
  qa.qp_state = IBV_QPS_RTR;
  ASSERT_EQ(rdma_init_qp_attr(p.child, &qa, &mask), 0);
  EXPECT_EQ(qa.dest_qp_num, p.client->qp->qp_num);
  EXPECT_TRUE(mask & IBV_QP_AV);
  EXPECT_EQ(qa.ah_attr.is_global, 1);
  EXPECT_EQ(qa.max_dest_rd_atomic, 2);

  ibv_qp_init_attr sa = qp_attr();
  ASSERT_EQ(rdma_create_qp(p.child, nullptr, &sa), 0);
  const char world[] = "world";
  rdma_conn_param ap{};
  ap.private_data = world;
  ap.private_data_len = sizeof world;
  ap.responder_resources = 2;
  ap.initiator_depth = 3;
  ASSERT_EQ(rdma_accept(p.child, &ap), 0);

  rdma_cm_event* est = expect_event(p.cch, RDMA_CM_EVENT_ESTABLISHED, true);
  ASSERT_NE(est, nullptr);
  EXPECT_EQ(std::memcmp(est->param.conn.private_data, world, sizeof world), 0);
  rdma_ack_cm_event(est);
  expect_event(p.sch, RDMA_CM_EVENT_ESTABLISHED);

  // The QPs are connected: a SEND from the client lands in the child's receive.
  ibv_wc wc = p.send_to_child("through the connected QPs");
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  ASSERT_EQ(rdma_get_send_comp(p.client, &wc), 1);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);

  // Disconnect: both sides hear of it; the active side's QP goes to the error state.
  ASSERT_EQ(rdma_disconnect(p.client), 0);
  expect_event(p.cch, RDMA_CM_EVENT_DISCONNECTED);
  expect_event(p.sch, RDMA_CM_EVENT_DISCONNECTED);
  ibv_qp_attr now{};
  ibv_qp_init_attr init{};
  ASSERT_EQ(ibv_query_qp(p.client->qp, &now, IBV_QP_STATE, &init), 0);
  EXPECT_EQ(now.qp_state, IBV_QPS_ERR);
  expect_event(p.cch, RDMA_CM_EVENT_TIMEWAIT_EXIT);
}

TEST(CmApi, RejectCarriesReasonAndPrivateData) {
  Pair p;
  p.resolve();
  rdma_conn_param cp{};
  cp.qp_num = 0x123;  // no QP on the id: the application's own number
  ASSERT_EQ(rdma_connect(p.client, &cp), 0);
  rdma_cm_event* req = expect_event(p.sch, RDMA_CM_EVENT_CONNECT_REQUEST, true);
  ASSERT_NE(req, nullptr);
  EXPECT_EQ(req->param.conn.qp_num, 0x123u);
  rdma_cm_id* child = req->id;
  rdma_ack_cm_event(req);
  const char nope[] = "not today";
  ASSERT_EQ(rdma_reject(child, nope, sizeof nope), 0);
  rdma_cm_event* rej = expect_event(p.cch, RDMA_CM_EVENT_REJECTED, true);
  ASSERT_NE(rej, nullptr);
  EXPECT_EQ(rej->status, 28);  // IB_CM_REJ_CONSUMER_DEFINED
  EXPECT_EQ(std::memcmp(rej->param.conn.private_data, nope, sizeof nope), 0);
  rdma_ack_cm_event(rej);
  rdma_destroy_id(child);
}

TEST(CmApi, NobodyListeningIsRejectedAtOnce) {
  rdma_event_channel* ch = rdma_create_event_channel();
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP), 0);
  rdma_cm_id* probe = nullptr;  // find a port nobody holds: bind it, then let it go
  ASSERT_EQ(rdma_create_id(ch, &probe, nullptr, RDMA_PS_TCP), 0);
  const std::uint16_t port = bind_free(probe);
  rdma_destroy_id(probe);
  sockaddr_in dst = loopback(port);
  ASSERT_EQ(rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000), 0);
  expect_event(ch, RDMA_CM_EVENT_ADDR_RESOLVED);
  ASSERT_EQ(rdma_resolve_route(id, 2000), 0);
  expect_event(ch, RDMA_CM_EVENT_ROUTE_RESOLVED);
  rdma_conn_param cp{};
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(rdma_connect(id, &cp), 0);
  rdma_cm_event* ev = expect_event(ch, RDMA_CM_EVENT_REJECTED, true);
  ASSERT_NE(ev, nullptr);
  EXPECT_EQ(ev->status, 8);  // IB_CM_REJ_INVALID_SERVICE_ID
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
  rdma_ack_cm_event(ev);
  rdma_destroy_id(id);
  rdma_destroy_event_channel(ch);
}

TEST(CmApi, AddressesInUseAndReuse) {
  rdma_event_channel* ch = rdma_create_event_channel();
  rdma_cm_id *a = nullptr, *b = nullptr, *w = nullptr;
  ASSERT_EQ(rdma_create_id(ch, &a, nullptr, RDMA_PS_TCP), 0);
  ASSERT_EQ(rdma_create_id(ch, &b, nullptr, RDMA_PS_TCP), 0);
  ASSERT_EQ(rdma_create_id(ch, &w, nullptr, RDMA_PS_TCP), 0);
  const std::uint16_t port = bind_free(a);
  sockaddr_in same = loopback(port);
  EXPECT_EQ(rdma_bind_addr(b, reinterpret_cast<sockaddr*>(&same)), -1);
  EXPECT_EQ(errno, EADDRINUSE);
  sockaddr_in any{};
  any.sin_family = AF_INET;
  any.sin_port = htons(port);
  EXPECT_EQ(rdma_bind_addr(w, reinterpret_cast<sockaddr*>(&any)), -1);  // overlaps 127.0.0.1
  EXPECT_EQ(errno, EADDRINUSE);
  // Another port space is another namespace of ports.
  rdma_cm_id* u = nullptr;
  ASSERT_EQ(rdma_create_id(ch, &u, nullptr, RDMA_PS_UDP), 0);
  EXPECT_EQ(rdma_bind_addr(u, reinterpret_cast<sockaddr*>(&same)), 0);
  rdma_destroy_id(a);  // the port is free again at once
  EXPECT_EQ(rdma_bind_addr(b, reinterpret_cast<sockaddr*>(&same)), 0);
  sockaddr_in elsewhere{};
  elsewhere.sin_family = AF_INET;
  inet_pton(AF_INET, "192.0.2.77", &elsewhere.sin_addr);  // TEST-NET-1: not ours
  EXPECT_EQ(rdma_bind_addr(w, reinterpret_cast<sockaddr*>(&elsewhere)), -1);
  EXPECT_EQ(errno, EADDRNOTAVAIL);
  rdma_destroy_id(b);
  rdma_destroy_id(w);
  rdma_destroy_id(u);
  rdma_destroy_event_channel(ch);
}

TEST(CmApi, BadCallsFailCleanly) {
  Pair p;
  rdma_conn_param cp{};
  EXPECT_EQ(rdma_connect(p.client, &cp), -1);  // not resolved
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(rdma_resolve_route(p.client, 100), -1);
  EXPECT_EQ(rdma_accept(p.client, &cp), -1);
  EXPECT_EQ(rdma_disconnect(p.client), -1);
  p.resolve();
  char big[100] = {};
  cp.private_data = big;
  cp.private_data_len = 57;  // 92 bytes of REQ private data minus the 36-byte IP CM header
  EXPECT_EQ(rdma_connect(p.client, &cp), -1);
  EXPECT_EQ(errno, EINVAL);
  int optval = 1;
  EXPECT_EQ(rdma_set_option(p.client, 99, 0, &optval, sizeof optval), -1);
  std::uint8_t tos = 0x20;
  EXPECT_EQ(rdma_set_option(p.client, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &tos, 1), 0);
  ibv_qp_attr qa{};
  int mask = 0;
  qa.qp_state = IBV_QPS_RTR;  // not connected yet
  EXPECT_EQ(rdma_init_qp_attr(p.client, &qa, &mask), -1);
}

TEST(CmApi, SyncIdsThroughCreateEpAndGetRequest) {
  rdma_addrinfo hints{}, *sres = nullptr, *cres = nullptr;
  hints.ai_flags = RAI_PASSIVE;
  hints.ai_port_space = RDMA_PS_TCP;
  // A free port: bind one, note it, give it back.
  rdma_cm_id* probe = nullptr;
  ASSERT_EQ(rdma_create_id(nullptr, &probe, nullptr, RDMA_PS_TCP), 0);
  const std::string port = std::to_string(bind_free(probe));
  rdma_destroy_id(probe);
  ASSERT_EQ(rdma_getaddrinfo("127.0.0.1", port.c_str(), &hints, &sres), 0);
  ibv_qp_init_attr attr = qp_attr();
  rdma_cm_id* listen_id = nullptr;
  ASSERT_EQ(rdma_create_ep(&listen_id, sres, nullptr, &attr), 0);
  ASSERT_EQ(rdma_listen(listen_id, 1), 0);

  std::thread client([&] {
    rdma_addrinfo h{};
    h.ai_port_space = RDMA_PS_TCP;
    ASSERT_EQ(rdma_getaddrinfo("127.0.0.1", port.c_str(), &h, &cres), 0);
    ibv_qp_init_attr a = qp_attr();
    rdma_cm_id* id = nullptr;
    ASSERT_EQ(rdma_create_ep(&id, cres, nullptr, &a), 0);
    ASSERT_NE(id->qp, nullptr);
    EXPECT_EQ(rdma_connect(id, nullptr), 0);  // blocks until ESTABLISHED
    EXPECT_EQ(rdma_disconnect(id), 0);        // blocks until DISCONNECTED
    rdma_destroy_ep(id);
  });
  rdma_cm_id* conn = nullptr;
  ASSERT_EQ(rdma_get_request(listen_id, &conn), 0) << strerror(errno);
  ASSERT_NE(conn->qp, nullptr);  // created from rdma_create_ep's attributes
  EXPECT_EQ(conn->qp->qp_type, IBV_QPT_RC);
  EXPECT_EQ(rdma_accept(conn, nullptr), 0);  // blocks until ESTABLISHED
  client.join();
  EXPECT_EQ(rdma_disconnect(conn), 0);  // the peer's DREQ came first: its event is read here
  rdma_destroy_ep(conn);
  rdma_destroy_ep(listen_id);
  rdma_freeaddrinfo(sres);
  rdma_freeaddrinfo(cres);
}

TEST(CmApi, UdServiceIdResolution) {
  Pair p(RDMA_PS_UDP);
  p.resolve();
  ibv_qp_init_attr ca = qp_attr(IBV_QPT_UD);
  ASSERT_EQ(rdma_create_qp(p.client, nullptr, &ca), 0);
  const char pdata[] = "sidr";
  rdma_conn_param cp{};
  cp.private_data = pdata;
  cp.private_data_len = sizeof pdata;
  ASSERT_EQ(rdma_connect(p.client, &cp), 0);
  rdma_cm_event* req = expect_event(p.sch, RDMA_CM_EVENT_CONNECT_REQUEST, true);
  ASSERT_NE(req, nullptr);
  EXPECT_EQ(std::memcmp(req->param.ud.private_data, pdata, sizeof pdata), 0);
  p.child = req->id;
  rdma_ack_cm_event(req);
  ibv_qp_init_attr sa = qp_attr(IBV_QPT_UD);
  ASSERT_EQ(rdma_create_qp(p.child, nullptr, &sa), 0);
  ASSERT_EQ(rdma_accept(p.child, nullptr), 0);
  rdma_cm_event* est = expect_event(p.cch, RDMA_CM_EVENT_ESTABLISHED, true);
  ASSERT_NE(est, nullptr);
  EXPECT_EQ(est->param.ud.qp_num, p.child->qp->qp_num);
  EXPECT_EQ(est->param.ud.qkey, static_cast<std::uint32_t>(RDMA_UDP_QKEY));
  EXPECT_EQ(est->param.ud.ah_attr.is_global, 1);
  rdma_ack_cm_event(est);
}

TEST(CmApi, MulticastJoinGivesTheGroupAddress) {
  rdma_event_channel* ch = rdma_create_event_channel();
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(ch, &id, nullptr, RDMA_PS_UDP), 0);
  sockaddr_in grp{};
  grp.sin_family = AF_INET;
  inet_pton(AF_INET, "239.77.1.2", &grp.sin_addr);
  ASSERT_EQ(rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&grp), 2000), 0);
  expect_event(ch, RDMA_CM_EVENT_ADDR_RESOLVED);
  ibv_qp_init_attr a = qp_attr(IBV_QPT_UD);
  ASSERT_EQ(rdma_create_qp(id, nullptr, &a), 0);
  int ctx = 42;
  ASSERT_EQ(rdma_join_multicast(id, reinterpret_cast<sockaddr*>(&grp), &ctx), 0);
  rdma_cm_event* ev = expect_event(ch, RDMA_CM_EVENT_MULTICAST_JOIN, true);
  ASSERT_NE(ev, nullptr);
  EXPECT_EQ(ev->param.ud.private_data, &ctx);
  EXPECT_EQ(ev->param.ud.qp_num, 0xFFFFFFu);
  EXPECT_EQ(ev->param.ud.qkey, static_cast<std::uint32_t>(RDMA_UDP_QKEY));
  EXPECT_EQ(ev->param.ud.ah_attr.grh.dgid.raw[10], 0xFF);
  EXPECT_EQ(ev->param.ud.ah_attr.grh.dgid.raw[12], 239);
  rdma_ack_cm_event(ev);
  EXPECT_EQ(rdma_leave_multicast(id, reinterpret_cast<sockaddr*>(&grp)), 0);
  EXPECT_EQ(rdma_leave_multicast(id, reinterpret_cast<sockaddr*>(&grp)), -1);
  rdma_destroy_ep(id);
  rdma_destroy_event_channel(ch);
}

TEST(CmApi, DevicesAndEventNames) {
  int n = 0;
  ibv_context** list = rdma_get_devices(&n);
  ASSERT_NE(list, nullptr);
  EXPECT_EQ(n, 1);
  EXPECT_STREQ(ibv_get_device_name(list[0]->device), "softroce0");
  EXPECT_EQ(list[n], nullptr);
  rdma_free_devices(list);
  EXPECT_STREQ(rdma_event_str(RDMA_CM_EVENT_TIMEWAIT_EXIT), "RDMA_CM_EVENT_TIMEWAIT_EXIT");
}

// As rdma-core: with neither node nor service, rdma_getaddrinfo takes the addresses, QP
// type and port space from the hints (libfabric's verbs provider resolves its endpoints so).
TEST(CmApi, GetaddrinfoWithoutNodeOrServiceTakesTheHintsAddresses) {
  rdma_addrinfo* res = nullptr;
  EXPECT_EQ(rdma_getaddrinfo(nullptr, nullptr, nullptr, &res), -1);
  EXPECT_EQ(errno, EINVAL);

  Pair p;  // a listener, so that the endpoint made from the answer resolves to it
  sockaddr_in dst = loopback(p.port), src = loopback(0);
  rdma_addrinfo hints{};
  hints.ai_qp_type = IBV_QPT_RC;
  hints.ai_port_space = RDMA_PS_TCP;
  hints.ai_dst_addr = reinterpret_cast<sockaddr*>(&dst);
  hints.ai_dst_len = sizeof dst;
  hints.ai_src_addr = reinterpret_cast<sockaddr*>(&src);
  hints.ai_src_len = sizeof src;
  ASSERT_EQ(rdma_getaddrinfo(nullptr, nullptr, &hints, &res), 0) << strerror(errno);
  ASSERT_NE(res, nullptr);
  EXPECT_EQ(res->ai_qp_type, IBV_QPT_RC);
  EXPECT_EQ(res->ai_port_space, RDMA_PS_TCP);
  EXPECT_EQ(res->ai_family, AF_INET);
  EXPECT_FALSE(res->ai_flags & RAI_PASSIVE);
  ASSERT_EQ(res->ai_dst_len, sizeof dst);
  ASSERT_EQ(res->ai_src_len, sizeof src);
  EXPECT_EQ(std::memcmp(res->ai_dst_addr, &dst, sizeof dst), 0);
  EXPECT_EQ(std::memcmp(res->ai_src_addr, &src, sizeof src), 0);
  EXPECT_NE(res->ai_dst_addr, hints.ai_dst_addr);  // copies, freed by rdma_freeaddrinfo
  EXPECT_EQ(res->ai_next, nullptr);
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_ep(&id, res, nullptr, nullptr), 0) << strerror(errno);
  EXPECT_EQ(rdma_get_dst_port(id), htons(p.port));
  rdma_destroy_ep(id);
  rdma_freeaddrinfo(res);

  // Passive, the source address alone (the provider's listening endpoint).
  rdma_addrinfo passive{};
  passive.ai_flags = RAI_PASSIVE;
  passive.ai_port_space = RDMA_PS_TCP;
  passive.ai_src_addr = reinterpret_cast<sockaddr*>(&src);
  passive.ai_src_len = sizeof src;
  ASSERT_EQ(rdma_getaddrinfo(nullptr, nullptr, &passive, &res), 0) << strerror(errno);
  EXPECT_TRUE(res->ai_flags & RAI_PASSIVE);
  EXPECT_EQ(res->ai_dst_addr, nullptr);
  ASSERT_EQ(res->ai_src_len, sizeof src);
  EXPECT_EQ(std::memcmp(res->ai_src_addr, &src, sizeof src), 0);
  rdma_freeaddrinfo(res);
}

// As rdma-core: migrating a synchronous id acks the event its last call waited for (which
// only the id holds), so a later rdma_destroy_id does not wait for it; events still queued
// for the id move to the new channel. (libfabric's verbs provider: a sync id resolved, then
// moved to its event queue's channel.)
TEST(CmApi, MigrateIdThenDestroyDoesNotWaitForTheSyncIdsEvent) {
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(nullptr, &id, nullptr, RDMA_PS_TCP), 0);
  sockaddr_in dst = loopback(9);
  ASSERT_EQ(rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000), 0);
  ASSERT_NE(id->event, nullptr);                // ADDR_RESOLVED, held by the sync id
  EXPECT_EQ(rdma_migrate_id(id, nullptr), -1);  // a sync id needs a channel to go to
  EXPECT_EQ(errno, EINVAL);
  rdma_event_channel* ch = rdma_create_event_channel();
  ASSERT_NE(ch, nullptr);
  ASSERT_EQ(rdma_migrate_id(id, ch), 0);
  EXPECT_EQ(id->event, nullptr);
  EXPECT_EQ(id->channel, ch);
  ASSERT_EQ(rdma_resolve_route(id, 2000), 0);  // asynchronous now: the event comes on ch
  expect_event(ch, RDMA_CM_EVENT_ROUTE_RESOLVED);

  // rdma_destroy_id on another thread: if it blocks, the test fails (and exits: the blocked
  // thread cannot be joined).
  auto done = std::make_shared<std::promise<int>>();
  std::future<int> f = done->get_future();
  std::thread([id, ch, done] {
    done->set_value(rdma_destroy_id(id));
    rdma_destroy_event_channel(ch);
  }).detach();
  if (f.wait_for(std::chrono::seconds(5)) != std::future_status::ready) {
    std::fprintf(stderr, "FAIL: rdma_destroy_id after rdma_migrate_id blocked for 5 s\n");
    std::fflush(stderr);
    std::_Exit(1);
  }
  EXPECT_EQ(f.get(), 0);
}

// Events of an async id still queued on its channel go with it to the new one.
TEST(CmApi, MigrateIdMovesQueuedEvents) {
  rdma_event_channel* a = rdma_create_event_channel();
  rdma_event_channel* b = rdma_create_event_channel();
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(a, &id, nullptr, RDMA_PS_TCP), 0);
  sockaddr_in dst = loopback(9);
  ASSERT_EQ(rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000), 0);
  pollfd pa{a->fd, POLLIN, 0};
  ASSERT_EQ(poll(&pa, 1, 2000), 1);  // ADDR_RESOLVED queued on a, not taken
  ASSERT_EQ(rdma_migrate_id(id, b), 0);
  fcntl(a->fd, F_SETFL, fcntl(a->fd, F_GETFL) | O_NONBLOCK);
  rdma_cm_event* ev = nullptr;
  EXPECT_EQ(rdma_get_cm_event(a, &ev), -1);  // gone from a
  EXPECT_EQ(errno, EAGAIN);
  ev = expect_event(b, RDMA_CM_EVENT_ADDR_RESOLVED, true);
  ASSERT_NE(ev, nullptr);
  EXPECT_EQ(ev->id, id);
  rdma_ack_cm_event(ev);
  rdma_destroy_id(id);
  rdma_destroy_event_channel(a);
  rdma_destroy_event_channel(b);
}

namespace {

// Connects `p`'s client to its listener and accepts: false unless both see ESTABLISHED.
bool connect_pair(Pair& p) {
  sockaddr_in dst = loopback(p.port);
  if (rdma_resolve_addr(p.client, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000)) return false;
  rdma_cm_event* ev = next_event(p.cch);
  if (!ev || ev->event != RDMA_CM_EVENT_ADDR_RESOLVED) return false;
  rdma_ack_cm_event(ev);
  if (rdma_resolve_route(p.client, 2000)) return false;
  ev = next_event(p.cch);
  if (!ev || ev->event != RDMA_CM_EVENT_ROUTE_RESOLVED) return false;
  rdma_ack_cm_event(ev);
  ibv_qp_init_attr ca = qp_attr();
  rdma_conn_param cp{};
  if (rdma_create_qp(p.client, nullptr, &ca) || rdma_connect(p.client, &cp)) return false;
  ev = next_event(p.sch);
  if (!ev || ev->event != RDMA_CM_EVENT_CONNECT_REQUEST) return false;
  p.child = ev->id;
  rdma_ack_cm_event(ev);
  ibv_qp_init_attr sa = qp_attr();
  if (rdma_create_qp(p.child, nullptr, &sa) || rdma_accept(p.child, &cp)) return false;
  ev = next_event(p.cch);
  if (!ev || ev->event != RDMA_CM_EVENT_ESTABLISHED) return false;
  rdma_ack_cm_event(ev);
  ev = next_event(p.sch);
  if (!ev || ev->event != RDMA_CM_EVENT_ESTABLISHED) return false;
  rdma_ack_cm_event(ev);
  return true;
}

}  // namespace

// A process that uses rdma_cm and then forks: the child's rdma_cm is its own (its own agent and
// device), and it does not hold on to the ports its parent bound.
TEST(CmApi, AForkedChildConnectsOnItsOwnAndLeavesTheParentsPortsAlone) {
  Pair mine;
  ASSERT_TRUE(connect_pair(mine));
  rdma_cm_id* held = nullptr;
  rdma_event_channel* ch = rdma_create_event_channel();
  ASSERT_EQ(rdma_create_id(ch, &held, nullptr, RDMA_PS_TCP), 0);
  const std::uint16_t port = bind_free(held);
  int go[2], ready[2];
  ASSERT_EQ(pipe(go), 0);
  ASSERT_EQ(pipe(ready), 0);
  const pid_t pid = fork();
  if (pid == 0) {
    // (fork's child handlers have run by now)
    if (write(ready[1], "r", 1) != 1) _exit(9);
    char c;
    if (read(go[0], &c, 1) != 1) _exit(10);
    Pair p;
    _exit(connect_pair(p) ? 0 : 11);
  }
  ASSERT_GT(pid, 0);
  char r;
  ASSERT_EQ(read(ready[0], &r, 1), 1);
  // With the child alive, the parent releases its port and can bind it again.
  ASSERT_EQ(rdma_destroy_id(held), 0);
  ASSERT_EQ(rdma_create_id(ch, &held, nullptr, RDMA_PS_TCP), 0);
  sockaddr_in a = loopback(port);
  EXPECT_EQ(rdma_bind_addr(held, reinterpret_cast<sockaddr*>(&a)), 0) << std::strerror(errno);
  ASSERT_EQ(write(go[1], "x", 1), 1);
  int status = -1;
  pid_t w = 0;
  softrdma::test::wait_until([&] { return (w = waitpid(pid, &status, WNOHANG)) != 0; },
                             std::chrono::seconds(30), std::chrono::milliseconds(10));
  if (w == 0) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
  }
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  rdma_destroy_id(held);
  rdma_destroy_event_channel(ch);
  for (int fd : {go[0], go[1], ready[0], ready[1]}) close(fd);
  // The parent's connection still works after the child.
  mine.send_to_child("after the fork");
}

namespace {

// A connected pair whose client SENT `text` into a receive the child posted, saw its send
// completion and disconnected (its own DISCONNECTED taken): the child's receive completion is
// made (in its CQ, or held by the pass until it hands it out) and nobody has polled it.
struct SentThenDisconnected {
  Pair p;
  char rbuf[64] = {};
  ibv_mr* rmr = nullptr;
  std::chrono::steady_clock::time_point disconnect_called{};

  void run(const char* text) {
    ASSERT_TRUE(connect_pair(p));
    rmr = rdma_reg_msgs(p.child, rbuf, sizeof rbuf);
    ASSERT_NE(rmr, nullptr);
    char sbuf[64] = {};
    std::strncpy(sbuf, text, sizeof sbuf - 1);
    ASSERT_EQ(rdma_post_recv(p.child, nullptr, rbuf, sizeof rbuf, rmr), 0);
    ASSERT_EQ(rdma_post_send(p.client, nullptr, sbuf, sizeof sbuf, nullptr, IBV_SEND_INLINE), 0);
    ibv_wc wc{};
    ASSERT_EQ(rdma_get_send_comp(p.client, &wc), 1);
    ASSERT_EQ(wc.status, IBV_WC_SUCCESS);
    disconnect_called = std::chrono::steady_clock::now();
    ASSERT_EQ(rdma_disconnect(p.client), 0);
    expect_event(p.cch, RDMA_CM_EVENT_DISCONNECTED);
  }
  // Polls the child's receive completion: there, and whole.
  void poll_child(const char* text) {
    ibv_wc wc{};
    ASSERT_EQ(ibv_poll_cq(p.child->recv_cq, 1, &wc), 1);
    EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
    EXPECT_STREQ(rbuf, text);
  }
  ~SentThenDisconnected() {
    if (rmr) rdma_dereg_mr(rmr);
  }
};

}  // namespace

// A peer's disconnect comes after the completions the QP had when its DREQ arrived: the
// application gets DISCONNECTED once it has polled them. On a NIC they are in the CQ
// microseconds after their packets, long before a DREQ sent after them is read; libfabric's
// rxm closes a connection on DISCONNECTED and loses what it had not read by then
// (docs/rdma-cm.md). The client's own DISCONNECTED (its DREQ answered) is not held.
TEST(CmApi, APeersDisconnectComesAfterTheCompletionsBeforeIt) {
  const char text[] = "the last message before the DREQ";
  SentThenDisconnected s;
  ASSERT_NO_FATAL_FAILURE(s.run(text));
  // The child's receive completion is not polled: its DISCONNECTED waits.
  rdma_cm_event* early = next_event(s.p.sch, 200);
  EXPECT_EQ(early, nullptr) << "DISCONNECTED before the receive completion was polled";
  if (early) rdma_ack_cm_event(early);
  s.poll_child(text);
  if (!early) expect_event(s.p.sch, RDMA_CM_EVENT_DISCONNECTED, false, 2000);
}

// ... but not forever: an application that waits for DISCONNECTED before it polls gets it
// 500 ms after the DREQ; and one that calls rdma_disconnect itself meanwhile gets it at once.
TEST(CmApi, AHeldDisconnectComesAfterTheGraceOrWhenTheApplicationDisconnects) {
  const char text[] = "never polled before DISCONNECTED";
  for (const bool disconnect_too : {false, true}) {
    SCOPED_TRACE(disconnect_too ? "the child disconnects too" : "the child waits");
    SentThenDisconnected s;
    ASSERT_NO_FATAL_FAILURE(s.run(text));
    if (disconnect_too) {
      EXPECT_EQ(rdma_disconnect(s.p.child), 0);
    }
    // Queued by the time rdma_disconnect returns; otherwise once the grace has run out.
    rdma_cm_event* ev = next_event(s.p.sch, disconnect_too ? 0 : 5000);
    const auto waited = std::chrono::steady_clock::now() - s.disconnect_called;
    ASSERT_NE(ev, nullptr) << "no DISCONNECTED";
    EXPECT_EQ(ev->event, RDMA_CM_EVENT_DISCONNECTED) << rdma_event_str(ev->event);
    rdma_ack_cm_event(ev);
    if (!disconnect_too) {
      EXPECT_GE(waited, std::chrono::milliseconds(450));
    }
    s.poll_child(text);  // still there: holding the event back lost nothing
  }
}
