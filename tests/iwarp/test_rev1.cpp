// MPA revision 1 connections as rdma_cm sets them up (rping over `--mpa rev=1`): the request
// carries no IRD/ORD, and the receivers are event driven (a completion notification wakes
// them; nobody polls the CQ or calls poll_progress), so everything they get is read by the
// progress thread from epoll. rping's exchange: the client SENDs an advertisement of its
// buffer, the server READs that buffer and SENDs back.
#include <condition_variable>
#include <cstring>
#include <functional>
#include <mutex>
#include <tuple>

#include "tests/iwarp/harness.h"

namespace softrdma::iwarp::test {
namespace {

using core::WcStatus;
using core::WrOpcode;

// Completion notifications of one CQ, delivered by the progress thread.
struct CqWaiter {
  std::mutex mu;
  std::condition_variable cv;
  std::uint64_t fired = 0;

  void attach(Cq* cq) {
    cq->set_notify([this] {
      std::lock_guard lock(mu);
      ++fired;
      cv.notify_all();
    });
  }
  // The ibv_req_notify_cq / ibv_get_cq_event / ibv_poll_cq loop of an event-driven program.
  // The bound only keeps a broken build from hanging the suite.
  std::optional<core::Wc> next(Cq* cq) {
    core::Wc wc;
    for (;;) {
      if (cq->poll(std::span<core::Wc>(&wc, 1)) == 1) return wc;
      std::uint64_t seen;
      {
        std::lock_guard lock(mu);
        seen = fired;
      }
      cq->req_notify(false);
      if (cq->poll(std::span<core::Wc>(&wc, 1)) == 1) return wc;  // came before the arm
      std::unique_lock lock(mu);
      if (!cv.wait_for(lock, 20s, [&] { return fired != seen; })) return std::nullopt;
    }
  }
};

struct Advert {
  std::uint64_t addr;
  std::uint32_t rkey, len;
};

class IwarpRev1 : public testing::TestWithParam<std::tuple<bool, bool>> {
 protected:
  // Connects a (client) to b (server) with revision 1; the server's IRD and ORD are what
  // `server_depths` makes of the request (a CM's choice), as rdma_accept(NULL) would.
  void connect(std::function<void(const MpaRequest&, MpaParams&)> server_depths) {
    a.init({}, 1u << 20);
    b.init({}, 1u << 20);
    for (auto* s : {&a, &b}) {
      (s == &a ? wa_s : wb_s).attach(s->scq);
      (s == &a ? wa_r : wb_r).attach(s->rcq);
    }
    MpaParams pa;
    pa.revision = 1;
    pa.crc = std::get<0>(GetParam());
    pa.markers = std::get<1>(GetParam());
    pa.ird = pa.ord = 1;  // rping's rdma_connect
    ASSERT_TRUE(tcp.client >= 0 && tcp.server >= 0);
    ASSERT_EQ(b.dev->read_request(tcp.server, 5s, b.inbox.on_request()), 0);
    ASSERT_EQ(a.dev->connect(a.qp, tcp.client, pa, a.inbox.on_connect()), 0);
    ASSERT_TRUE(b.inbox.wait([&] { return b.inbox.request.has_value(); }));
    const MpaRequest req = b.inbox.request->request;
    ASSERT_EQ(b.inbox.request->error, 0);
    EXPECT_EQ(req.revision, 1);
    EXPECT_FALSE(req.enhanced);
    EXPECT_EQ(req.ird, 0);  // revision 1 carries no IRD/ORD
    EXPECT_EQ(req.ord, 0);
    MpaParams pb;
    pb.revision = 1;
    server_depths(req, pb);
    // rping posts its receive before it accepts (rdma_create_qp leaves the QP in INIT).
    ASSERT_EQ(b.qp->modify_state(core::QpState::kInit), 0);
    ASSERT_EQ(b.post_recv(1, 0, sizeof(Advert)), 0);
    ASSERT_EQ(b.dev->accept(b.qp, tcp.server, pb, b.inbox.on_accept()), 0);
    ASSERT_TRUE(a.inbox.wait([&] { return a.inbox.connect.has_value(); }));
    ASSERT_EQ(a.inbox.connect->kind, ConnectResult::Kind::kAccepted);
    ASSERT_TRUE(b.inbox.wait([&] { return b.inbox.accept.has_value(); }));
    ASSERT_EQ(*b.inbox.accept, 0);
    EXPECT_EQ(a.qp->crc_in_use(), pa.crc);
    EXPECT_EQ(b.qp->crc_in_use(), pa.crc);
  }

