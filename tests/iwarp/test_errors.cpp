// Connection setup outcomes (reject with private data, timeouts, private data limits) and
// errors: protection errors, no receive posted, CRC corruption -- each a TERMINATE with the
// right layer/type/code, error completions on both sides -- and closes (graceful, abortive,
// peer gone mid-transfer) ending in errors, never a hang.
#include <sys/wait.h>

#include "tests/iwarp/harness.h"
#include "wire/ddp_rdmap.h"

namespace softrdma::iwarp::test {
namespace {

using core::WcStatus;
using core::WrOpcode;

class IwarpErrors : public testing::Test {
 protected:
  void connect(MpaParams pa = {}, MpaParams pb = {}, DeviceConfig ca = {}, DeviceConfig cb = {},
               std::uint32_t b_access = 0xF & ~8u) {
    a.init(std::move(ca));
    b.init(std::move(cb), 8u << 20, b_access);
    ASSERT_TRUE(connect_pair(a, b, pa, pb, tcp));
    ASSERT_TRUE(b.inbox.wait_event(QpEvent::Kind::kEstablished));
  }
  // b detected the error and sent a TERMINATE with (layer, etype, code); a received it, with
  // the same code; both QPs are in ERR.
  void expect_terminate(std::uint8_t layer, std::uint8_t etype, std::uint8_t code) {
    ASSERT_TRUE(b.inbox.wait_event(QpEvent::Kind::kTermSent));
    ASSERT_TRUE(a.inbox.wait_event(QpEvent::Kind::kTermReceived));
    const auto sent = b.inbox.find(QpEvent::Kind::kTermSent);
    const auto got = a.inbox.find(QpEvent::Kind::kTermReceived);
    EXPECT_EQ(sent->term.layer, layer);
    EXPECT_EQ(sent->term.etype, etype);
    EXPECT_EQ(sent->term.code, code);
    EXPECT_EQ(got->term.layer, layer);
    EXPECT_EQ(got->term.etype, etype);
    EXPECT_EQ(got->term.code, code);
    EXPECT_EQ(a.qp->state(), core::QpState::kErr);
    EXPECT_EQ(b.qp->state(), core::QpState::kErr);
  }
  // Whether the result of a's connect came within `t`.
  bool a_has_connect_result(std::chrono::milliseconds t = 10s) {
    return a.inbox.wait([&] { return a.inbox.connect.has_value(); }, t);
  }
  // Closes both ends of the test's TCP connection (the devices do not own them).
  void close_tcp() {
    ::close(tcp.client);
    ::close(tcp.server);
  }
  TcpPair tcp;
  Side a, b;
};

constexpr std::uint8_t kRdmap = 0, kDdp = 1, kMpa = 2;

TEST_F(IwarpErrors, WriteWithABadStagIsADdpTaggedInvalidStag) {
  connect();
  ASSERT_EQ(b.post_recv(1, 0, 64), 0);
  // One post: both are on the wire before the TERMINATE can come back.
  core::Sge s = a.sge(0, 64);
  core::SendWr wr[2];
  wr[0].wr_id = 1;
  wr[0].opcode = WrOpcode::kRdmaWrite;
  wr[0].send_flags = core::kSendSignaled;
  wr[0].sg_list = std::span<const core::Sge>(&s, 1);
  wr[0].remote_addr = b.addr();
  wr[0].rkey = b.mr->rkey ^ 0x1234;
  wr[1] = wr[0];
  wr[1].wr_id = 2;
  wr[1].opcode = WrOpcode::kRdmaRead;
  wr[1].rkey = b.mr->rkey;
  ASSERT_EQ(a.qp->post_send(wr), 0);
  expect_terminate(kDdp, 1, 0x00);
  // a: the WRITE had gone (success), the READ outstanding fails with the remote error.
  auto w = a.wait_wc(a.scq);
  ASSERT_TRUE(w);
  EXPECT_EQ(w->wr_id, 1u);
  auto r = a.wait_wc(a.scq);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->wr_id, 2u);
  EXPECT_EQ(r->status, WcStatus::kRemAccessErr);
  // b: its posted receive is flushed.
  auto f = b.wait_wc(b.rcq);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->status, WcStatus::kWrFlushErr);
  // Nothing was written.
  EXPECT_TRUE(std::all_of(b.buf.begin(), b.buf.begin() + 64, [](auto c) { return c == 0; }));
}

