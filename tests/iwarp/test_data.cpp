// Data transfer between two iWARP QPs over loopback TCP, for every MPA configuration:
// revision 1 and 2 (with each RTR), CRC on and off, markers on and off; every operation at
// sizes 0, 1, MSS-crossing and megabytes; ORD/IRD; SEND with Invalidate; LOCAL_INV.
#include <tuple>

#include "tests/iwarp/harness.h"

namespace softrdma::iwarp::test {
namespace {

using core::WcStatus;
using core::WrOpcode;

struct Config {
  std::uint8_t revision;
  bool crc;
  bool markers;
  RtrType rtr;
};

std::string name_of(const testing::TestParamInfo<Config>& i) {
  const Config& c = i.param;
  std::string s = "rev" + std::to_string(c.revision) + (c.crc ? "_crc" : "_nocrc") +
                  (c.markers ? "_markers" : "_nomarkers");
  switch (c.rtr) {
    case RtrType::kNone:
      s += "_nortr";
      break;
    case RtrType::kZeroWrite:
      s += "_rtrwrite";
      break;
    case RtrType::kZeroRead:
      s += "_rtrread";
      break;
    case RtrType::kZeroSend:
      s += "_rtrsend";
      break;
  }
  return s;
}

class IwarpData : public testing::TestWithParam<Config> {
 protected:
  void SetUp() override {
    // Ethernet-sized FPDUs (loopback's MSS is 64 KiB): every message crosses many of them.
    DeviceConfig eth;
    eth.tx.max_fpdu = 1460;
    a.init(eth);
    b.init(eth);
    MpaParams p;
    p.revision = GetParam().revision;
    p.crc = GetParam().crc;
    p.markers = GetParam().markers;
    p.rtr = GetParam().rtr;
    ASSERT_TRUE(connect_pair(a, b, p, p, tcp));
    ASSERT_EQ(a.qp->state(), core::QpState::kRts);
    ASSERT_TRUE(b.inbox.wait_event(QpEvent::Kind::kEstablished));
    ASSERT_EQ(b.qp->state(), core::QpState::kRts);
  }
  TcpPair tcp;
  Side a, b;
};

TEST_P(IwarpData, NegotiatedAsConfigured) {
  EXPECT_EQ(a.qp->crc_in_use(), GetParam().crc);
  EXPECT_EQ(b.qp->crc_in_use(), GetParam().crc);
  EXPECT_EQ(a.qp->markers_tx(), GetParam().markers);
  EXPECT_EQ(a.qp->markers_rx(), GetParam().markers);
  EXPECT_EQ(b.qp->markers_tx(), GetParam().markers);
}

TEST_P(IwarpData, SendEverySize) {
  const std::uint32_t sizes[] = {0, 1, 1000, 1500, 9000, 70000, 3u << 20};
  std::uint64_t id = 1;
  for (std::uint32_t n : sizes) {
    SCOPED_TRACE(n);
    fill(a.buf, 0, n, static_cast<std::uint8_t>(n));
    std::fill(b.buf.begin(), b.buf.begin() + n + 16, 0xEE);
    ASSERT_EQ(b.post_recv(id, 0, n + 16), 0);
    ASSERT_EQ(a.post(WrOpcode::kSend, id, 0, n), 0);
    auto s = a.wait_wc(a.scq);
    ASSERT_TRUE(s);
    EXPECT_EQ(s->status, WcStatus::kSuccess);
    EXPECT_EQ(s->wr_id, id);
    auto r = b.wait_wc(b.rcq);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, WcStatus::kSuccess);
    EXPECT_EQ(r->byte_len, n);
    EXPECT_EQ(r->opcode, core::WcOpcode::kRecv);
    EXPECT_TRUE(std::equal(a.buf.begin(), a.buf.begin() + n, b.buf.begin()));
    EXPECT_EQ(b.buf[n], 0xEE);
    ++id;
  }
}

TEST_P(IwarpData, WriteAndReadEverySize) {
  const std::uint32_t sizes[] = {0, 1, 1460, 4097, 65536, 1u << 20};
  std::uint64_t id = 1;
  for (std::uint32_t n : sizes) {
    SCOPED_TRACE(n);
    fill(a.buf, 0, n, static_cast<std::uint8_t>(n + 1));
    ASSERT_EQ(a.post(WrOpcode::kRdmaWrite, id, 0, n, b.addr(4096), b.mr->rkey), 0);
    auto w = a.wait_wc(a.scq);
    ASSERT_TRUE(w);
    EXPECT_EQ(w->status, WcStatus::kSuccess);
    EXPECT_EQ(w->opcode, core::WcOpcode::kRdmaWrite);
    // The READ back also orders after the WRITE at the responder (one TCP stream).
    ASSERT_EQ(a.post(WrOpcode::kRdmaRead, id + 1, 4u << 20, n, b.addr(4096), b.mr->rkey), 0);
    auto r = a.wait_wc(a.scq);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, WcStatus::kSuccess);
    EXPECT_EQ(r->opcode, core::WcOpcode::kRdmaRead);
    EXPECT_EQ(r->byte_len, n);
    EXPECT_TRUE(std::equal(a.buf.begin(), a.buf.begin() + n, b.buf.begin() + 4096));
    EXPECT_TRUE(std::equal(a.buf.begin(), a.buf.begin() + n, a.buf.begin() + (4u << 20)));
    id += 2;
  }
}