  // The client's advertisement, received by the server through a notification.
  void client_advertises(std::size_t off, std::uint32_t len) {
    fill(a.buf, off, len, 0x21);
    const Advert ad{a.addr(off), a.mr->rkey, len};
    std::memcpy(a.buf.data() + 4096, &ad, sizeof ad);
    ASSERT_EQ(a.post_recv(7, 8192, 64), 0);
    ASSERT_EQ(a.post(WrOpcode::kSend, 2, 4096, sizeof ad), 0);
    auto s = wa_s.next(a.scq);
    ASSERT_TRUE(s);
    EXPECT_EQ(s->status, WcStatus::kSuccess);
    auto r = wb_r.next(b.rcq);
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, WcStatus::kSuccess);
    ASSERT_EQ(r->byte_len, sizeof ad);
    std::memcpy(&got, b.buf.data(), sizeof got);
    EXPECT_EQ(got.addr, ad.addr);
    EXPECT_EQ(got.rkey, ad.rkey);
  }

  TcpPair tcp;
  CqWaiter wa_s, wa_r, wb_s, wb_r;  // outlive the devices, whose threads call them
  Side a, b;
  Advert got{};
};

// rping's server takes its IRD/ORD from the connect request (rdma_accept(NULL)): with the
// device's limits offered for a revision 1 request (as siw and softrdma's CM do), the READ
// goes out and the whole exchange runs on notifications.
TEST_P(IwarpRev1, RpingExchangeRunsOnNotifications) {
  connect([](const MpaRequest&, MpaParams& p) { p.ird = p.ord = 16; });
  client_advertises(65536, 20000);
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE(round);
    std::fill(b.buf.begin() + 131072, b.buf.begin() + 131072 + got.len, 0);
    ASSERT_EQ(b.post(WrOpcode::kRdmaRead, 10 + round, 131072, got.len, got.addr, got.rkey), 0);
    auto rd = wb_s.next(b.scq);
    ASSERT_TRUE(rd);
    ASSERT_EQ(rd->status, WcStatus::kSuccess);
    EXPECT_EQ(rd->opcode, core::WcOpcode::kRdmaRead);
    EXPECT_TRUE(std::equal(b.buf.begin() + 131072, b.buf.begin() + 131072 + got.len,
                           a.buf.begin() + 65536));
    // The server's "go ahead" SEND wakes the client.
    ASSERT_EQ(b.post(WrOpcode::kSend, 20 + round, 0, 8), 0);
    auto s = wb_s.next(b.scq);
    ASSERT_TRUE(s);
    EXPECT_EQ(s->status, WcStatus::kSuccess);
    auto r = wa_r.next(a.rcq);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, WcStatus::kSuccess);
    EXPECT_EQ(r->byte_len, 8u);
    ASSERT_EQ(a.post_recv(7, 8192, 64), 0);
  }
  EXPECT_EQ(a.qp->state(), core::QpState::kRts);
  EXPECT_EQ(b.qp->state(), core::QpState::kRts);
}

// Taken literally, a revision 1 request's IRD/ORD are 0 (what softrdma's CM used to offer):
// the server's ORD is 0 and it may never send a Read Request. Its READ used to be accepted
// and to wait behind the ORD limit forever (rping's server hung, its client waited for the
// READ); it now fails at post, and the connection keeps working.
TEST_P(IwarpRev1, ReadWithOrdZeroFailsAtPostInsteadOfWaitingForever) {
  connect([](const MpaRequest& r, MpaParams& p) {
    p.ird = r.ord;
    p.ord = r.ird;
  });
  EXPECT_EQ(b.qp->ord(), 0);
  client_advertises(65536, 4096);
  EXPECT_EQ(b.post(WrOpcode::kRdmaRead, 10, 131072, got.len, got.addr, got.rkey), EINVAL);
  ASSERT_EQ(b.post(WrOpcode::kSend, 20, 0, 8), 0);
  auto s = wb_s.next(b.scq);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->status, WcStatus::kSuccess);
  EXPECT_EQ(s->wr_id, 20u);  // nothing stuck in front of it
  auto r = wa_r.next(a.rcq);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, WcStatus::kSuccess);
  EXPECT_EQ(b.qp->state(), core::QpState::kRts);
}

INSTANTIATE_TEST_SUITE_P(Mpa, IwarpRev1, testing::Combine(testing::Bool(), testing::Bool()),
                         [](const testing::TestParamInfo<std::tuple<bool, bool>>& i) {
                           return std::string(std::get<0>(i.param) ? "crc" : "nocrc") +
                                  (std::get<1>(i.param) ? "_markers" : "_nomarkers");
                         });

}  // namespace
}  // namespace softrdma::iwarp::test
