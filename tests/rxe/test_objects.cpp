// PD, MR, CQ and SRQ behaviour: keys, access rules, CQ notification and
// overflow, SRQ sharing and its limit event, busy objects.
#include <atomic>
#include <chrono>
#include <set>
#include <thread>

#include "netdev/udp.h"
#include "tests/rxe/fixture.h"

namespace softrdma::rxe::test {
namespace {

class Objects : public Pair {};

// `n` signaled 8-byte SENDs from `s` through qa into as many receives of d's first 64 bytes
// posted on qb; returns once the sender has its n completions in `scq`.
void sends_into_receives(Qp* qa, const Buffer& s, Cq* scq, Qp* qb, const Buffer& d, int n) {
  const Sge rs = d.sge(0, 64);
  const Sge ss = s.sge(0, 8);
  for (int i = 0; i < n; ++i) ASSERT_EQ(post_recv(qb, i, std::span(&rs, 1)), 0);
  for (int i = 0; i < n; ++i) {
    ASSERT_EQ(qa->post_send(wr(WrOpcode::kSend, i, std::span(&ss, 1))), 0);
  }
  ASSERT_EQ(wait_wc(scq, n).size(), static_cast<std::size_t>(n));
}

TEST_F(Objects, MemoryKeysAreUnpredictableAndUnique) {
  std::vector<std::uint8_t> mem(4096);
  std::set<std::uint32_t> keys;
  std::vector<std::uint32_t> seq;
  for (int i = 0; i < 200; ++i) {
    int err = 0;
    auto mr = a->dev->reg_mr(a->pd, mem.data(), mem.size(), 0, kAccessLocalWrite, &err);
    ASSERT_TRUE(mr);
    keys.insert(mr->lkey);
    seq.push_back(mr->lkey);
  }
  EXPECT_EQ(keys.size(), 200u);
  int sequential = 0;
  for (std::size_t i = 1; i < seq.size(); ++i) sequential += seq[i] == seq[i - 1] + 1;
  EXPECT_LT(sequential, 3);
}

TEST_F(Objects, RemoteWriteWithoutLocalWriteIsRefused) {
  std::vector<std::uint8_t> mem(64);
  int err = 0;
  EXPECT_FALSE(a->dev->reg_mr(a->pd, mem.data(), 64, 0, kAccessRemoteWrite, &err));
  EXPECT_EQ(err, EINVAL);
  EXPECT_FALSE(a->dev->reg_mr(a->pd, mem.data(), 64, 0, kAccessRemoteAtomic, &err));
  EXPECT_TRUE(a->dev->reg_mr(a->pd, mem.data(), 64, 0, kAccessRemoteRead, &err));
  EXPECT_EQ(a->dev->dereg_mr(0xDEADBEEF), EINVAL);
}

TEST_F(Objects, IovaBasedRegistrationAndReregistration) {
  const auto [qa, qb] = connected_qps(*a, *b);
  std::vector<std::uint8_t> mem(4096, 0);
  int err = 0;
  // Peers address this region as 0x1000000..; the host address is unrelated.
  auto mr = b->dev->reg_mr(b->pd, mem.data(), mem.size(), 0x1000000, kAllAccess, &err);
  ASSERT_TRUE(mr);
  Buffer s(*a, 64, kAllAccess, 0x9A);
  const Sge ss = s.sge(0, 16);
  SendWr w = wr(WrOpcode::kRdmaWrite, 1, std::span(&ss, 1));
  w.remote_addr = 0x1000000 + 100;
  w.rkey = mr->rkey;
  ASSERT_EQ(qa->post_send(w), 0);
  Wc wc = one_wc(a->cq);
  EXPECT_EQ(wc.status, WcStatus::kSuccess);
  EXPECT_EQ(mem[100], 0x9A);
  EXPECT_EQ(mem[116], 0);
  // Re-registered read-only: writes are now refused.
  ASSERT_TRUE(
      b->dev->mrs().rereg(mr->lkey, nullptr, nullptr, 0, 0, kAccessLocalWrite | kAccessRemoteRead));
  ASSERT_EQ(qa->post_send(w), 0);
  wc = one_wc(a->cq);
  EXPECT_EQ(wc.status, WcStatus::kRemAccessErr);
}

TEST_F(Objects, CqNotificationNextAndSolicited) {
  const auto [qa, qb] = connected_qps(*a, *b);
  std::atomic<int> fired{0};
  b->cq->set_notify([&] { ++fired; });
  Buffer s(*a, 64, kAllAccess);
  Buffer d(*b, 64, kAllAccess);
  const Sge rs = d.sge(0, 64);
  const Sge ss = s.sge(0, 8);
  for (int i = 0; i < 4; ++i) ASSERT_EQ(post_recv(qb, i, std::span(&rs, 1)), 0);
  // A signaled SEND, with `flags` besides, and its completion at B.
  const auto send = [&](std::uint64_t id, std::uint32_t flags = 0) {
    ASSERT_EQ(qa->post_send(wr(WrOpcode::kSend, id, std::span(&ss, 1), kSendSignaled | flags)), 0);
    ASSERT_EQ(wait_wc(b->cq, 1).size(), 1u);
  };
  // Not armed: no event.
  ASSERT_NO_FATAL_FAILURE(send(1));
  EXPECT_EQ(fired.load(), 0);
  // Solicited only: an unsolicited send does not fire, a solicited one does.
  b->cq->req_notify(true);
  ASSERT_NO_FATAL_FAILURE(send(2));
  EXPECT_EQ(fired.load(), 0);
  ASSERT_NO_FATAL_FAILURE(send(3, kSendSolicited));
  EXPECT_EQ(fired.load(), 1);
  // Next completion: fires once, then disarms.
  b->cq->req_notify(false);
  ASSERT_NO_FATAL_FAILURE(send(4));
  EXPECT_EQ(fired.load(), 2);
  EXPECT_EQ(wait_wc(a->cq, 4).size(), 4u);
}

TEST_F(Objects, CqOverflowRaisesAnAsyncError) {
  std::atomic<int> cq_errors{0};
  b->dev->set_async_handler([&](const AsyncEvent& ev) {
    if (ev.type == AsyncEventType::kCqErr) ++cq_errors;
  });
  int err = 0;
  Cq* small = b->dev->create_cq(2, &err);
  ASSERT_TRUE(small);
  QpCap cap = default_cap();
  Qp* qb = b->dev->create_qp(b->pd, QpType::kRc, small, small, nullptr, cap, false, &err);
  Qp* qa = make_qp(*a, QpType::kRc);
  connect(*a, qa, *b, qb);
  Buffer s(*a, 64, kAllAccess);
  Buffer d(*b, 64, kAllAccess);
  ASSERT_NO_FATAL_FAILURE(sends_into_receives(qa, s, a->cq, qb, d, 3));
  // The receiver's completions (and so the overflow) follow the ACK the sender just saw.
  wait_until([&] { return cq_errors.load() != 0; });
  EXPECT_GE(cq_errors.load(), 1);
  Wc buf[4];
  EXPECT_EQ(small->poll(buf), 2);               // what fitted
  EXPECT_EQ(small->poll(buf), -1);              // then the CQ reports its error
  EXPECT_EQ(b->dev->destroy_cq(small), EBUSY);  // still used by a QP
}

TEST_F(Objects, SrqIsSharedAndRaisesItsLimitEvent) {
  std::atomic<int> limit_events{0};
  b->dev->set_async_handler([&](const AsyncEvent& ev) {
    if (ev.type == AsyncEventType::kSrqLimitReached) ++limit_events;
  });
  int err = 0;
  Srq* srq = b->dev->create_srq(b->pd, 64, 2, 0, &err);
  ASSERT_TRUE(srq);
  Qp* qb1 = make_qp(*b, QpType::kRc, srq);
  Qp* qb2 = make_qp(*b, QpType::kRc, srq);
  Qp* qa1 = make_qp(*a, QpType::kRc);
  Qp* qa2 = make_qp(*a, QpType::kRc);
  connect(*a, qa1, *b, qb1);
  connect(*a, qa2, *b, qb2);
  Buffer d(*b, 64 * 10, kAllAccess);
  std::vector<Sge> rs(10);
  for (int i = 0; i < 10; ++i) {
    rs[i] = d.sge(static_cast<std::size_t>(i) * 64, 64);
    RecvWr r;
    r.wr_id = 100 + i;
    r.sg_list = std::span(&rs[i], 1);
    ASSERT_EQ(srq->post(r), 0);
  }
  EXPECT_EQ(post_recv(qb1, 1, std::span(&rs[0], 1)), EINVAL);  // receives go to the SRQ
  ASSERT_EQ(srq->modify(std::nullopt, 8), 0);                  // arm: fire below 8 WQEs
  Buffer s(*a, 64, kAllAccess);
  const Sge ss = s.sge(0, 32);
  ASSERT_EQ(qa1->post_send(wr(WrOpcode::kSend, 1, std::span(&ss, 1))), 0);
  ASSERT_EQ(qa2->post_send(wr(WrOpcode::kSend, 2, std::span(&ss, 1))), 0);
  ASSERT_EQ(qa1->post_send(wr(WrOpcode::kSend, 3, std::span(&ss, 1))), 0);
  auto rwc = wait_wc(b->cq, 3);
  ASSERT_EQ(rwc.size(), 3u);
  std::set<std::uint32_t> qps;
  for (const Wc& wc : rwc) {
    EXPECT_EQ(wc.status, WcStatus::kSuccess);
    EXPECT_GE(wc.wr_id, 100u);
    qps.insert(wc.qp_num);
  }
  EXPECT_EQ(qps.size(), 2u);
  EXPECT_EQ(limit_events.load(), 1);  // once per arming
  EXPECT_EQ(srq->limit(), 0u);
  EXPECT_EQ(b->dev->destroy_srq(srq), EBUSY);
  EXPECT_EQ(b->dev->dealloc_pd(b->pd), EBUSY);
  EXPECT_EQ(srq->modify(std::nullopt, 100), EINVAL);  // limit above max_wr
}

TEST_F(Objects, DeviceAndPortAttributesAreHonest) {
  const DeviceAttr& d = a->dev->attr();
  EXPECT_EQ(d.max_sge, kMaxSge);
  EXPECT_EQ(d.max_inline_data, kMaxInline);
  EXPECT_EQ(d.max_total_mcast_qp_attach, d.max_mcast_grp * d.max_mcast_qp_attach);  // UD multicast
  const PortAttr p = a->dev->port_attr();
  EXPECT_EQ(p.active_mtu, Mtu::k4096);  // 9000-byte netdev
  Node small(fabric, 9, 1500);
  EXPECT_EQ(small.dev->port_attr().active_mtu, Mtu::k1024);
  // GIDs: RoCE v2, IPv4-mapped.
  ASSERT_EQ(a->dev->gids().size(), 1u);
  const Gid g = a->dev->gids()[0];
  EXPECT_EQ(g[10], 0xFF);
  EXPECT_EQ(g[11], 0xFF);
  EXPECT_EQ(g[12], 192);
  EXPECT_EQ(g[15], 1);
  // A path MTU above the link's is clamped.
  Qp* qa = make_qp(small, QpType::kRc);
  ConnectOptions o;
  o.mtu = Mtu::k4096;
  bring_up(qa, a->gid(), 0x11, 0, 0, o);
  QpAttr q;
  QpCap cap;
  qa->query(q, cap);
  EXPECT_EQ(q.path_mtu, Mtu::k1024);
}

TEST_F(Objects, HwCountersSumOverQpsAndSurviveDestruction) {
  const auto [qa, qb] = connected_qps(*a, *b);
  Buffer s(*a, 64, kAllAccess);
  Buffer d(*b, 64, kAllAccess);
  ASSERT_NO_FATAL_FAILURE(sends_into_receives(qa, s, a->cq, qb, d, 5));
  ASSERT_EQ(wait_wc(b->cq, 5).size(), 5u);
  auto get = [](Device& dev, const std::string& name) {
    for (const auto& [n, v] : dev.hw_counters())
      if (n == name) return v;
    ADD_FAILURE() << "no counter " << name;
    return std::uint64_t{0};
  };
  EXPECT_GE(get(*a->dev, "sent_pkts"), 5u);
  EXPECT_GE(get(*b->dev, "rcvd_pkts"), 5u);
  const auto before = get(*b->dev, "rcvd_pkts");
  ASSERT_EQ(b->dev->destroy_qp(qb), 0);
  EXPECT_EQ(get(*b->dev, "rcvd_pkts"), before);  // kept after the QP is gone
}

TEST_F(Objects, SqdRaisesSqDrainedWhenAsked) {
  std::atomic<int> drained{0};
  a->dev->set_async_handler([&](const AsyncEvent& ev) {
    if (ev.type == AsyncEventType::kSqDrained) ++drained;
  });
  const auto [qa, qb] = connected_qps(*a, *b);
  QpAttr attr;
  attr.qp_state = QpState::kSqd;
  attr.en_sqd_async_notify = true;
  ASSERT_EQ(qa->modify(attr, kQpState | kQpEnSqdAsyncNotify), 0);
  wait_until([&] { return drained.load() != 0; });
  EXPECT_EQ(drained.load(), 1);
  EXPECT_EQ(qa->state(), QpState::kSqd);
  attr.qp_state = QpState::kRts;
  ASSERT_EQ(qa->modify(attr, kQpState), 0);  // and back
}

// The same engine over real UDP sockets on loopback (127.0.0.1 <-> 127.0.0.2).
TEST(UdpPair, RcSendWriteReadAtomicOverLoopback) {
  std::string error;
  const auto port = static_cast<std::uint16_t>(20000 + (getpid() * 7 + 3) % 20000);
  auto na = netdev::UdpNetdev::open(netdev::IpAddr::v4(0x7F000001), error, {}, port);
  ASSERT_TRUE(na) << error;
  auto nb = netdev::UdpNetdev::open(netdev::IpAddr::v4(0x7F000002), error, {}, port);
  ASSERT_TRUE(nb) << error;
  Device da(std::move(na)), db(std::move(nb));
  int err = 0;
  Pd* pa = da.alloc_pd();
  Pd* pb = db.alloc_pd();
  Cq* ca = da.create_cq(1024, &err);
  Cq* cb = db.create_cq(1024, &err);
  QpCap cap = default_cap();
  Qp* qa = da.create_qp(pa, QpType::kRc, ca, ca, nullptr, cap, false, &err);
  Qp* qb = db.create_qp(pb, QpType::kRc, cb, cb, nullptr, cap, false, &err);
  ConnectOptions o;
  o.mtu = Mtu::k4096;
  bring_up(qa, db.gids()[0], qb->qpn(), o.psn_b, o.psn_a, o);
  bring_up(qb, da.gids()[0], qa->qpn(), o.psn_a, o.psn_b, o);
  std::vector<std::uint8_t> src(1 << 20), dst(1 << 20, 0), back(1 << 20, 0);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<std::uint8_t>(i * 7);
  auto ma = da.reg_mr(pa, src.data(), src.size(), reinterpret_cast<std::uint64_t>(src.data()),
                      kAllAccess, &err);
  auto mback = da.reg_mr(pa, back.data(), back.size(), reinterpret_cast<std::uint64_t>(back.data()),
                         kAllAccess, &err);
  auto mb = db.reg_mr(pb, dst.data(), dst.size(), reinterpret_cast<std::uint64_t>(dst.data()),
                      kAllAccess, &err);
  // SEND 1 MiB.
  const Sge rs{reinterpret_cast<std::uint64_t>(dst.data()), 1 << 20, mb->lkey};
  ASSERT_EQ(post_recv(qb, 1, std::span(&rs, 1)), 0);
  const Sge ss{reinterpret_cast<std::uint64_t>(src.data()), 1 << 20, ma->lkey};
  ASSERT_EQ(qa->post_send(wr(WrOpcode::kSend, 1, std::span(&ss, 1))), 0);
  Wc rwc = one_wc(cb);
  EXPECT_EQ(rwc.status, WcStatus::kSuccess);
  EXPECT_EQ(rwc.byte_len, 1u << 20);
  EXPECT_EQ(src, dst);
  ASSERT_EQ(wait_wc(ca, 1).size(), 1u);
  // READ it back.
  const Sge bs{reinterpret_cast<std::uint64_t>(back.data()), 1 << 20, mback->lkey};
  SendWr r = wr(WrOpcode::kRdmaRead, 2, std::span(&bs, 1));
  r.remote_addr = reinterpret_cast<std::uint64_t>(dst.data());
  r.rkey = mb->rkey;
  ASSERT_EQ(qa->post_send(r), 0);
  Wc wc = one_wc(ca);
  EXPECT_EQ(wc.status, WcStatus::kSuccess);
  EXPECT_EQ(back, src);
  // An atomic.
  const Sge as{reinterpret_cast<std::uint64_t>(back.data()), 8, mback->lkey};
  SendWr f = wr(WrOpcode::kAtomicFetchAndAdd, 3, std::span(&as, 1));
  f.remote_addr = reinterpret_cast<std::uint64_t>(dst.data());
  f.rkey = mb->rkey;
  f.compare_add = 5;
  ASSERT_EQ(qa->post_send(f), 0);
  wc = one_wc(ca);
  EXPECT_EQ(wc.status, WcStatus::kSuccess);
  std::uint64_t before = 0, after = 0;
  std::memcpy(&before, src.data(), 8);
  std::memcpy(&after, dst.data(), 8);
  EXPECT_EQ(after, before + 5);
  EXPECT_EQ(da.netdev().counters().rx_icrc_errors, 0u);
  EXPECT_EQ(db.netdev().counters().rx_icrc_errors, 0u);
  db.destroy_qp(qb);
  da.destroy_qp(qa);
}

}  // namespace
}  // namespace softrdma::rxe::test