TEST_F(IwarpErrors, WriteOutOfBoundsIsADdpTaggedBaseBounds) {
  connect();
  ASSERT_EQ(a.post(WrOpcode::kRdmaWrite, 1, 0, 4096, b.addr(b.buf.size() - 100), b.mr->rkey), 0);
  expect_terminate(kDdp, 1, 0x01);
}

TEST_F(IwarpErrors, WriteWithoutRemoteWriteAccessIsAnRdmapAccessViolation) {
  connect({}, {}, {}, {}, core::kAccessLocalWrite | core::kAccessRemoteRead);
  ASSERT_EQ(a.post(WrOpcode::kRdmaWrite, 1, 0, 16, b.addr(), b.mr->rkey), 0);
  expect_terminate(kRdmap, 1, 0x02);
}

TEST_F(IwarpErrors, ReadWithABadStagIsAnRdmapRemoteProtectionError) {
  connect();
  ASSERT_EQ(a.post(WrOpcode::kRdmaRead, 7, 0, 16, b.addr(), b.mr->rkey + 1), 0);
  expect_terminate(kRdmap, 1, 0x00);
  auto r = a.wait_wc(a.scq);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->wr_id, 7u);
  EXPECT_EQ(r->status, WcStatus::kRemAccessErr);
}

TEST_F(IwarpErrors, ReadWithoutRemoteReadAccessIsAnRdmapAccessViolation) {
  connect({}, {}, {}, {}, core::kAccessLocalWrite | core::kAccessRemoteWrite);
  ASSERT_EQ(a.post(WrOpcode::kRdmaRead, 7, 0, 16, b.addr(), b.mr->rkey), 0);
  expect_terminate(kRdmap, 1, 0x02);
}

TEST_F(IwarpErrors, SendWithNoReceivePostedIsADdpUntaggedNoBuffer) {
  connect();
  ASSERT_EQ(a.post(WrOpcode::kSend, 1, 0, 10), 0);
  ASSERT_EQ(a.post(WrOpcode::kRdmaRead, 2, 0, 8, b.addr(), b.mr->rkey), 0);
  expect_terminate(kDdp, 2, 0x02);
  ASSERT_TRUE(a.wait_wc(a.scq));
  auto r = a.wait_wc(a.scq);
  ASSERT_TRUE(r);
  EXPECT_NE(r->status, WcStatus::kSuccess);
}

TEST_F(IwarpErrors, SendLongerThanTheReceiveIsADdpMessageTooLong) {
  connect();
  ASSERT_EQ(b.post_recv(1, 0, 8), 0);
  ASSERT_EQ(a.post(WrOpcode::kSend, 1, 0, 9), 0);
  expect_terminate(kDdp, 2, 0x05);
  auto r = b.wait_wc(b.rcq);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, WcStatus::kLocLenErr);
}

TEST_F(IwarpErrors, SendWithInvalidateOfAForeignStagCannotInvalidate) {
  connect();
  ASSERT_EQ(b.post_recv(1, 0, 64), 0);
  ASSERT_EQ(a.post(WrOpcode::kSendWithInv, 1, 0, 8, 0, 0, core::kSendSignaled, 0xDEADBEEF), 0);
  expect_terminate(kRdmap, 2, 0x09);
}

TEST_F(IwarpErrors, CorruptedFpduIsCaughtByTheCrcAndTerminates) {
  DeviceConfig faulty;
  faulty.tx.corrupt_nth = 3;
  MpaParams p;
  p.crc = true;
  connect(p, p, faulty, {});
  for (int i = 0; i < 4; ++i) ASSERT_EQ(b.post_recv(i, static_cast<std::size_t>(i) * 256, 256), 0);
  for (int i = 0; i < 4; ++i) ASSERT_EQ(a.post(WrOpcode::kSend, i, 0, 100), 0);
  expect_terminate(kMpa, 0, 0x02);
  EXPECT_EQ(b.qp->counters().crc_errors, 1u);
  // b: two receives completed, the rest flushed.
  int ok = 0, flushed = 0;
  for (int i = 0; i < 4; ++i) {
    auto r = b.wait_wc(b.rcq);
    ASSERT_TRUE(r);
    (r->status == WcStatus::kSuccess ? ok : flushed)++;
  }
  EXPECT_EQ(ok, 2);
  EXPECT_EQ(flushed, 2);
}

