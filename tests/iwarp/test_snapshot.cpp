// Device::snapshot: softiwarp0's objects as softrdma res shows them (iwarp/snapshot.h): a QP's
// state, TCP ends, MPA options and counters before and after its connection; CQs, MRs and PDs
// with their users.
#include "iwarp/snapshot.h"
#include "tests/iwarp/harness.h"

namespace softrdma::iwarp::test {
namespace {

using core::QpState;
using core::WrOpcode;

TEST(IwarpSnapshot, ObjectsBeforeAndAfterTheConnection) {
  Side a, b;
  a.init({});
  b.init({});
  DeviceSnapshot s = a.dev->snapshot();
  ASSERT_EQ(s.qps.size(), 1u);
  EXPECT_EQ(s.qps[0].qpn, a.qp->qpn());
  EXPECT_EQ(s.qps[0].pdn, a.pd->handle);
  EXPECT_EQ(s.qps[0].send_cqn, a.scq->cqn);
  EXPECT_EQ(s.qps[0].recv_cqn, a.rcq->cqn);
  EXPECT_TRUE(s.qps[0].peer.empty());  // no connection yet
  EXPECT_EQ(s.qps[0].mpa_revision, 0);
  ASSERT_EQ(s.cqs.size(), 2u);
  for (const core::CqInfo& c : s.cqs) EXPECT_EQ(c.users, 1u);
  ASSERT_EQ(s.mrs.size(), 1u);
  EXPECT_EQ(s.mrs[0].lkey, a.mr->lkey);
  EXPECT_EQ(s.mrs[0].length, a.buf.size());
  ASSERT_EQ(s.pds.size(), 1u);
  EXPECT_EQ(s.pds[0].users, 2u);  // the QP and the MR

  MpaParams pa, pb;
  pa.crc = true;
  TcpPair tcp;
  ASSERT_TRUE(connect_pair(a, b, pa, pb, tcp));
  ASSERT_TRUE(b.inbox.wait_event(QpEvent::Kind::kEstablished));
  ASSERT_EQ(b.post_recv(1, 0, 4096), 0);
  ASSERT_EQ(a.post(WrOpcode::kSend, 2, 0, 4096), 0);
  ASSERT_TRUE(a.wait_wc(a.scq));
  ASSERT_TRUE(b.wait_wc(b.rcq));

  const DeviceSnapshot sa = a.dev->snapshot(), sb = b.dev->snapshot();
  ASSERT_EQ(sa.qps.size(), 1u);
  ASSERT_EQ(sb.qps.size(), 1u);
  const QpInfo &qa = sa.qps[0], &qb = sb.qps[0];
  EXPECT_EQ(qa.state, QpState::kRts);
  EXPECT_EQ(qb.state, QpState::kRts);
  EXPECT_FALSE(qa.peer.empty());
  EXPECT_EQ(qa.peer, qb.local);
  EXPECT_EQ(qb.peer, qa.local);
  EXPECT_EQ(qa.local.rfind("127.0.0.1:", 0), 0u);
  for (const QpInfo* q : {&qa, &qb}) {
    EXPECT_EQ(q->mpa_revision, 2);
    EXPECT_TRUE(q->mpa_crc);  // asked for by one side: both use it
    EXPECT_FALSE(q->mpa_markers);
    EXPECT_EQ(q->send_outstanding, 0u);
    EXPECT_EQ(q->recv_outstanding, 0u);
  }
  EXPECT_GE(qa.counters.tx_bytes, 4096u);
  EXPECT_GE(qb.counters.rx_bytes, 4096u);
  EXPECT_GT(qa.counters.tx_fpdus, 0u);
}

}  // namespace
}  // namespace softrdma::iwarp::test
