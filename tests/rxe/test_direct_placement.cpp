// Direct placement between two devices of this process over the udp backend's host-local rings:
// the sender writes RDMA WRITE payloads into the receiver's memory itself, but only where the
// receiver's responder would have written them (rxe/directory.h).
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <thread>

#include "fixture.h"
#include "netdev/udp.h"
#include "rxe/directory.h"

namespace softrdma::rxe::test {
namespace {

netdev::IpAddr ip(const char* s) {
  netdev::IpAddr a;
  EXPECT_TRUE(netdev::IpAddr::parse(s, a));
  return a;
}

// Two udp devices of this process on 127.0.3.1 and 127.0.3.2, on one free port.
std::pair<std::unique_ptr<netdev::Netdev>, std::unique_ptr<netdev::Netdev>> udp_pair() {
  std::string err;
  for (int k = 0; k < 40; ++k) {
    const auto port = static_cast<std::uint16_t>(20000 + (getpid() * 13 + k * 7) % 20000);
    auto a = netdev::UdpNetdev::open(ip("127.0.3.1"), err, {}, port);
    if (!a) continue;
    auto b = netdev::UdpNetdev::open(ip("127.0.3.2"), err, {}, port);
    if (b) return {std::move(a), std::move(b)};
  }
  ADD_FAILURE() << err;
  return {};
}

std::uint64_t counter(const Device& d, const char* name) {
  for (const auto& [n, v] : d.hw_counters()) {
    if (n == name) return v;
  }
  ADD_FAILURE() << "no counter " << name;
  return 0;
}

class Direct : public ::testing::Test {
 protected:
  void SetUp() override { open(true, true); }
  void open(bool direct_a, bool direct_b) {
    auto [na, nb] = udp_pair();
    ASSERT_TRUE(na && nb);
    a = std::make_unique<Node>(std::move(na));
    b = std::make_unique<Node>(std::move(nb));
    if (direct_a) {
      ASSERT_TRUE(a->dev->enable_direct_placement());
    }
    if (direct_b) {
      ASSERT_TRUE(b->dev->enable_direct_placement());
    }
  }
  // Connects a fresh pair of QPs; b's QP allows `access`.
  std::pair<Qp*, Qp*> qps(QpType type = QpType::kRc, std::uint32_t access = kAllAccess) {
    Qp* qa = make_qp(*a, type);
    Qp* qb = make_qp(*b, type);
    ConnectOptions o;
    o.timeout = 14;
    bring_up(qa, b->gid(), qb->qpn(), o.psn_b, o.psn_a, o);
    o.access = access;
    bring_up(qb, a->gid(), qa->qpn(), o.psn_a, o.psn_b, o);
    return {qa, qb};
  }
  // One RDMA WRITE of src[0, len) to `to` (rkey, address); its completion status.
  WcStatus write(Qp* qa, Buffer& src, std::uint32_t len, std::uint32_t rkey, std::uint64_t to) {
    const Sge sge = src.sge(0, len);
    SendWr w = wr(WrOpcode::kRdmaWrite, ++ids, {&sge, 1});
    w.remote_addr = to;
    w.rkey = rkey;
    EXPECT_EQ(qa->post_send(w), 0);
    const auto wc = wait_wc(a->cq, 1);
    return wc.size() == 1 ? wc[0].status : WcStatus::kRetryExcErr;
  }
  // Writes until the ring between the devices is up and a WRITE was placed (the first datagrams
  // go through the kernel while the ring is set up).
  bool warm_up(Qp* qa, Buffer& src, Buffer& dst) {
    bool ok = true;
    const bool placed = wait_until(
        [&] {
          ok = write(qa, src, 8, dst.mr->rkey, dst.addr()) == WcStatus::kSuccess;
          return !ok || qa->counters().placed_sent > 0;
        },
        std::chrono::seconds(5), std::chrono::milliseconds(2));
    return ok && placed;
  }
  std::unique_ptr<Node> a, b;
  std::uint64_t ids = 0;
};

void fill(Buffer& b, std::uint8_t seed) {
  for (std::size_t i = 0; i < b.bytes.size(); ++i) {
    b.bytes[i] = static_cast<std::uint8_t>(seed + i * 7);
  }
}

TEST_F(Direct, RcWritesArePlacedBySenderAndCheckedByReceiver) {
  Buffer src(*a, 64 << 10, kAllAccess);
  Buffer dst(*b, 64 << 10, kAllAccess, 0xEE);
  auto [qa, qb] = qps();
  ASSERT_TRUE(warm_up(qa, src, dst));
  fill(src, 3);
  const std::uint64_t sent0 = qa->counters().placed_sent;
  const std::uint64_t rcvd0 = qb->counters().placed_received;
  // 1 byte, one MTU, and 20000 bytes (five packets) at an offset.
  EXPECT_EQ(write(qa, src, 1, dst.mr->rkey, dst.addr()), WcStatus::kSuccess);
  EXPECT_EQ(write(qa, src, 4096, dst.mr->rkey, dst.addr(100)), WcStatus::kSuccess);
  EXPECT_EQ(write(qa, src, 20000, dst.mr->rkey, dst.addr(30000)), WcStatus::kSuccess);
  EXPECT_EQ(qa->counters().placed_sent - sent0, 1u + 1u + 5u);
  // The responder saw every placed packet (PSN, rkey, bounds checked) and did not copy again.
  wait_until([&] { return qb->counters().placed_received - rcvd0 >= 7; });
  EXPECT_EQ(qb->counters().placed_received - rcvd0, 7u);
  EXPECT_EQ(dst.bytes[0], src.bytes[0]);
  EXPECT_TRUE(std::equal(src.bytes.begin(), src.bytes.begin() + 4096, dst.bytes.begin() + 100));
  EXPECT_TRUE(std::equal(src.bytes.begin(), src.bytes.begin() + 20000, dst.bytes.begin() + 30000));
  EXPECT_EQ(dst.bytes[50000], 0xEE);  // past the last write
  EXPECT_EQ(counter(*a->dev, "placed_sent"), qa->counters().placed_sent);
  EXPECT_EQ(counter(*a->dev, "placed_refused"), 0u);
}

TEST_F(Direct, UcWritesArePlacedInOrderWithSends) {
  Buffer src(*a, 16 << 10, kAllAccess);
  Buffer dst(*b, 16 << 10, kAllAccess);
  Buffer rbuf(*b, 256, kAllAccess);
  auto [qa, qb] = qps(QpType::kUc);
  ASSERT_TRUE(warm_up(qa, src, dst));
  fill(src, 9);
  // A SEND then a WRITE: the WRITE is placed only after the SEND has left.
  const Sge rs = rbuf.sge(0, 256);
  ASSERT_EQ(post_recv(qb, 77, {&rs, 1}), 0);
  const Sge ss = src.sge(0, 64);
  ASSERT_EQ(qa->post_send(wr(WrOpcode::kSend, ++ids, {&ss, 1})), 0);
  EXPECT_EQ(write(qa, src, 9000, dst.mr->rkey, dst.addr(10)), WcStatus::kSuccess);
  EXPECT_EQ(wait_wc(a->cq, 1).size(), 1u);  // the first completion was the SEND's or the WRITE's
  const Wc rwc = one_wc(b->cq);
  EXPECT_EQ(rwc.wr_id, 77u);
  EXPECT_TRUE(std::equal(src.bytes.begin(), src.bytes.begin() + 9000, dst.bytes.begin() + 10));
  EXPECT_GE(qa->counters().placed_sent, 3u);
}

TEST_F(Direct, NothingIsPlacedWhereTheResponderWouldRefuse) {
  Buffer src(*a, 8192, kAllAccess, 0x5A);
  Buffer dst(*b, 8192, kAllAccess, 0xEE);
  Buffer ro(*b, 8192, kAccessLocalWrite | kAccessRemoteRead, 0xEE);  // no remote write
  {
    auto [qa, qb] = qps();
    ASSERT_TRUE(warm_up(qa, src, dst));
  }
  std::fill(dst.bytes.begin(), dst.bytes.end(), 0xEE);
  struct Case {
    const char* what;
    std::uint32_t qp_access;
    std::uint32_t rkey;
    std::uint64_t to;
    std::uint32_t len;
    WcStatus want;
  };
  const Case cases[] = {
      {"bad rkey", kAllAccess, dst.mr->rkey ^ 0x5555, dst.addr(), 64, WcStatus::kRemAccessErr},
      {"past the end", kAllAccess, dst.mr->rkey, dst.addr(8192 - 32), 64, WcStatus::kRemAccessErr},
      {"before the start", kAllAccess, dst.mr->rkey, dst.addr() - 16, 64, WcStatus::kRemAccessErr},
      {"MR without remote write", kAllAccess, ro.mr->rkey, ro.addr(), 64, WcStatus::kRemAccessErr},
      {"QP without remote write", kAccessLocalWrite | kAccessRemoteRead, dst.mr->rkey, dst.addr(),
       64, WcStatus::kRemInvReqErr},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    auto [qa, qb] = qps(QpType::kRc, c.qp_access);
    EXPECT_EQ(write(qa, src, c.len, c.rkey, c.to), c.want);
    EXPECT_EQ(qa->counters().placed_sent, 0u);
  }
  EXPECT_TRUE(std::all_of(dst.bytes.begin(), dst.bytes.end(), [](auto v) { return v == 0xEE; }));
  EXPECT_TRUE(std::all_of(ro.bytes.begin(), ro.bytes.end(), [](auto v) { return v == 0xEE; }));
}

TEST_F(Direct, ADeregisteredRegionIsNotWritten) {
  Buffer src(*a, 4096, kAllAccess, 0x11);
  auto dst = std::make_unique<Buffer>(*b, 4096, kAllAccess, 0xEE);
  auto [qa, qb] = qps();
  ASSERT_TRUE(warm_up(qa, src, *dst));
  const std::uint32_t rkey = dst->mr->rkey;
  const std::uint64_t to = dst->addr();
  ASSERT_EQ(b->dev->dereg_mr(rkey), 0);
  dst->mr.reset();
  std::fill(dst->bytes.begin(), dst->bytes.end(), 0xEE);
  const std::uint64_t sent0 = qa->counters().placed_sent;
  EXPECT_EQ(write(qa, src, 256, rkey, to), WcStatus::kRemAccessErr);
  EXPECT_EQ(qa->counters().placed_sent, sent0);
  EXPECT_TRUE(std::all_of(dst->bytes.begin(), dst->bytes.end(), [](auto v) { return v == 0xEE; }));
}

TEST_F(Direct, AReceiverWithoutDirectoryGetsCopies) {
  a.reset();
  b.reset();
  open(true, false);
  Buffer src(*a, 4096, kAllAccess, 0x42);
  Buffer dst(*b, 4096, kAllAccess);
  auto [qa, qb] = qps();
  for (int i = 0; i < 20; ++i) {
    ASSERT_EQ(write(qa, src, 512, dst.mr->rkey, dst.addr(i * 8)), WcStatus::kSuccess);
    // Spread over the time a ring takes to come up: that none is used is what is checked.
    std::this_thread::sleep_for(std::chrono::milliseconds(2));  // time itself
  }
  EXPECT_EQ(dst.bytes[152 + 511], 0x42);
  EXPECT_EQ(qa->counters().placed_sent, 0u);
  EXPECT_EQ(qb->counters().placed_received, 0u);
  EXPECT_GT(counter(*b->dev, "netdev_rx_packets"), 0u);
}

// --- the directory itself

struct Mapped {
  void* p = nullptr;
  std::size_t len = 0;
  explicit Mapped(int fd) {
    len = static_cast<std::size_t>(lseek(fd, 0, SEEK_END));
    p = mmap(nullptr, len, PROT_READ, MAP_SHARED, fd, 0);
  }
  ~Mapped() { munmap(p, len); }
  std::span<const std::uint8_t> bytes() const { return {static_cast<const std::uint8_t*>(p), len}; }
};

TEST(Directory, AnswersOnlyForPublishedQpAndRegion) {
  std::string err;
  auto d = Directory::create(err);
  ASSERT_TRUE(d) << err;
  int quiesced = 0;
  d->set_quiesce([&] { ++quiesced; });
  const auto peer = ip("127.0.3.9");
  d->set_qp(0x11, DirQp{1, QpType::kRc, true, 0x22, peer});
  d->set_mr(DirMr{0xABCD, 1, 0x1000, 0x100, 0x7000});
  EXPECT_EQ(quiesced, 0);  // new entries need no waiting
  Mapped m(d->fd());
  DirectoryView v(m.bytes());
  std::uint64_t host = 0;
  EXPECT_TRUE(v.writable(0x11, QpType::kRc, 0x22, peer, 0xABCD, 0x1010, 0x20, host));
  EXPECT_EQ(host, 0x7010u);
  EXPECT_TRUE(v.writable(0x11, QpType::kRc, 0x22, peer, 0xABCD, 0x1000, 0x100, host));
  EXPECT_FALSE(v.writable(0x11, QpType::kRc, 0x22, peer, 0xABCD, 0x1001, 0x100, host));  // end
  EXPECT_FALSE(v.writable(0x11, QpType::kRc, 0x22, peer, 0xABCD, 0xFFF, 0x10, host));    // start
  EXPECT_FALSE(v.writable(0x11, QpType::kRc, 0x22, peer, 0xABCE, 0x1000, 0x10, host));   // rkey
  EXPECT_FALSE(v.writable(0x12, QpType::kRc, 0x22, peer, 0xABCD, 0x1000, 0x10, host));   // QPN
  EXPECT_FALSE(v.writable(0x11, QpType::kUc, 0x22, peer, 0xABCD, 0x1000, 0x10, host));   // type
  EXPECT_FALSE(v.writable(0x11, QpType::kRc, 0x23, peer, 0xABCD, 0x1000, 0x10, host));   // src QP
  EXPECT_FALSE(v.writable(0x11, QpType::kRc, 0x22, ip("127.0.3.8"), 0xABCD, 0x1000, 0x10, host));
  EXPECT_FALSE(v.writable(0x11, QpType::kRc, 0x22, peer, 0xABCD, 0x1000, ~0ull, host));
  // Another partition's sender (the QP's P_Key is 0xFFFF), or a limited member of its own: a
  // P_Key the receiver would refuse writes nothing.
  EXPECT_FALSE(v.writable(0x11, QpType::kRc, 0x22, peer, 0xABCD, 0x1000, 0x10, host, 0x8001));
  EXPECT_TRUE(v.writable(0x11, QpType::kRc, 0x22, peer, 0xABCD, 0x1000, 0x10, host, 0x7FFF));
  d->set_qp(0x13, DirQp{1, QpType::kRc, true, 0x22, peer, 0x0005});  // a limited member
  EXPECT_FALSE(v.writable(0x13, QpType::kRc, 0x22, peer, 0xABCD, 0x1000, 0x10, host, 0x0005));
  EXPECT_TRUE(v.writable(0x13, QpType::kRc, 0x22, peer, 0xABCD, 0x1000, 0x10, host, 0x8005));
  d->remove_qp(0x13);
  quiesced = 0;
  // Another PD's region.
  d->set_mr(DirMr{0xBEEF, 2, 0x1000, 0x100, 0x9000});
  EXPECT_FALSE(v.writable(0x11, QpType::kRc, 0x22, peer, 0xBEEF, 0x1000, 0x10, host));
  // A QP without remote write, then withdrawn ones: each change waits out open windows.
  d->set_qp(0x11, DirQp{1, QpType::kRc, false, 0x22, peer});
  EXPECT_EQ(quiesced, 1);
  EXPECT_FALSE(v.writable(0x11, QpType::kRc, 0x22, peer, 0xABCD, 0x1000, 0x10, host));
  d->set_qp(0x11, DirQp{1, QpType::kRc, true, 0x22, peer});
  EXPECT_TRUE(v.writable(0x11, QpType::kRc, 0x22, peer, 0xABCD, 0x1000, 0x10, host));
  d->remove_mr(0xABCD);
  EXPECT_EQ(quiesced, 3);
  EXPECT_FALSE(v.writable(0x11, QpType::kRc, 0x22, peer, 0xABCD, 0x1000, 0x10, host));
  d->set_mr(DirMr{0xABCD, 1, 0x1000, 0x100, 0x7000});  // reuses the removed slot
  EXPECT_TRUE(v.writable(0x11, QpType::kRc, 0x22, peer, 0xABCD, 0x1000, 0x10, host));
  d->remove_qp(0x11);
  EXPECT_FALSE(v.writable(0x11, QpType::kRc, 0x22, peer, 0xABCD, 0x1000, 0x10, host));
}

TEST(Directory, ManyEntriesAndForeignBytes) {
  std::string err;
  auto d = Directory::create(err);
  ASSERT_TRUE(d) << err;
  const auto peer = ip("127.0.3.9");
  for (std::uint32_t q = 1; q <= 2000; ++q) d->set_qp(q, DirQp{1, QpType::kRc, true, q, peer});
  for (std::uint32_t k = 1; k <= 4000; ++k) d->set_mr(DirMr{k * 2654435761u, 1, 0, 64, k});
  Mapped m(d->fd());
  DirectoryView v(m.bytes());
  std::uint64_t host = 0;
  int found = 0;
  for (std::uint32_t k = 1; k <= 4000; k += 37) {
    const std::uint32_t q = k % 2000 + 1;
    found += v.writable(q, QpType::kRc, q, peer, k * 2654435761u, 0, 64, host) && host == k;
  }
  EXPECT_EQ(found, (4000 + 36) / 37);
  // Bytes that are not a directory, or too few of them: no.
  std::vector<std::uint8_t> junk(m.len, 0xA5);
  EXPECT_FALSE(DirectoryView(junk).writable(1, QpType::kRc, 1, peer, 2654435761u, 0, 8, host));
  EXPECT_FALSE(DirectoryView(m.bytes().first(4096))
                   .writable(1, QpType::kRc, 1, peer, 2654435761u, 0, 8, host));
}

}  // namespace
}  // namespace softrdma::rxe::test