TEST_F(IwarpErrors, CorruptionOfALargeWriteSegmentIsCaughtByTheCrc) {
  DeviceConfig faulty;
  faulty.tx.max_fpdu = 65535;
  faulty.tx.corrupt_nth = 2;
  MpaParams p;
  p.crc = true;
  connect(p, p, faulty, {});
  fill(a.buf, 0, 1u << 20, 4);
  ASSERT_EQ(a.post(WrOpcode::kRdmaWrite, 1, 0, 1u << 20, b.addr(), b.mr->rkey), 0);
  expect_terminate(kMpa, 0, 0x02);
  EXPECT_EQ(b.qp->counters().crc_errors, 1u);
}

TEST_F(IwarpErrors, WithoutCrcTheCorruptionGoesUnnoticed) {
  // The control experiment: the same corruption (the last payload byte of the third FPDU)
  // without CRC is delivered as data -- which is why CRC matters.
  DeviceConfig faulty;
  faulty.tx.corrupt_nth = 3;
  connect({}, {}, faulty, {});
  for (int i = 0; i < 4; ++i) ASSERT_EQ(b.post_recv(i, static_cast<std::size_t>(i) * 256, 256), 0);
  fill(a.buf, 0, 100, 1);
  for (int i = 0; i < 4; ++i) ASSERT_EQ(a.post(WrOpcode::kSend, i, 0, 100), 0);
  for (int i = 0; i < 4; ++i) {
    auto r = b.wait_wc(b.rcq);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, WcStatus::kSuccess);
  }
  EXPECT_EQ(a.qp->counters().faults_injected, 1u);
  EXPECT_EQ(b.qp->counters().crc_errors, 0u);
  EXPECT_TRUE(std::equal(a.buf.begin(), a.buf.begin() + 100, b.buf.begin() + 256));
  EXPECT_FALSE(std::equal(a.buf.begin(), a.buf.begin() + 100, b.buf.begin() + 512));
  EXPECT_EQ(b.buf[512 + 99], a.buf[99] ^ 0x5A);
}

TEST_F(IwarpErrors, DeregisteringTheTargetMidTransferEndsInAnInvalidStag) {
  DeviceConfig big;
  big.tx.max_fpdu = 65535;
  connect({}, {}, big, big);
  for (int i = 0; i < 64; ++i) {
    ASSERT_EQ(a.post(WrOpcode::kRdmaWrite, i, 0, 4u << 20, b.addr(), b.mr->rkey), 0);
  }
  wait_until([&] { return b.qp->counters().rx_bytes > 0; });  // the transfer is under way
  ASSERT_EQ(b.dev->dereg_mr(b.mr->lkey), 0);
  // Deregistration waits for copies in flight (it may return only once the stream has
  // drained, a reader-preferring lock under steady traffic): one more WRITE after it makes
  // the outcome certain whatever the timing.
  if (a.qp->state() == core::QpState::kRts) {
    ASSERT_EQ(a.post(WrOpcode::kRdmaWrite, 99, 0, 4096, b.addr(), b.mr->rkey), 0);
  }
  // Whatever was in flight, nothing is placed after the deregistration and the WRITE
  // stream ends in a TERMINATE (DDP tagged, invalid STag).
  expect_terminate(kDdp, 1, 0x00);
}

TEST_F(IwarpErrors, RejectCarriesPrivateData) {
  a.init({});
  b.init({});
  ASSERT_EQ(b.dev->read_request(tcp.server, 5s, b.inbox.on_request()), 0);
  MpaParams p;
  p.private_data = {'h', 'e', 'l', 'l', 'o'};
  ASSERT_EQ(a.dev->connect(a.qp, tcp.client, p, a.inbox.on_connect()), 0);
  ASSERT_TRUE(b.inbox.wait([&] { return b.inbox.request.has_value(); }));
  EXPECT_EQ(b.inbox.request->error, 0);
  EXPECT_EQ(b.inbox.request->request.revision, 2);
  EXPECT_EQ(b.inbox.request->request.private_data, p.private_data);
  const std::vector<std::uint8_t> why(300, 0x42);
  ASSERT_EQ(b.dev->reject(tcp.server, why), 0);
  ASSERT_TRUE(a_has_connect_result());
  EXPECT_EQ(a.inbox.connect->kind, ConnectResult::Kind::kRejected);
  EXPECT_EQ(a.inbox.connect->private_data, why);
  EXPECT_NE(a.qp->state(), core::QpState::kRts);
  close_tcp();
}

