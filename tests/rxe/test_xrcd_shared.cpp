// XRC domains keyed by a file are the host's (core/xrcd_registry.h): two devices opening one
// file are in one domain (O_CREAT and O_EXCL decided across them, as the kernel decides them
// across processes), their XRC SRQs never share a number, a request naming another device's SRQ
// is passed to that device and executed there (rxe/xrc_relay.h), and a member whose process died
// without closing is dropped by the next open.
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include "core/xrcd_registry.h"
#include "tests/rxe/fixture.h"

namespace softrdma::rxe::test {
namespace {

struct TempFile {
  std::string path = "/tmp/softrdma-xrcd-XXXXXX";
  int fd = -1;
  TempFile() { fd = mkstemp(path.data()); }
  ~TempFile() {
    if (fd >= 0) close(fd);
    unlink(path.c_str());
  }
};

bool segment_exists(int fd) {
  struct stat st {};
  fstat(fd, &st);
  const std::string name = core::XrcdRegistry::segment_name(st.st_dev, st.st_ino);
  return access(("/dev/shm" + name).c_str(), F_OK) == 0;
}

TEST(XrcdShared, OpenCreateAndExclusiveAcrossDevices) {
  auto fabric = std::make_shared<netdev::MemoryFabric>();
  Node a(fabric, 1), b(fabric, 2);
  TempFile f;
  ASSERT_GE(f.fd, 0);
  int err = 0;
  EXPECT_EQ(b.dev->open_xrcd(f.fd, 0, &err), nullptr);  // nobody has it: no O_CREAT, no domain
  EXPECT_EQ(err, EINVAL);
  EXPECT_FALSE(segment_exists(f.fd));  // looking made nothing
  Xrcd* xa = a.dev->open_xrcd(f.fd, O_CREAT | O_EXCL, &err);
  ASSERT_NE(xa, nullptr);
  EXPECT_TRUE(segment_exists(f.fd));
  EXPECT_EQ(b.dev->open_xrcd(f.fd, O_CREAT | O_EXCL, &err), nullptr);  // a has it
  EXPECT_EQ(err, EINVAL);
  Xrcd* xb = b.dev->open_xrcd(f.fd, 0, &err);  // and b finds it
  ASSERT_NE(xb, nullptr);
  // The domain lives while either device has it open.
  EXPECT_EQ(a.dev->close_xrcd(xa), 0);
  Node c(fabric, 3);
  EXPECT_EQ(c.dev->open_xrcd(f.fd, O_CREAT | O_EXCL, &err), nullptr);
  Xrcd* xc = c.dev->open_xrcd(f.fd, 0, &err);
  ASSERT_NE(xc, nullptr);
  EXPECT_EQ(b.dev->close_xrcd(xb), 0);
  EXPECT_EQ(c.dev->close_xrcd(xc), 0);
  EXPECT_FALSE(segment_exists(f.fd));  // the last close removed it
  EXPECT_EQ(a.dev->open_xrcd(f.fd, 0, &err), nullptr);
  EXPECT_EQ(err, EINVAL);
}

TEST(XrcdShared, SrqNumbersAreTheDomains) {
  auto fabric = std::make_shared<netdev::MemoryFabric>();
  Node a(fabric, 1), b(fabric, 2);
  TempFile f;
  int err = 0;
  Xrcd* xa = a.dev->open_xrcd(f.fd, O_CREAT, &err);
  Xrcd* xb = b.dev->open_xrcd(f.fd, O_CREAT, &err);
  ASSERT_TRUE(xa && xb);
  // Each device alone would number its first SRQ 1: in one domain they take turns.
  std::vector<Srq*> sa, sb;
  for (int i = 0; i < 3; ++i) {
    sa.push_back(a.dev->create_xrc_srq(a.pd, xa, a.cq, 16, 1, 0, &err));
    sb.push_back(b.dev->create_xrc_srq(b.pd, xb, b.cq, 16, 1, 0, &err));
    ASSERT_TRUE(sa.back() && sb.back());
  }
  for (Srq* s : sa) {
    for (Srq* t : sb) EXPECT_NE(s->srqn, t->srqn);
  }
  // A private domain (no file) is the device's own: its numbers are not the host's.
  Xrcd* priv = b.dev->open_xrcd(-1, 0, &err);
  Srq* p = b.dev->create_xrc_srq(b.pd, priv, b.cq, 16, 1, 0, &err);
  ASSERT_NE(p, nullptr);
  // A number freed by one device may be taken by the other.
  const std::uint32_t freed = sa[0]->srqn;
  EXPECT_EQ(a.dev->destroy_srq(sa[0]), 0);
  core::XrcdRegistry* reg = xb->shared.get();
  ASSERT_NE(reg, nullptr);
  EXPECT_FALSE(reg->held_elsewhere(freed));
  EXPECT_TRUE(reg->held_elsewhere(sa[1]->srqn));
  EXPECT_FALSE(reg->held_elsewhere(sb[1]->srqn));  // its own
  for (Srq* s : {sa[1], sa[2]}) EXPECT_EQ(a.dev->destroy_srq(s), 0);
  for (Srq* s : sb) EXPECT_EQ(b.dev->destroy_srq(s), 0);
  EXPECT_EQ(b.dev->destroy_srq(p), 0);
  EXPECT_EQ(b.dev->close_xrcd(priv), 0);
  EXPECT_EQ(a.dev->close_xrcd(xa), 0);
  EXPECT_EQ(b.dev->close_xrcd(xb), 0);
}

// Brings XRC target `tgt` (on `tn`) and initiator `ini` (on `in`) up to RTS, connected to each
// other: all access, path MTU 1024, PSN `psn` both ways, the initiator's ACK timeout `timeout`
// with 7 retries and RNR retries for ever, `rd_atomic` READs and atomics outstanding.
void connect_xrc(Node& tn, Qp* tgt, Node& in, Qp* ini, std::uint32_t psn, std::uint8_t timeout,
                 std::uint8_t rd_atomic) {
  QpAttr at;
  at.qp_state = QpState::kInit;
  at.port_num = 1;
  at.qp_access_flags = kAllAccess;
  ASSERT_EQ(tgt->modify(at, kQpState | kQpPkeyIndex | kQpPort | kQpAccessFlags), 0);
  ASSERT_EQ(ini->modify(at, kQpState | kQpPkeyIndex | kQpPort | kQpAccessFlags), 0);
  at.qp_state = QpState::kRtr;
  at.path_mtu = Mtu::k1024;
  at.rq_psn = psn;
  at.min_rnr_timer = 1;
  at.max_dest_rd_atomic = rd_atomic;
  at.ah_attr.dgid = in.gid();
  at.dest_qp_num = ini->qpn();
  ASSERT_EQ(tgt->modify(at, kQpState | kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn | kQpMinRnrTimer |
                                kQpMaxDestRdAtomic),
            0);
  at.ah_attr.dgid = tn.gid();
  at.dest_qp_num = tgt->qpn();
  ASSERT_EQ(ini->modify(at, kQpState | kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn), 0);
  at.qp_state = QpState::kRts;
  at.timeout = timeout;
  at.retry_cnt = 7;
  at.rnr_retry = 7;  // for ever
  at.max_rd_atomic = rd_atomic;
  at.sq_psn = psn;
  ASSERT_EQ(tgt->modify(at, kQpState | kQpTimeout | kQpSqPsn), 0);
  ASSERT_EQ(ini->modify(at, kQpState | kQpTimeout | kQpSqPsn | kQpRetryCnt | kQpRnrRetry |
                                kQpMaxQpRdAtomic),
            0);
}

// Three devices: a and b share a domain (a file) and each has an XRC SRQ in it, a with a target
// QP connected to an initiator on c. Requests through a's target that name b's SRQ are passed to
// b (rxe/xrc_relay.h), as between two processes of one host.
class Relay : public ::testing::Test {
 protected:
  void SetUp() override {
    fabric = std::make_shared<netdev::MemoryFabric>();
    a = std::make_unique<Node>(fabric, 1);
    b = std::make_unique<Node>(fabric, 2);
    c = std::make_unique<Node>(fabric, 3);
    int err = 0;
    xa = a->dev->open_xrcd(f.fd, O_CREAT, &err);
    xb = b->dev->open_xrcd(f.fd, O_CREAT, &err);
    ASSERT_TRUE(xa && xb);
    srq_a = a->dev->create_xrc_srq(a->pd, xa, a->cq, 64, 1, 0, &err);
    srq_b = b->dev->create_xrc_srq(b->pd, xb, b->cq, 64, 1, 0, &err);
    ASSERT_TRUE(srq_a && srq_b);
    tgt = make_qp(*a, QpType::kXrcRecv, nullptr, xa);
    ini = make_qp(*c, QpType::kXrcSend);
    ASSERT_TRUE(tgt && ini);
    ASSERT_NO_FATAL_FAILURE(connect_xrc(*a, tgt, *c, ini, 0xFFFFFE, 14, 4));  // PSNs wrap soon
  }
  void TearDown() override {
    if (tgt) {
      EXPECT_EQ(a->dev->destroy_qp(tgt), 0);
    }
    if (ini) {
      EXPECT_EQ(c->dev->destroy_qp(ini), 0);
    }
    if (srq_a) {
      EXPECT_EQ(a->dev->destroy_srq(srq_a), 0);
    }
    if (srq_b) {
      EXPECT_EQ(b->dev->destroy_srq(srq_b), 0);
    }
    if (xa) {
      EXPECT_EQ(a->dev->close_xrcd(xa), 0);
    }
    if (xb) {
      EXPECT_EQ(b->dev->close_xrcd(xb), 0);
    }
  }
  void post(Srq* srq, const Buffer& buf, std::size_t off, std::uint32_t len, std::uint64_t id) {
    RecvWr r;
    r.wr_id = id;
    const Sge sg = buf.sge(off, len);
    r.sg_list = std::span(&sg, 1);
    ASSERT_EQ(srq->post(r), 0);
  }
  std::uint64_t hw(Node& n, const std::string& name) {
    for (const auto& [k, v] : n.dev->hw_counters()) {
      if (k == name) return v;
    }
    return ~0ull;
  }
  TempFile f;
  std::shared_ptr<netdev::MemoryFabric> fabric;
  std::unique_ptr<Node> a, b, c;
  Xrcd *xa = nullptr, *xb = nullptr;
  Srq *srq_a = nullptr, *srq_b = nullptr;
  Qp *tgt = nullptr, *ini = nullptr;
};

// SENDs of several packets, with immediate data, and empty, land in b's receive WQEs and
// complete on b's CQ as the target's (its QPN, the initiator's as source); one for a's own SRQ
// between them completes on a's. The guard bytes after each message are untouched.
TEST_F(Relay, SendsReachTheSrqOfAnotherDevice) {
  Buffer in_a(*a, 4096, kAllAccess, 0xA5), in_b(*b, 4 * 4096, kAllAccess, 0xA5);
  for (int i = 0; i < 4; ++i) post(srq_b, in_b, i * 4096, 4096, 100 + i);
  post(srq_a, in_a, 0, 4096, 200);
  Buffer src(*c, 4096, kAllAccess);
  for (std::size_t i = 0; i < src.bytes.size(); ++i)
    src.bytes[i] = static_cast<std::uint8_t>(i * 7);
  const std::uint32_t lens[] = {3000, 1024, 0, 2500};  // 3, 1, 1 and 3 packets
  for (int i = 0; i < 4; ++i) {
    const Sge s = src.sge(0, lens[i]);
    SendWr w = wr(i == 1 ? WrOpcode::kSendWithImm : WrOpcode::kSend, i, std::span(&s, 1));
    w.imm_data = 0xBEEF;
    w.remote_srqn = i == 2 ? srq_a->srqn : srq_b->srqn;
    ASSERT_EQ(ini->post_send(w), 0);
  }
  const std::vector<Wc> sent = wait_wc(c->cq, 4);
  ASSERT_EQ(sent.size(), 4u);
  for (const Wc& w : sent) {
    EXPECT_EQ(w.status, WcStatus::kSuccess) << w.wr_id;
  }
  const std::vector<Wc> got = wait_wc(b->cq, 3);
  ASSERT_EQ(got.size(), 3u);
  const std::uint32_t b_lens[] = {3000, 1024, 2500};
  for (int i = 0; i < 3; ++i) {
    const Wc& w = got[i];
    EXPECT_EQ(w.status, WcStatus::kSuccess);
    EXPECT_EQ(w.wr_id, 100u + i);
    EXPECT_EQ(w.qp_num, tgt->qpn());
    EXPECT_EQ(w.src_qp, ini->qpn());
    EXPECT_EQ(w.byte_len, b_lens[i]);
    EXPECT_EQ((w.wc_flags & kWcWithImm) != 0, i == 1);
    if (i == 1) {
      EXPECT_EQ(w.imm_data, 0xBEEFu);
    }
    const std::uint8_t* m = in_b.bytes.data() + i * 4096;
    EXPECT_TRUE(std::equal(m, m + b_lens[i], src.bytes.begin())) << i;
    EXPECT_TRUE(std::all_of(m + b_lens[i], m + 4096, [](auto x) { return x == 0xA5; })) << i;
  }
  const Wc own = one_wc(a->cq);
  EXPECT_EQ(own.wr_id, 200u);
  EXPECT_EQ(own.qp_num, tgt->qpn());
  EXPECT_EQ(own.byte_len, 0u);
  EXPECT_EQ(tgt->counters().xrc_relayed, 7u);  // the packets of the three messages for b
  EXPECT_EQ(tgt->counters().xrc_bad_srqn, 0u);
  EXPECT_EQ(hw(*b, "xrc_proxied"), 7u);
  EXPECT_EQ(tgt->state(), QpState::kRts);
}

// b's SRQ has no receive WQE: the initiator is told RNR (by a, for b) until b posts one.
TEST_F(Relay, RnrUntilTheHolderPostsAReceive) {
  Buffer in_b(*b, 4096, kAllAccess, 0xA5);
  Buffer src(*c, 2048, kAllAccess, 0x3C);
  const Sge s = src.sge(0, 2048);
  SendWr w = wr(WrOpcode::kSend, 9, std::span(&s, 1));
  w.remote_srqn = srq_b->srqn;
  ASSERT_EQ(ini->post_send(w), 0);
  EXPECT_TRUE(wait_until([&] { return ini->counters().rnr_naks_received >= 2; }));
  Wc none[2];
  EXPECT_EQ(c->cq->poll(none), 0);
  EXPECT_GE(tgt->counters().rnr_naks_sent, 2u);
  post(srq_b, in_b, 0, 4096, 1);
  EXPECT_EQ(one_wc(c->cq).status, WcStatus::kSuccess);
  const Wc w2 = one_wc(b->cq);
  EXPECT_EQ(w2.byte_len, 2048u);
  EXPECT_EQ(in_b.bytes[2047], 0x3C);
  EXPECT_EQ(in_b.bytes[2048], 0xA5);
}

// RDMA WRITE with immediate and atomics reach b's memory through rkeys of the SRQ's PD (b's);
// an rkey b does not have is a remote access error and fails the target; READ is not passed.
TEST_F(Relay, WritesAndAtomicsUseTheHoldersMemory) {
  Buffer in_b(*b, 8192, kAllAccess, 0xA5);
  post(srq_b, in_b, 4096, 64, 5);
  Buffer src(*c, 4096, kAllAccess, 0x5A);
  const Sge s = src.sge(0, 2100);
  SendWr w = rdma_wr(WrOpcode::kRdmaWriteWithImm, 1, std::span(&s, 1), in_b, 10);
  w.imm_data = 77;
  w.remote_srqn = srq_b->srqn;
  ASSERT_EQ(ini->post_send(w), 0);
  EXPECT_EQ(one_wc(c->cq).status, WcStatus::kSuccess);
  const Wc r = one_wc(b->cq);
  EXPECT_EQ(r.opcode, WcOpcode::kRecvRdmaWithImm);
  EXPECT_EQ(r.imm_data, 77u);
  EXPECT_EQ(r.qp_num, tgt->qpn());
  EXPECT_EQ(in_b.bytes[9], 0xA5);
  EXPECT_EQ(in_b.bytes[10], 0x5A);
  EXPECT_EQ(in_b.bytes[2109], 0x5A);
  EXPECT_EQ(in_b.bytes[2110], 0xA5);

  // Fetch and add on b's word at 4000: the initiator gets the old value.
  std::uint64_t word = 40;
  std::memcpy(in_b.bytes.data() + 4000, &word, 8);
  const Sge rs = src.sge(0, 8);
  SendWr fa = rdma_wr(WrOpcode::kAtomicFetchAndAdd, 2, std::span(&rs, 1), in_b, 4000);
  fa.compare_add = 2;
  fa.remote_srqn = srq_b->srqn;
  ASSERT_EQ(ini->post_send(fa), 0);
  EXPECT_EQ(one_wc(c->cq).status, WcStatus::kSuccess);
  std::uint64_t old = 0;
  std::memcpy(&old, src.bytes.data(), 8);
  EXPECT_EQ(old, 40u);
  std::memcpy(&word, in_b.bytes.data() + 4000, 8);
  EXPECT_EQ(word, 42u);

  // READ: refused (its responses would carry b's memory), the target fails.
  SendWr rd = rdma_wr(WrOpcode::kRdmaRead, 3, std::span(&rs, 1), in_b, 0);
  rd.remote_srqn = srq_b->srqn;
  ASSERT_EQ(ini->post_send(rd), 0);
  EXPECT_EQ(one_wc(c->cq).status, WcStatus::kRemInvReqErr);
  EXPECT_TRUE(wait_until([&] { return tgt->state() == QpState::kErr; }));
}

TEST_F(Relay, AnRkeyTheHolderDoesNotHaveIsARemoteAccessError) {
  Buffer in_b(*b, 4096, kAllAccess, 0xA5);
  Buffer elsewhere(*a, 4096, kAllAccess, 0xA5);  // a's: not in b's PD
  Buffer src(*c, 4096, kAllAccess, 0x5A);
  const Sge s = src.sge(0, 3000);
  SendWr w = rdma_wr(WrOpcode::kRdmaWrite, 1, std::span(&s, 1), elsewhere, 0);
  w.remote_srqn = srq_b->srqn;
  ASSERT_EQ(ini->post_send(w), 0);
  EXPECT_EQ(one_wc(c->cq).status, WcStatus::kRemAccessErr);
  EXPECT_TRUE(wait_until([&] { return tgt->state() == QpState::kErr; }));
  EXPECT_TRUE(std::all_of(elsewhere.bytes.begin(), elsewhere.bytes.end(),
                          [](auto x) { return x == 0xA5; }));
  EXPECT_TRUE(std::all_of(in_b.bytes.begin(), in_b.bytes.end(), [](auto x) { return x == 0xA5; }));
}

// b destroys its SRQ while requests for it keep coming through a's target (RNR NAKs, and the
// initiator's resends every 10 us, once its receives are used up): the proxies go with it
// (destroy_srq waits for a request under way), the next request is refused, nothing is
// delivered after the destroy, and every send of the initiator ends: those b took successfully,
// then an error.
TEST_F(Relay, SrqDestroyedWhileRequestsForItArrive) {
  constexpr int kSends = 50, kRecvs = 8;
  Buffer in_b(*b, kRecvs * 2048, kAllAccess, 0xA5);
  for (int i = 0; i < kRecvs; ++i) post(srq_b, in_b, i * 2048, 2048, i);
  Buffer src(*c, 2048, kAllAccess, 0x3C);
  const Sge s = src.sge(0, 2048);  // 2 packets
  for (int i = 0; i < kSends; ++i) {
    SendWr w = wr(WrOpcode::kSend, i, std::span(&s, 1));
    w.remote_srqn = srq_b->srqn;
    ASSERT_EQ(ini->post_send(w), 0);
  }
  EXPECT_TRUE(wait_until([&] { return tgt->counters().rnr_naks_sent >= 20; }));
  EXPECT_EQ(b->cq->count(), static_cast<std::size_t>(kRecvs));
  EXPECT_EQ(b->dev->destroy_srq(srq_b), 0);
  srq_b = nullptr;
  const std::vector<Wc> sent = wait_wc(c->cq, kSends);
  ASSERT_EQ(sent.size(), static_cast<std::size_t>(kSends));  // each ends, one way or another
  for (int i = 0; i < kSends; ++i) {
    EXPECT_EQ(sent[i].wr_id, static_cast<std::uint64_t>(i));
    if (i < kRecvs) {
      EXPECT_EQ(sent[i].status, WcStatus::kSuccess) << i;
    } else if (i == kRecvs) {
      EXPECT_EQ(sent[i].status, WcStatus::kRemInvReqErr);
    } else {
      EXPECT_EQ(sent[i].status, WcStatus::kWrFlushErr) << i;
    }
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  Wc got[kRecvs + 1];
  ASSERT_EQ(b->cq->poll(got), kRecvs);  // nothing after the destroy
  for (int i = 0; i < kRecvs; ++i) {
    EXPECT_EQ(got[i].status, WcStatus::kSuccess);
    EXPECT_EQ(got[i].wr_id, static_cast<std::uint64_t>(i));
    EXPECT_EQ(got[i].byte_len, 2048u);
  }
}

// An SRQ number the domain's registry gives to nobody is refused, as within one device.
TEST_F(Relay, AnSrqNobodyHoldsIsRefused) {
  Buffer src(*c, 64, kAllAccess);
  const Sge s = src.sge(0, 64);
  SendWr w = wr(WrOpcode::kSend, 1, std::span(&s, 1));
  w.remote_srqn = srq_b->srqn + 1000;
  ASSERT_EQ(ini->post_send(w), 0);
  EXPECT_EQ(one_wc(c->cq).status, WcStatus::kRemInvReqErr);
  EXPECT_EQ(tgt->counters().xrc_bad_srqn, 1u);
  EXPECT_EQ(tgt->counters().xrc_srq_elsewhere, 0u);
  EXPECT_EQ(tgt->counters().xrc_relayed, 0u);
}

// The holder is another process that stops (SIGSTOP) while a request waits for its answer: the
// target forgets the request after a second, the initiator sends it again, and when the holder
// runs again it gets both, executes the first and answers the second as a duplicate. The
// message is delivered once (the holder posted two receives), and the initiator's send succeeds.
TEST(RelayHolderProcess, StalledHolderExecutesAResendOnce) {
  TempFile f;
  int up[2], down[2];
  ASSERT_EQ(pipe(up), 0);
  ASSERT_EQ(pipe(down), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The holder: a device of its own (its fabric reaches nobody: only the relay matters).
    auto fabric = std::make_shared<netdev::MemoryFabric>();
    Node b(fabric, 2);
    int err = 0;
    Xrcd* xb = b.dev->open_xrcd(f.fd, O_CREAT, &err);
    Srq* srq = xb ? b.dev->create_xrc_srq(b.pd, xb, b.cq, 16, 1, 0, &err) : nullptr;
    Buffer in(b, 8192, kAllAccess, 0xA5);
    for (int i = 0; i < 2 && srq; ++i) {
      RecvWr r;
      r.wr_id = i;
      const Sge sg = in.sge(i * 4096, 4096);
      r.sg_list = std::span(&sg, 1);
      srq->post(r);
    }
    const std::uint32_t srqn = srq ? srq->srqn : 0;
    (void)!write(up[1], &srqn, sizeof srqn);
    char c;
    (void)!read(down[0], &c, 1);  // the parent's send completed: count what arrived
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    Wc wc[4];
    std::uint32_t got = 0;
    for (int n; (n = b.cq->poll(wc)) > 0;) got += static_cast<std::uint32_t>(n);
    const std::uint32_t report[2] = {got, in.bytes[0] == 0x3C && in.bytes[4096] == 0xA5 ? 1u : 0u};
    (void)!write(up[1], report, sizeof report);
    b.dev->destroy_srq(srq);
    b.dev->close_xrcd(xb);
    _exit(0);
  }
  std::uint32_t srqn = 0;
  ASSERT_EQ(read(up[0], &srqn, sizeof srqn), static_cast<ssize_t>(sizeof srqn));
  ASSERT_NE(srqn, 0u);
  auto fabric = std::make_shared<netdev::MemoryFabric>();
  Node a(fabric, 1), c(fabric, 3);
  int err = 0;
  Xrcd* xa = a.dev->open_xrcd(f.fd, O_CREAT, &err);
  ASSERT_NE(xa, nullptr);
  Qp* tgt = make_qp(a, QpType::kXrcRecv, nullptr, xa);
  Qp* ini = make_qp(c, QpType::kXrcSend);
  // The initiator's ACK timeout 19 (2.1 s): the resend comes after the target forgot the
  // request (1 s).
  ASSERT_NO_FATAL_FAILURE(connect_xrc(a, tgt, c, ini, 500, 19, 1));
  ASSERT_EQ(kill(child, SIGSTOP), 0);
  Buffer src(c, 1000, kAllAccess, 0x3C);
  const Sge s = src.sge(0, 1000);
  SendWr w = wr(WrOpcode::kSend, 1, std::span(&s, 1));
  w.remote_srqn = srqn;
  ASSERT_EQ(ini->post_send(w), 0);
  // Past the target's 1 s and the initiator's resend (the next one, should the first come
  // before the target forgot), then let the holder run.
  EXPECT_TRUE(
      wait_until([&] { return tgt->counters().xrc_relayed >= 2; }, std::chrono::seconds(10)));
  EXPECT_EQ(tgt->counters().xrc_relayed, 2u);  // the request, and its resend
  ASSERT_EQ(kill(child, SIGCONT), 0);
  const Wc wc = one_wc(c.cq);
  EXPECT_EQ(wc.status, WcStatus::kSuccess);
  ASSERT_EQ(write(down[1], "x", 1), 1);
  std::uint32_t report[2] = {};
  ASSERT_EQ(read(up[0], report, sizeof report), static_cast<ssize_t>(sizeof report));
  EXPECT_EQ(report[0], 1u);  // delivered once
  EXPECT_EQ(report[1], 1u);  // into the first receive, the second untouched
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  for (int fd : {up[0], up[1], down[0], down[1]}) close(fd);
  EXPECT_EQ(a.dev->destroy_qp(tgt), 0);
  EXPECT_EQ(c.dev->destroy_qp(ini), 0);
  EXPECT_EQ(a.dev->close_xrcd(xa), 0);
}

// Another process in the domain: while it lives O_EXCL fails here and its SRQ number is
// another member's; once it died without closing, the next open drops it: O_EXCL then makes the
// domain afresh, and the dead member's SRQ numbers are free again.
TEST(XrcdShared, AnotherProcessAndOneThatDied) {
  TempFile f;
  struct stat st {};
  ASSERT_EQ(fstat(f.fd, &st), 0);
  int up[2], down[2];
  ASSERT_EQ(pipe(up), 0);
  ASSERT_EQ(pipe(down), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // Only the registry, no device: nothing of the parent's threads is needed.
    int e = 0;
    auto reg = core::XrcdRegistry::join(st.st_dev, st.st_ino, O_CREAT, 0, &e);
    const std::uint32_t n = reg ? reg->claim_srqn(5, [](std::uint32_t) { return true; }) : 0;
    (void)!write(up[1], &n, sizeof n);
    char c;
    (void)!read(down[0], &c, 1);
    (void)reg.release();  // dies holding it
    _exit(0);
  }
  std::uint32_t n = 0;
  ASSERT_EQ(read(up[0], &n, sizeof n), static_cast<ssize_t>(sizeof n));
  EXPECT_EQ(n, 5u);
  int e = 0;
  EXPECT_EQ(core::XrcdRegistry::join(st.st_dev, st.st_ino, O_CREAT | O_EXCL, 0, &e), nullptr);
  EXPECT_EQ(e, EINVAL);
  {
    auto found = core::XrcdRegistry::join(st.st_dev, st.st_ino, 0, 0, &e);
    ASSERT_NE(found, nullptr);
    EXPECT_TRUE(found->held_elsewhere(5));
    EXPECT_EQ(found->claim_srqn(5, [](std::uint32_t) { return true; }), 6u);
  }
  ASSERT_EQ(write(down[1], "x", 1), 1);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  for (int fd : {up[0], up[1], down[0], down[1]}) close(fd);
  EXPECT_TRUE(segment_exists(f.fd));  // the dead member is still listed
  auto reg = core::XrcdRegistry::join(st.st_dev, st.st_ino, O_CREAT | O_EXCL, 0, &e);
  ASSERT_NE(reg, nullptr) << e;
  EXPECT_FALSE(reg->held_elsewhere(5));
  EXPECT_EQ(reg->claim_srqn(5, [](std::uint32_t) { return true; }), 5u);
  reg.reset();
  EXPECT_FALSE(segment_exists(f.fd));
}

// A domain whose every member died without closing it is removed by the next join of any
// domain: segments of killed programs do not pile up in /dev/shm.
TEST(XrcdShared, SegmentsOnlyDeadMembersHeldAreRemoved) {
  TempFile f, g;
  struct stat sf {
  }, sg{};
  ASSERT_EQ(fstat(f.fd, &sf), 0);
  ASSERT_EQ(fstat(g.fd, &sg), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    int e = 0;
    auto reg = core::XrcdRegistry::join(sg.st_dev, sg.st_ino, O_CREAT, 0, &e);
    (void)reg.release();  // dies holding it
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(segment_exists(g.fd));
  int e = 0;
  auto other = core::XrcdRegistry::join(sg.st_dev, sg.st_ino, 0, 0, &e);  // still there...
  EXPECT_EQ(other, nullptr);  // ... but nobody alive has it: no domain, and no segment
  EXPECT_FALSE(segment_exists(g.fd));
  // Killed again, then another domain is opened: that removes it.
  const pid_t again = fork();
  ASSERT_GE(again, 0);
  if (again == 0) {
    auto reg = core::XrcdRegistry::join(sg.st_dev, sg.st_ino, O_CREAT, 0, &e);
    (void)reg.release();
    _exit(0);
  }
  ASSERT_EQ(waitpid(again, &status, 0), again);
  EXPECT_TRUE(segment_exists(g.fd));
  auto reg = core::XrcdRegistry::join(sf.st_dev, sf.st_ino, O_CREAT, 0, &e);
  ASSERT_NE(reg, nullptr);
  EXPECT_FALSE(segment_exists(g.fd));
  reg.reset();
  EXPECT_FALSE(segment_exists(f.fd));
}

}  // namespace
}  // namespace softrdma::rxe::test