TEST_P(IwarpData, ManyMessagesBothWays) {
  constexpr int kN = 200;
  for (int i = 0; i < kN; ++i) {
    ASSERT_EQ(b.post_recv(i, static_cast<std::size_t>(i) * 2048, 2048), 0);
    ASSERT_EQ(a.post_recv(i, static_cast<std::size_t>(i) * 2048, 2048), 0);
  }
  for (int i = 0; i < kN; ++i) {
    fill(a.buf, 1u << 20, 2000, static_cast<std::uint8_t>(i));
    ASSERT_EQ(a.post(WrOpcode::kSend, i, 1u << 20, 1 + i * 9, 0, 0,
                     core::kSendSignaled | core::kSendSolicited),
              0);
    ASSERT_EQ(b.post(WrOpcode::kSend, i, 1u << 20, 2 + i * 3), 0);
    auto s = a.wait_wc(a.scq);
    ASSERT_TRUE(s);
    ASSERT_EQ(s->status, WcStatus::kSuccess);
    ASSERT_TRUE(b.wait_wc(b.scq));
  }
  for (int i = 0; i < kN; ++i) {
    auto r = b.wait_wc(b.rcq);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->wr_id, static_cast<std::uint64_t>(i));
    EXPECT_EQ(r->byte_len, static_cast<std::uint32_t>(1 + i * 9));
    auto r2 = a.wait_wc(a.rcq);
    ASSERT_TRUE(r2);
    EXPECT_EQ(r2->byte_len, static_cast<std::uint32_t>(2 + i * 3));
  }
}

INSTANTIATE_TEST_SUITE_P(Mpa, IwarpData,
                         testing::Values(Config{1, false, false, RtrType::kNone},
                                         Config{1, true, false, RtrType::kNone},
                                         Config{1, true, true, RtrType::kNone},
                                         Config{1, false, true, RtrType::kNone},
                                         Config{2, false, false, RtrType::kZeroRead},
                                         Config{2, true, false, RtrType::kZeroRead},
                                         Config{2, true, true, RtrType::kZeroWrite},
                                         Config{2, false, true, RtrType::kZeroSend},
                                         Config{2, true, false, RtrType::kNone}),
                         name_of);

class IwarpOps : public testing::Test {
 protected:
  void connect(MpaParams pa = {}, MpaParams pb = {}) {
    a.init({});
    b.init({});
    ASSERT_TRUE(connect_pair(a, b, pa, pb, tcp));
    ASSERT_TRUE(b.inbox.wait_event(QpEvent::Kind::kEstablished));
  }
  TcpPair tcp;
  Side a, b;
};

TEST_F(IwarpOps, OrdIsTheSmallerOfOurOrdAndPeerIrdAndManyReadsComplete) {
  MpaParams pa, pb;
  pa.ord = 16;
  pb.ird = 2;
  connect(pa, pb);
  EXPECT_EQ(a.qp->ord(), 2);
  EXPECT_EQ(b.qp->ird(), 2);
  fill(b.buf, 0, 64 * 1024, 7);
  for (int i = 0; i < 32; ++i) {
    ASSERT_EQ(a.post(WrOpcode::kRdmaRead, i, static_cast<std::size_t>(i) * 2048, 2048,
                     b.addr(static_cast<std::size_t>(i) * 2048), b.mr->rkey),
              0);
  }
  for (int i = 0; i < 32; ++i) {
    auto wc = a.wait_wc(a.scq);
    ASSERT_TRUE(wc);
    EXPECT_EQ(wc->status, WcStatus::kSuccess);
    EXPECT_EQ(wc->wr_id, static_cast<std::uint64_t>(i));
  }
  EXPECT_TRUE(std::equal(a.buf.begin(), a.buf.begin() + 64 * 1024, b.buf.begin()));
  EXPECT_EQ(b.qp->state(), core::QpState::kRts);
}