TEST_F(IwarpErrors, PrivateDataOverTheMpaLimitIsRefused) {
  a.init({});
  MpaParams p;
  p.private_data.assign(509, 1);  // revision 2: 512 less the IRD/ORD words
  EXPECT_EQ(a.dev->connect(a.qp, tcp.client, p, [](const ConnectResult&) {}), EINVAL);
  p.revision = 1;
  p.private_data.assign(513, 1);
  EXPECT_EQ(a.dev->connect(a.qp, tcp.client, p, [](const ConnectResult&) {}), EINVAL);
  close_tcp();
}

TEST_F(IwarpErrors, NoReplyTimesOut) {
  a.init({});
  MpaParams p;
  p.timeout = 200ms;
  ASSERT_EQ(a.dev->connect(a.qp, tcp.client, p, a.inbox.on_connect()), 0);
  ASSERT_TRUE(a_has_connect_result(5s));
  EXPECT_EQ(a.inbox.connect->kind, ConnectResult::Kind::kError);
  EXPECT_EQ(a.inbox.connect->error, ETIMEDOUT);
  close_tcp();
}

TEST_F(IwarpErrors, NoRequestTimesOut) {
  b.init({});
  ASSERT_EQ(b.dev->read_request(tcp.server, 200ms, b.inbox.on_request()), 0);
  ASSERT_TRUE(b.inbox.wait([&] { return b.inbox.request.has_value(); }, 5s));
  EXPECT_EQ(b.inbox.request->error, ETIMEDOUT);
  close_tcp();
}

TEST_F(IwarpErrors, GarbageInsteadOfAReplyIsAProtocolError) {
  a.init({});
  ASSERT_EQ(a.dev->connect(a.qp, tcp.client, {}, a.inbox.on_connect()), 0);
  const char junk[] = "HTTP/1.1 400 Bad Request\r\n\r\n";
  ASSERT_GT(::send(tcp.server, junk, sizeof junk, 0), 0);
  ASSERT_TRUE(a_has_connect_result(5s));
  EXPECT_EQ(a.inbox.connect->error, EPROTO);
  close_tcp();
}

TEST_F(IwarpErrors, PeerClosingBeforeTheReplyIsAReset) {
  a.init({});
  ASSERT_EQ(a.dev->connect(a.qp, tcp.client, {}, a.inbox.on_connect()), 0);
  ::close(tcp.server);
  ASSERT_TRUE(a_has_connect_result(5s));
  EXPECT_EQ(a.inbox.connect->error, ECONNRESET);
  ::close(tcp.client);
}

TEST_F(IwarpErrors, GracefulDisconnectReachesBothSides) {
  connect();
  ASSERT_EQ(b.post_recv(1, 0, 1u << 20), 0);
  ASSERT_EQ(b.post_recv(2, 0, 64), 0);
  ASSERT_EQ(a.post(WrOpcode::kSend, 1, 0, 1u << 20), 0);
  ASSERT_EQ(a.dev->disconnect(a.qp), 0);
  // The Send queued before the disconnect is delivered whole.
  auto r = b.wait_wc(b.rcq);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, WcStatus::kSuccess);
  EXPECT_EQ(r->byte_len, 1u << 20);
  ASSERT_TRUE(b.inbox.wait_event(QpEvent::Kind::kDisconnected));
  EXPECT_EQ(b.qp->state(), core::QpState::kErr);
  auto f = b.wait_wc(b.rcq);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->status, WcStatus::kWrFlushErr);
  ASSERT_EQ(b.dev->disconnect(b.qp), 0);
  ASSERT_TRUE(a.inbox.wait_event(QpEvent::Kind::kDisconnected));
}

