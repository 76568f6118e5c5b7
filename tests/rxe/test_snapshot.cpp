// Device::snapshot (rxe/snapshot.h): what monitoring sees of a device's objects is what the
// application made and what the QPs did.
#include "rxe/snapshot.h"
#include "tests/rxe/fixture.h"

namespace softrdma::rxe::test {
namespace {

class Snapshot : public Pair {};

TEST_F(Snapshot, ShowsConnectedQpsTheirWorkAndTheMemory) {
  const auto [qa, qb] = connected_qps(*a, *b);
  Buffer src(*a, 8192, kAllAccess, 7);
  Buffer dst(*b, 8192, kAllAccess);
  Buffer extra(*b, 4096, kAllAccess);
  // Two receives posted on B, one consumed by a SEND from A.
  const Sge rs = dst.sge(0, 4096);
  ASSERT_EQ(post_recv(qb, 1, std::span(&rs, 1)), 0);
  ASSERT_EQ(post_recv(qb, 2, std::span(&rs, 1)), 0);
  const Sge ss = src.sge(0, 4096);
  ASSERT_EQ(qa->post_send(wr(WrOpcode::kSend, 1, std::span(&ss, 1))), 0);
  ASSERT_EQ(wait_wc(b->cq, 1).size(), 1u);
  ASSERT_EQ(wait_wc(a->cq, 1).size(), 1u);

  const DeviceSnapshot sa = a->dev->snapshot(), sb = b->dev->snapshot();
  ASSERT_EQ(sa.qps.size(), 1u);
  ASSERT_EQ(sb.qps.size(), 1u);
  const QpInfo &ia = sa.qps[0], &ib = sb.qps[0];
  EXPECT_EQ(ia.qpn, qa->qpn());
  EXPECT_EQ(ia.dest_qpn, qb->qpn());
  EXPECT_EQ(ib.dest_qpn, qa->qpn());
  EXPECT_EQ(ia.type, QpType::kRc);
  EXPECT_EQ(ia.state, QpState::kRts);
  EXPECT_EQ(ia.peer, addr(2).str());
  EXPECT_EQ(ib.peer, addr(1).str());
  EXPECT_EQ(ia.sq_psn, ib.rq_psn);  // A's next PSN is the one B expects
  EXPECT_EQ(ia.send_outstanding, 0u);
  EXPECT_EQ(ib.recv_outstanding, 1u);
  EXPECT_EQ(ia.counters.tx_packets, qa->counters().tx_packets);
  EXPECT_GE(ia.counters.tx_packets, 1u);
  EXPECT_EQ(ia.pdn, a->pd->handle);
  EXPECT_EQ(ia.send_cqn, a->cq->cqn);

  ASSERT_EQ(sb.mrs.size(), 2u);
  std::uint64_t bytes = 0;
  for (const MrInfo& m : sb.mrs) bytes += m.length;
  EXPECT_EQ(bytes, 8192u + 4096u);
  ASSERT_EQ(sb.cqs.size(), 1u);
  EXPECT_EQ(sb.cqs[0].cqn, b->cq->cqn);
  EXPECT_EQ(sb.cqs[0].users, 1u);  // one QP, the same CQ for sends and receives
  EXPECT_EQ(sb.cqs[0].queued, 0u);
  ASSERT_EQ(sb.pds.size(), 1u);
  EXPECT_EQ(sb.pds[0].users, 3u);  // the QP and two MRs
}

TEST_F(Snapshot, CountsQueuedCompletionsAndSrqs) {
  int err = 0;
  Srq* srq = b->dev->create_srq(b->pd, 16, 1, 0, &err);
  ASSERT_NE(srq, nullptr);
  Qp* qb = make_qp(*b, QpType::kRc, srq);
  Buffer dst(*b, 64, kAllAccess);
  const Sge rs = dst.sge(0, 64);
  RecvWr r;
  r.wr_id = 9;
  r.sg_list = std::span(&rs, 1);
  ASSERT_EQ(srq->post(r), 0);
  ASSERT_EQ(srq->post(r), 0);
  const DeviceSnapshot s = b->dev->snapshot();
  ASSERT_EQ(s.srqs.size(), 1u);
  EXPECT_EQ(s.srqs[0].srqn, srq->srqn);
  EXPECT_EQ(s.srqs[0].posted, 2u);
  EXPECT_EQ(s.srqs[0].max_wr, srq->max_wr());
  ASSERT_EQ(s.srqs[0].qpns.size(), 1u);
  EXPECT_EQ(s.srqs[0].qpns[0], qb->qpn());
  ASSERT_EQ(s.qps.size(), 1u);
  EXPECT_EQ(s.qps[0].srqn, srq->srqn);
  EXPECT_EQ(s.qps[0].state, QpState::kReset);
  EXPECT_TRUE(s.qps[0].peer.empty());
}

TEST(LatencyHistogram, QuantilesWithinAQuarter) {
  LatencyHistogram h;
  EXPECT_EQ(h.quantile(0.5), 0u);
  for (std::uint64_t v = 1; v <= 1000; ++v) h.add(v * 1000);  // 1 µs .. 1 ms, uniform
  EXPECT_EQ(h.count(), 1000u);
  const double p50 = static_cast<double>(h.quantile(0.5));
  const double p99 = static_cast<double>(h.quantile(0.99));
  EXPECT_GE(p50, 500e3);
  EXPECT_LE(p50, 500e3 * 1.25);
  EXPECT_GE(p99, 990e3);
  EXPECT_LE(p99, 990e3 * 1.25);
  LatencyHistogram small;
  small.add(0);
  small.add(3);
  EXPECT_EQ(small.quantile(0.5), 0u);
  EXPECT_EQ(small.quantile(1.0), 3u);
}

TEST_F(Snapshot, CqLatencyOnceSampled) {
  const auto [qa, qb] = connected_qps(*a, *b);
  Buffer src(*a, 4096, kAllAccess, 1);
  Buffer dst(*b, 4096, kAllAccess);
  const Sge ss = src.sge(0, 4096);
  auto write = [&](std::uint64_t id) {
    SendWr w = rdma_wr(WrOpcode::kRdmaWrite, id, std::span(&ss, 1), dst);
    ASSERT_EQ(qa->post_send(w), 0);
    ASSERT_EQ(wait_wc(a->cq, 1).size(), 1u);
  };
  write(1);  // not sampled: nobody watches yet
  a->dev->sample_latency(true);
  const auto before = steady_ns();
  for (std::uint64_t id = 2; id < 12; ++id) write(id);
  const auto elapsed = steady_ns() - before;
  const DeviceSnapshot s = a->dev->snapshot();
  ASSERT_EQ(s.cqs.size(), 1u);
  EXPECT_EQ(s.cqs[0].latency_samples, 10u);
  EXPECT_GT(s.cqs[0].latency_p50_ns, 0u);
  EXPECT_GE(s.cqs[0].latency_p99_ns, s.cqs[0].latency_p50_ns);
  EXPECT_LE(s.cqs[0].latency_p99_ns, elapsed * 5 / 4);  // each within the whole run
}

}  // namespace
}  // namespace softrdma::rxe::test