TEST_F(IwarpOps, SendWithInvalidateInvalidatesTheReceiversStag) {
  connect();
  ASSERT_EQ(b.post_recv(1, 0, 64), 0);
  ASSERT_EQ(a.post(WrOpcode::kSendWithInv, 1, 0, 8, 0, 0, core::kSendSignaled, b.mr->rkey), 0);
  auto r = b.wait_wc(b.rcq);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, WcStatus::kSuccess);
  EXPECT_TRUE(r->wc_flags & core::kWcWithInv);
  EXPECT_EQ(r->invalidated_rkey, b.mr->rkey);
  EXPECT_FALSE(b.mr->valid.load());
  // The STag is gone: a WRITE through it is a DDP tagged "invalid STag" error.
  ASSERT_EQ(a.post(WrOpcode::kRdmaWrite, 2, 0, 8, b.addr(), b.mr->rkey), 0);
  ASSERT_TRUE(b.inbox.wait_event(QpEvent::Kind::kTermSent));
  auto t = b.inbox.find(QpEvent::Kind::kTermSent);
  EXPECT_EQ(t->term.layer, 1);
  EXPECT_EQ(t->term.etype, 1);
  EXPECT_EQ(t->term.code, 0);
  ASSERT_TRUE(a.inbox.wait_event(QpEvent::Kind::kTermReceived));
}

TEST_F(IwarpOps, LocalInvalidateCompletesAndTheStagStopsWorking) {
  connect();
  ASSERT_EQ(b.post(WrOpcode::kLocalInv, 9, 0, 0, 0, 0, core::kSendSignaled, b.mr->rkey), 0);
  auto wc = b.wait_wc(b.scq);
  ASSERT_TRUE(wc);
  EXPECT_EQ(wc->status, WcStatus::kSuccess);
  EXPECT_EQ(wc->opcode, core::WcOpcode::kLocalInv);
  EXPECT_FALSE(b.mr->valid.load());
  ASSERT_EQ(a.post(WrOpcode::kRdmaRead, 3, 0, 8, b.addr(), b.mr->rkey), 0);
  auto r = a.wait_wc(a.scq);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, WcStatus::kRemAccessErr);
}

// Mixed revisions settle on revision 1 (no IRD/ORD words, no RTR), whichever side has it.
TEST_F(IwarpOps, MixedRevisionsFallBackToRevisionOne) {
  for (const bool initiator_v1 : {false, true}) {
    SCOPED_TRACE(initiator_v1);
    TcpPair t;
    Side x, y;
    x.init({}, 1u << 20);
    y.init({}, 1u << 20);
    MpaParams v1, v2;
    v1.revision = 1;
    v2.revision = 2;
    v2.crc = true;
    ASSERT_TRUE(connect_pair(x, y, initiator_v1 ? v1 : v2, initiator_v1 ? v2 : v1, t));
    EXPECT_TRUE(x.inbox.connect->private_data.empty());
    EXPECT_EQ(x.inbox.connect->peer_ird, 0);  // revision 1 carries no IRD/ORD
    fill(x.buf, 0, 3000, 1);
    ASSERT_EQ(x.post(WrOpcode::kRdmaWrite, 1, 0, 3000, y.addr(), y.mr->rkey), 0);
    ASSERT_EQ(x.post(WrOpcode::kRdmaRead, 2, 4096, 3000, y.addr(), y.mr->rkey), 0);
    ASSERT_TRUE(x.wait_wc(x.scq));
    auto r = x.wait_wc(x.scq);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, WcStatus::kSuccess);
    EXPECT_TRUE(std::equal(x.buf.begin(), x.buf.begin() + 3000, x.buf.begin() + 4096));
    // The revision 2 side asked for CRC: both use it.
    EXPECT_TRUE(x.qp->crc_in_use());
    EXPECT_TRUE(y.qp->crc_in_use());
  }
}

