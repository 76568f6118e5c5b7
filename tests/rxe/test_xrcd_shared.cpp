// XRC domains keyed by a file are the host's (core/xrcd_registry.h): two devices opening one
// file are in one domain (O_CREAT and O_EXCL decided across them, as the kernel decides them
// across processes), their XRC SRQs never share a number, a request naming another device's SRQ
// is refused and counted as such (nothing reaches either device's memory), and a member whose
// process died without closing is dropped by the next open.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
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

// An initiator on c sends through a's target QP to the SRQ b holds in the domain a and b share:
// a refuses it (invalid request NAK, the initiator's completion REM_INV_REQ_ERR) and counts it
// as another device's SRQ; neither a's nor b's receive buffer is touched.
TEST(XrcdShared, RequestForAnotherDevicesSrqIsRefused) {
  auto fabric = std::make_shared<netdev::MemoryFabric>();
  Node a(fabric, 1), b(fabric, 2), c(fabric, 3);
  TempFile f;
  int err = 0;
  Xrcd* xa = a.dev->open_xrcd(f.fd, O_CREAT, &err);
  Xrcd* xb = b.dev->open_xrcd(f.fd, O_CREAT, &err);
  ASSERT_TRUE(xa && xb);
  Srq* srq_a = a.dev->create_xrc_srq(a.pd, xa, a.cq, 16, 1, 0, &err);
  Srq* srq_b = b.dev->create_xrc_srq(b.pd, xb, b.cq, 16, 1, 0, &err);
  ASSERT_TRUE(srq_a && srq_b);
  Buffer in_a(a, 4096, kAllAccess, 0xA5), in_b(b, 4096, kAllAccess, 0xA5);
  RecvWr r;
  const Sge ra = in_a.sge(0, 4096), rb = in_b.sge(0, 4096);
  r.sg_list = std::span(&ra, 1);
  ASSERT_EQ(srq_a->post(r), 0);
  r.sg_list = std::span(&rb, 1);
  ASSERT_EQ(srq_b->post(r), 0);

  Qp* tgt = make_qp(a, QpType::kXrcRecv, nullptr, xa);
  Qp* ini = make_qp(c, QpType::kXrcSend);
  ASSERT_TRUE(tgt && ini);
  QpAttr at;
  at.qp_state = QpState::kInit;
  at.port_num = 1;
  ASSERT_EQ(tgt->modify(at, kQpState | kQpPkeyIndex | kQpPort | kQpAccessFlags), 0);
  ASSERT_EQ(ini->modify(at, kQpState | kQpPkeyIndex | kQpPort | kQpAccessFlags), 0);
  at.qp_state = QpState::kRtr;
  at.path_mtu = Mtu::k1024;
  at.rq_psn = 100;
  at.min_rnr_timer = 1;
  at.ah_attr.dgid = c.gid();
  at.dest_qp_num = ini->qpn();
  ASSERT_EQ(tgt->modify(at, kQpState | kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn | kQpMinRnrTimer |
                                kQpMaxDestRdAtomic),
            0);
  at.ah_attr.dgid = a.gid();
  at.dest_qp_num = tgt->qpn();
  ASSERT_EQ(ini->modify(at, kQpState | kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn), 0);
  at.qp_state = QpState::kRts;
  at.timeout = 12;
  at.retry_cnt = 1;
  at.rnr_retry = 1;
  at.sq_psn = 100;
  ASSERT_EQ(tgt->modify(at, kQpState | kQpTimeout | kQpSqPsn), 0);
  ASSERT_EQ(ini->modify(at, kQpState | kQpTimeout | kQpSqPsn | kQpRetryCnt | kQpRnrRetry |
                                kQpMaxQpRdAtomic),
            0);

  Buffer src(c, 3000, kAllAccess, 0x3C);
  const Sge s = src.sge(0, 3000);  // 3 packets
  SendWr w = wr(WrOpcode::kSend, 7, std::span(&s, 1));
  w.remote_srqn = srq_b->srqn;
  ASSERT_EQ(ini->post_send(w), 0);
  const Wc wc = one_wc(c.cq);
  EXPECT_EQ(wc.wr_id, 7u);
  EXPECT_EQ(wc.status, WcStatus::kRemInvReqErr);
  EXPECT_EQ(tgt->counters().xrc_bad_srqn, 1u);
  EXPECT_EQ(tgt->counters().xrc_srq_elsewhere, 1u);
  EXPECT_EQ(tgt->counters().xrc_rcvd_requests, 0u);
  EXPECT_TRUE(std::all_of(in_a.bytes.begin(), in_a.bytes.end(), [](auto x) { return x == 0xA5; }));
  EXPECT_TRUE(std::all_of(in_b.bytes.begin(), in_b.bytes.end(), [](auto x) { return x == 0xA5; }));
  Wc none[4];
  EXPECT_EQ(a.cq->poll(none), 0);
  EXPECT_EQ(b.cq->poll(none), 0);

  EXPECT_EQ(a.dev->destroy_qp(tgt), 0);
  EXPECT_EQ(c.dev->destroy_qp(ini), 0);
  EXPECT_EQ(a.dev->destroy_srq(srq_a), 0);
  EXPECT_EQ(b.dev->destroy_srq(srq_b), 0);
  EXPECT_EQ(a.dev->close_xrcd(xa), 0);
  EXPECT_EQ(b.dev->close_xrcd(xb), 0);
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
    auto reg = core::XrcdRegistry::join(st.st_dev, st.st_ino, O_CREAT, &e);
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
  EXPECT_EQ(core::XrcdRegistry::join(st.st_dev, st.st_ino, O_CREAT | O_EXCL, &e), nullptr);
  EXPECT_EQ(e, EINVAL);
  {
    auto found = core::XrcdRegistry::join(st.st_dev, st.st_ino, 0, &e);
    ASSERT_NE(found, nullptr);
    EXPECT_TRUE(found->held_elsewhere(5));
    EXPECT_EQ(found->claim_srqn(5, [](std::uint32_t) { return true; }), 6u);
  }
  ASSERT_EQ(write(down[1], "x", 1), 1);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  for (int fd : {up[0], up[1], down[0], down[1]}) close(fd);
  auto reg = core::XrcdRegistry::join(st.st_dev, st.st_ino, O_CREAT | O_EXCL, &e);
  ASSERT_NE(reg, nullptr) << e;
  EXPECT_FALSE(reg->held_elsewhere(5));
  EXPECT_EQ(reg->claim_srqn(5, [](std::uint32_t) { return true; }), 5u);
  reg.reset();
  EXPECT_FALSE(segment_exists(f.fd));
}

}  // namespace
}  // namespace softrdma::rxe::test