TEST_F(IwarpErrors, AbortMidTransferGivesErrorsNotAHang) {
  connect();
  ASSERT_EQ(b.post_recv(1, 0, 8u << 20), 0);
  // 512 MiB queued in one post (which returns once the socket buffer is full): far more than
  // the loopback moves before the abort right after it.
  core::Sge sw = a.sge(0, 4u << 20);
  core::Sge sr = a.sge(0, 8);
  std::vector<core::SendWr> wrs(129);
  for (int i = 0; i < 129; ++i) {
    core::SendWr& w = wrs[static_cast<std::size_t>(i)];
    w.wr_id = i < 128 ? static_cast<std::uint64_t>(i) : 99;
    w.opcode = i < 128 ? WrOpcode::kRdmaWrite : WrOpcode::kRdmaRead;
    w.send_flags = core::kSendSignaled;
    w.sg_list = std::span<const core::Sge>(i < 128 ? &sw : &sr, 1);
    w.remote_addr = b.addr();
    w.rkey = b.mr->rkey;
  }
  ASSERT_EQ(a.qp->post_send(wrs), 0);
  ASSERT_EQ(b.dev->abort(b.qp), 0);
  // a: the connection reset ends everything outstanding with errors.
  ASSERT_TRUE(a.inbox.wait([&] {
    return a.inbox.has(QpEvent::Kind::kConnError) || a.inbox.has(QpEvent::Kind::kDisconnected);
  }));
  bool saw_error = false;
  for (int i = 0; i < 129; ++i) {
    auto wc = a.wait_wc(a.scq);
    ASSERT_TRUE(wc) << "completion " << i << " never came";
    if (wc->status != WcStatus::kSuccess) saw_error = true;
    if (wc->wr_id == 99) break;
  }
  EXPECT_TRUE(saw_error);
  EXPECT_EQ(a.qp->state(), core::QpState::kErr);
  auto f = b.wait_wc(b.rcq);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->status, WcStatus::kWrFlushErr);
}

TEST_F(IwarpErrors, PeerProcessKilledMidTransferGivesErrorsNotAHang) {
  // The peer is a child process that accepts the connection, reads part of the stream and is
  // killed: the kernel resets the connection.
  a.init({});
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(tcp.client);
    // Answer the MPA request by hand (revision 1, no CRC), then read a little and hang.
    std::uint8_t req[20 + 512];
    std::size_t got = 0;
    while (got < 20) got += static_cast<std::size_t>(::recv(tcp.server, req + got, 20 - got, 0));
    const std::size_t pd = wire::load16(req + 18);
    while (got < 20 + pd)
      got += static_cast<std::size_t>(::recv(tcp.server, req + got, 20 + pd - got, 0));
    wire::MpaFrame rep;
    rep.kind = wire::MpaKind::kReply;
    rep.revision = 1;
    std::uint8_t out[64];
    const auto n = wire::build_mpa(out, rep);
    if (::send(tcp.server, out, *n, 0) != static_cast<ssize_t>(*n)) _exit(1);
    std::uint8_t sink[65536];
    (void)::recv(tcp.server, sink, sizeof sink, 0);
    pause();
    _exit(0);
  }
  ::close(tcp.server);
  MpaParams p;
  p.revision = 1;
  ASSERT_EQ(a.dev->connect(a.qp, tcp.client, p, a.inbox.on_connect()), 0);
  ASSERT_TRUE(a_has_connect_result());
  ASSERT_EQ(a.inbox.connect->kind, ConnectResult::Kind::kAccepted);
  for (int i = 0; i < 8; ++i) {
    ASSERT_EQ(a.post(WrOpcode::kRdmaWrite, i, 0, 4u << 20, 0x1000, 0x1234), 0);
  }
  ASSERT_EQ(a.post(WrOpcode::kRdmaRead, 99, 0, 8, 0x1000, 0x1234), 0);
  wait_until([&] { return a.qp->counters().tx_bytes > 0; });  // the transfer is under way
  kill(child, SIGKILL);
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_TRUE(a.inbox.wait([&] {
    return a.inbox.has(QpEvent::Kind::kConnError) || a.inbox.has(QpEvent::Kind::kDisconnected);
  }));
  bool read_failed = false;
  for (int i = 0; i < 9; ++i) {
    auto wc = a.wait_wc(a.scq);
    ASSERT_TRUE(wc) << "completion " << i << " never came";
    if (wc->wr_id == 99) read_failed = wc->status != WcStatus::kSuccess;
  }
  EXPECT_TRUE(read_failed);
  EXPECT_EQ(a.qp->state(), core::QpState::kErr);
}

}  // namespace
}  // namespace softrdma::iwarp::test