TEST_F(IwarpOps, SharedReceiveQueueFeedsSends) {
  a.init({});
  b.init({});
  int err = 0;
  Srq* srq = b.dev->create_srq(b.pd, 16, 1, 0, &err);
  ASSERT_TRUE(srq);
  core::QpCap cap{16, 0, 1, 1, 0};
  Qp* q = b.dev->create_qp(b.pd, core::QpType::kRc, b.scq, b.rcq, srq, cap, false, &err);
  ASSERT_TRUE(q);
  b.qp = q;                                 // the SRQ's QP takes the connection
  EXPECT_EQ(b.post_recv(1, 0, 8), EINVAL);  // its receives come from the SRQ
  for (int i = 0; i < 3; ++i) {
    core::Sge s = b.sge(static_cast<std::size_t>(i) * 100, 100);
    core::RecvWr wr;
    wr.wr_id = static_cast<std::uint64_t>(10 + i);
    wr.sg_list = std::span<const core::Sge>(&s, 1);
    ASSERT_EQ(srq->post(wr), 0);
  }
  ASSERT_TRUE(connect_pair(a, b, {}, {}, tcp));
  for (int i = 0; i < 3; ++i) ASSERT_EQ(a.post(WrOpcode::kSend, i, 0, 50 + i), 0);
  for (int i = 0; i < 3; ++i) {
    auto r = b.wait_wc(b.rcq);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, WcStatus::kSuccess);
    EXPECT_EQ(r->wr_id, static_cast<std::uint64_t>(10 + i));
    EXPECT_EQ(r->byte_len, static_cast<std::uint32_t>(50 + i));
  }
  EXPECT_EQ(b.dev->destroy_srq(srq), EBUSY);  // still used by the QP
}

TEST_F(IwarpOps, ImmediateAndAtomicsAreNotSupported) {
  connect();
  for (auto op : {WrOpcode::kRdmaWriteWithImm, WrOpcode::kSendWithImm, WrOpcode::kAtomicCmpAndSwp,
                  WrOpcode::kAtomicFetchAndAdd, WrOpcode::kBindMw}) {
    EXPECT_EQ(a.post(op, 1, 0, 8, b.addr(), b.mr->rkey), EOPNOTSUPP);
  }
  core::QpCap cap{4, 4, 1, 1, 0};
  int err = 0;
  EXPECT_EQ(a.dev->create_qp(a.pd, core::QpType::kUd, a.scq, a.rcq, nullptr, cap, false, &err),
            nullptr);
  EXPECT_EQ(err, EOPNOTSUPP);
  EXPECT_EQ(a.dev->create_qp(a.pd, core::QpType::kUc, a.scq, a.rcq, nullptr, cap, false, &err),
            nullptr);
  EXPECT_EQ(err, EOPNOTSUPP);
}

TEST_F(IwarpOps, FpduSizeFollowsTheConfiguredLimit) {
  DeviceConfig big, small;
  big.tx.max_fpdu = 65535;
  small.tx.max_fpdu = 1460;
  a.init(big);
  b.init(small);
  MpaParams p;
  p.crc = true;
  ASSERT_TRUE(connect_pair(a, b, p, p, tcp));
  fill(a.buf, 0, 1u << 20, 3);
  ASSERT_EQ(a.post(WrOpcode::kRdmaWrite, 1, 0, 1u << 20, b.addr(), b.mr->rkey), 0);
  ASSERT_EQ(a.post(WrOpcode::kRdmaRead, 2, 2u << 20, 8, b.addr(), b.mr->rkey), 0);
  ASSERT_TRUE(a.wait_wc(a.scq));
  auto r = a.wait_wc(a.scq);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, WcStatus::kSuccess);
  EXPECT_TRUE(std::equal(a.buf.begin(), a.buf.begin() + (1u << 20), b.buf.begin()));
  // 1 MiB in FPDUs of up to 64 KiB: about 17 of them; the other way, 1460-byte FPDUs.
  EXPECT_LT(a.qp->counters().tx_fpdus, 40u);
  fill(b.buf, 0, 1u << 20, 5);
  ASSERT_EQ(b.post(WrOpcode::kRdmaWrite, 3, 0, 1u << 20, a.addr(4u << 20), a.mr->rkey), 0);
  ASSERT_TRUE(b.wait_wc(b.scq));
  EXPECT_GT(b.qp->counters().tx_fpdus, (1u << 20) / 1460);
}

}  // namespace
}  // namespace softrdma::iwarp::test
