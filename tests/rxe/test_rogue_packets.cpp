// Hostile input: random but plausible RoCEv2 packets, claiming to come from the
// connected peer, thrown at an RC QP whose memory region sits between guard bytes.
// Whatever they carry, the engine must not crash and must write nothing outside the
// region (receive buffers and the remote-access region alike).
#include <random>

#include "tests/inject_netdev.h"
#include "tests/rxe/fixture.h"
#include "wire/roce_headers.h"

namespace softrdma::rxe::test {
namespace {

using softrdma::test::InjectNetdev;

constexpr std::size_t kGuard = 64 * 1024, kRegion = 256 * 1024;

TEST(RoguePackets, NoCrashAndNothingWrittenOutsideTheRegion) {
  const netdev::IpAddr self = addr(2), peer = addr(1);
  auto nd = std::make_unique<InjectNetdev>(self);
  InjectNetdev* inj = nd.get();
  Device dev(std::move(nd));
  Pd* pd = dev.alloc_pd();
  int err = 0;
  Cq* cq = dev.create_cq(1 << 16, &err);
  // [guard | region | guard]: the region is registered; receives also land in it.
  std::vector<std::uint8_t> mem(kGuard + kRegion + kGuard, 0xA5);
  std::uint8_t* region = mem.data() + kGuard;
  auto mr =
      dev.reg_mr(pd, region, kRegion, reinterpret_cast<std::uint64_t>(region), kAllAccess, &err);
  ASSERT_TRUE(mr);
  QpCap cap = default_cap();
  Qp* qp = dev.create_qp(pd, QpType::kRc, cq, cq, nullptr, cap, false, &err);
  ASSERT_TRUE(qp);
  const Gid peer_gid = peer.bytes;
  ConnectOptions o;
  o.mtu = Mtu::k1024;
  auto reset_and_connect = [&] {
    QpAttr a;
    a.qp_state = QpState::kReset;
    ASSERT_EQ(qp->modify(a, kQpState), 0);
    bring_up(qp, peer_gid, 0x77, 1000, 5000, o);
    for (int i = 0; i < 64; ++i) {
      const Sge s{reinterpret_cast<std::uint64_t>(region) + static_cast<std::uint64_t>(i) * 2048,
                  2048, mr->lkey};
      ASSERT_EQ(post_recv(qp, static_cast<std::uint64_t>(i), std::span(&s, 1)), 0);
    }
  };
  reset_and_connect();

  std::mt19937_64 rng(20261129);
  const auto r32 = [&] { return static_cast<std::uint32_t>(rng()); };
  const std::uint64_t base = reinterpret_cast<std::uint64_t>(region);
  std::vector<std::uint8_t> payload(1100);
  int resets = 0;
  for (int round = 0; round < 60; ++round) {
    QpAttr q;
    QpCap c;
    qp->query(q, c);
    const std::uint32_t epsn = q.rq_psn;
    for (int i = 0; i < 500; ++i) {
      wire::RoceHeaders h;
      // Mostly RC requests, some responses and other transports' opcodes.
      static constexpr std::uint8_t kOps[] = {0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07,
                                              0x08, 0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x10, 0x11,
                                              0x12, 0x13, 0x14, 0x16, 0x17, 0x24, 0x64};
      h.bth.opcode = kOps[rng() % sizeof kOps];
      h.bth.dest_qp = rng() % 8 == 0 ? (r32() & 0xFFFFFF) : qp->qpn();
      h.bth.psn = (epsn + static_cast<std::uint32_t>(rng() % 8) - 2) & 0xFFFFFF;
      h.bth.ack_req = rng() & 1;
      h.bth.se = rng() & 1;
      // Addresses around the region, past its ends, and wild ones; lengths likewise.
      std::uint64_t va = base + (rng() % (kRegion + 4096)) - 2048;
      if (rng() % 10 == 0) va = rng();
      std::uint32_t len = static_cast<std::uint32_t>(rng() % 8192);
      if (rng() % 10 == 0) len = r32();
      const std::uint32_t rkey = rng() % 6 == 0 ? r32() : mr->rkey;
      h.reth = wire::Reth{va, rkey, len};
      h.atomic_eth = wire::AtomicEth{rng() % 2 ? va & ~7ull : va, rkey, rng(), rng()};
      h.aeth = wire::Aeth{static_cast<std::uint8_t>(rng()), r32() & 0xFFFFFF};
      h.atomic_ack_eth = wire::AtomicAckEth{rng()};
      h.deth = wire::Deth{r32(), 0, r32() & 0xFFFFFF};
      h.imm = r32();
      h.inv_rkey = rng() % 2 ? mr->rkey : r32();
      const auto& info = wire::roce_opcode_info(h.bth.opcode);
      std::size_t plen = 0;
      if (info.payload) plen = rng() % 3 == 0 ? 1024 : rng() % payload.size();
      for (std::size_t k = 0; k < plen; ++k) payload[k] = static_cast<std::uint8_t>(rng());
      std::vector<std::uint8_t> pkt(2048);
      auto n = wire::build_roce(pkt, h, wire::Bytes(payload).first(plen));
      if (!n) continue;
      pkt.resize(*n);
      // Now and then damage it: truncate, flip bytes, or send pure noise.
      switch (rng() % 10) {
        case 0:
          pkt.resize(rng() % pkt.size());
          break;
        case 1:
          pkt[rng() % pkt.size()] ^= static_cast<std::uint8_t>(1 + rng() % 255);
          break;
        case 2:
          for (auto& b : pkt) b = static_cast<std::uint8_t>(rng());
          break;
        default:
          break;
      }
      inj->inject(peer, std::move(pkt));
    }
    wait_until([&] { return inj->pending() == 0; }, std::chrono::seconds(10),
               std::chrono::microseconds(200));
    ASSERT_EQ(inj->pending(), 0u) << "the device stopped receiving";
    // The pass that took the last of them may still be handing them to the QP: one pass of
    // our own (under the same lock) ends after it, so no packet of this round reaches the QP
    // while it is reset and brought up again below.
    ASSERT_TRUE(wait_until([&] { return dev.poll_progress(); }, std::chrono::seconds(10),
                           std::chrono::microseconds(200)));
    Wc wc[256];
    while (cq->poll(wc) > 0) {
    }
    if (qp->state() != QpState::kRts) {
      ++resets;
      reset_and_connect();
    }
  }
  // Nothing outside the region changed.
  EXPECT_TRUE(std::all_of(mem.begin(), mem.begin() + kGuard, [](auto b) { return b == 0xA5; }));
  EXPECT_TRUE(std::all_of(mem.end() - kGuard, mem.end(), [](auto b) { return b == 0xA5; }));
  EXPECT_GT(resets, 0);  // the hostile packets did put the QP in error now and then
  const auto c = qp->counters();
  EXPECT_GT(c.rx_packets, 1000u);
  const auto changed = std::count_if(region, region + kRegion, [](auto b) { return b != 0xA5; });
  EXPECT_GT(changed, 0);  // and some of them did land, inside the region
  std::printf(
      "%d resets, %llu packets reached the QP, %lld region bytes written, %llu "
      "duplicates, %llu out of sequence\n",
      resets, static_cast<unsigned long long>(c.rx_packets), static_cast<long long>(changed),
      static_cast<unsigned long long>(c.duplicate_requests),
      static_cast<unsigned long long>(c.out_of_sequence));
  dev.destroy_qp(qp);
}

// An RC QP connected to `peer`, fed packets through an InjectNetdev, with 64-byte receives.
class InjectedRcQp : public testing::Test {
 protected:
  static constexpr std::size_t kSlot = 64;
  void connect(std::uint32_t rq_psn, int receives, const ConnectOptions& o = {}) {
    int err = 0;
    pd = dev.alloc_pd();
    cq = dev.create_cq(256, &err);
    region.assign(kSlot * static_cast<std::size_t>(receives), 0);
    mr = dev.reg_mr(pd, region.data(), region.size(),
                    reinterpret_cast<std::uint64_t>(region.data()), kAllAccess, &err);
    ASSERT_TRUE(mr);
    QpCap cap = default_cap();
    qp = dev.create_qp(pd, QpType::kRc, cq, cq, nullptr, cap, false, &err);
    ASSERT_TRUE(qp);
    bring_up(qp, peer.bytes, 0x77, rq_psn, 5000, o);
    for (int i = 0; i < receives; ++i) {
      const Sge sge{
          reinterpret_cast<std::uint64_t>(region.data()) + static_cast<std::uint64_t>(i) * kSlot,
          kSlot, mr->lkey};
      ASSERT_EQ(post_recv(qp, static_cast<std::uint64_t>(i), std::span(&sge, 1)), 0);
    }
  }
  // Builds a SEND ONLY to the QP from `h` (opcode and QPN filled in) and injects it.
  void send(wire::RoceHeaders h, const std::vector<std::uint8_t>& payload) {
    h.bth.opcode = wire::op::kRcSendOnly;
    h.bth.dest_qp = qp->qpn();
    std::vector<std::uint8_t> pkt(256);
    auto n = wire::build_roce(pkt, h, wire::Bytes(payload));
    ASSERT_TRUE(n.ok());
    pkt.resize(*n);
    ASSERT_EQ(pkt[4] & 0x3F, h.bth.resv6);  // the builder keeps what it is given
    inj->inject(peer, std::move(pkt));
  }
  std::uint64_t counter(std::string_view name) const {
    for (const auto& [n, value] : dev.hw_counters()) {
      if (n == name) return value;
    }
    ADD_FAILURE() << "no counter " << name;
    return 0;
  }
  void TearDown() override {
    if (qp) dev.destroy_qp(qp);
  }

  const netdev::IpAddr self = addr(2), peer = addr(1);
  std::unique_ptr<InjectNetdev> owned = std::make_unique<InjectNetdev>(self);
  InjectNetdev* inj = owned.get();
  Device dev{std::move(owned)};
  Pd* pd = nullptr;
  Cq* cq = nullptr;
  std::vector<std::uint8_t> region;
  std::shared_ptr<Mr> mr;
  Qp* qp = nullptr;
};

// What real NICs send (shared notes, nic-behaviours.md): BTH byte 4 = 0x10 (a Huawei NIC),
// MigReq = 1 (ConnectX, Huawei), and the other reserved bits for good measure. A receiver
// ignores reserved fields (IBTA): every such SEND lands, none is counted as malformed.
TEST_F(InjectedRcQp, ReservedBitsAndMigReqAreIgnored) {
  constexpr int kSends = 32;
  connect(100, kSends);
  for (int i = 0; i < kSends; ++i) {
    wire::RoceHeaders h;
    h.bth.psn = static_cast<std::uint32_t>(100 + i);
    h.bth.mig_req = true;
    h.bth.resv6 = (i % 2) ? 0x10 : 0x3F;
    h.bth.resv7 = (i % 3) ? 0 : 0x7F;
    h.bth.ack_req = true;
    send(h, std::vector<std::uint8_t>(40, static_cast<std::uint8_t>(i + 1)));
  }
  const auto wcs = wait_wc(cq, kSends);
  ASSERT_EQ(wcs.size(), static_cast<std::size_t>(kSends));
  for (const Wc& wc : wcs) {
    EXPECT_EQ(wc.status, WcStatus::kSuccess);
    EXPECT_EQ(wc.byte_len, 40u);
    EXPECT_EQ(region[wc.wr_id * kSlot], static_cast<std::uint8_t>(wc.wr_id + 1));
  }
  EXPECT_EQ(counter("drop_malformed"), 0u);
}

// The port's P_Key table holds the default partition (0xFFFF) only: a packet of another
// partition (or the invalid P_Key 0) is dropped and counted; a limited member's 0x7FFF matches.
TEST_F(InjectedRcQp, PacketsOfAnotherPartitionAreDropped) {
  connect(0, 8);
  auto send_with = [&](std::uint32_t psn, std::uint16_t pkey) {
    wire::RoceHeaders h;
    h.bth.psn = psn;
    h.bth.pkey = pkey;
    send(h, std::vector<std::uint8_t>(16, static_cast<std::uint8_t>(pkey)));
  };
  send_with(0, 0x1234);
  send_with(0, 0x0000);
  send_with(0, 0x8001);
  send_with(0, 0x7FFF);  // limited member of the default partition: matches
  send_with(1, 0xFFFF);
  const auto wcs = wait_wc(cq, 2);
  ASSERT_EQ(wcs.size(), 2u);
  EXPECT_EQ(region[0], 0xFF);  // 0x7FFF's payload byte
  EXPECT_EQ(region[kSlot], 0xFF);
  EXPECT_EQ(counter("drop_bad_pkey"), 3u);
}

// A table of three partitions (--pkeys 0xffff,0x8001,0x0002): a QP takes the packets of its own
// partition only, where one side is a full member; it sends with its own P_Key.
TEST_F(InjectedRcQp, AQpTakesItsOwnPartitionWithOneFullMember) {
  ASSERT_TRUE(dev.set_pkeys({0xFFFF, 0x8001, 0x0002}));
  ConnectOptions o;
  o.pkey_index = 1;  // 0x8001, a full member
  connect(0, 8, o);
  auto send_with = [&](std::uint32_t psn, std::uint16_t pkey) {
    wire::RoceHeaders h;
    h.bth.psn = psn;
    h.bth.pkey = pkey;
    h.bth.ack_req = true;
    send(h, std::vector<std::uint8_t>(16, static_cast<std::uint8_t>(pkey)));
  };
  send_with(0, 0xFFFF);  // the table's, not the QP's
  send_with(0, 0x8003);  // in no entry
  send_with(0, 0x0001);  // a limited member of the QP's partition: the QP is a full one
  send_with(1, 0x8001);
  const auto wcs = wait_wc(cq, 2);
  ASSERT_EQ(wcs.size(), 2u);
  EXPECT_EQ(region[0], 0x01);
  EXPECT_EQ(region[kSlot], 0x01);
  EXPECT_EQ(counter("drop_bad_pkey"), 2u);
  std::vector<std::uint16_t> pkeys;  // the ACKs
  wait_until([&] { return !(pkeys = inj->sent_pkeys()).empty(); });
  ASSERT_FALSE(pkeys.empty());
  for (std::uint16_t k : pkeys) EXPECT_EQ(k, 0x8001);
}

TEST_F(InjectedRcQp, TwoLimitedMembersDoNotMatch) {
  ASSERT_TRUE(dev.set_pkeys({0xFFFF, 0x8001, 0x0002}));
  ConnectOptions o;
  o.pkey_index = 2;  // 0x0002, a limited member
  connect(0, 8, o);
  wire::RoceHeaders h;
  h.bth.psn = 0;
  h.bth.pkey = 0x0002;
  send(h, std::vector<std::uint8_t>(16, 7));  // limited to limited: a violation
  h.bth.pkey = 0x8002;
  send(h, std::vector<std::uint8_t>(16, 8));  // a full member of the partition
  one_wc(cq);
  EXPECT_EQ(region[0], 8);
  EXPECT_EQ(counter("drop_bad_pkey"), 1u);
}

// The responder looks for a receive WQE before it checks a request's target (the order of
// the kernel's rxe_resp.c): a WRITE with immediate and a bad rkey that finds no WQE gets an RNR NAK,
// not a remote access NAK, and the QP stays in RTS for the retry (checked again then).
TEST_F(InjectedRcQp, NoReceiveWqeIsAnRnrNakBeforeTheRkeyIsChecked) {
  connect(0, 0);
  wire::RoceHeaders h;
  h.bth.opcode = wire::op::kRcWriteOnlyImm;
  h.bth.dest_qp = qp->qpn();
  h.bth.psn = 0;
  h.bth.ack_req = true;
  h.reth = wire::Reth{reinterpret_cast<std::uint64_t>(region.data()), mr->rkey ^ 0x100, 16};
  h.imm = 7;
  std::vector<std::uint8_t> pkt(256);
  auto n = wire::build_roce(pkt, h, wire::Bytes(std::vector<std::uint8_t>(16, 1)));
  ASSERT_TRUE(n.ok());
  pkt.resize(*n);
  inj->inject(peer, std::move(pkt));
  std::vector<std::vector<std::uint8_t>> sent;
  wait_until([&] { return !(sent = inj->sent()).empty(); });
  ASSERT_EQ(sent.size(), 1u);
  ASSERT_GE(sent[0].size(), wire::kBthLen + 4);
  EXPECT_EQ(sent[0][0], wire::op::kRcAck);
  EXPECT_EQ(sent[0][wire::kBthLen] & 0xE0, 0x20) << "AETH syndrome " << int(sent[0][wire::kBthLen]);
  EXPECT_EQ(qp->state(), QpState::kRts);
}

TEST(PkeyTable, EntriesAndIndexesAreChecked) {
  Device d(std::make_unique<InjectNetdev>(addr(3)));
  EXPECT_FALSE(d.set_pkeys({}));
  EXPECT_FALSE(d.set_pkeys({0xFFFF, 0x8000}));  // no partition
  EXPECT_FALSE(d.set_pkeys(std::vector<std::uint16_t>(65, 0x8001)));
  ASSERT_TRUE(d.set_pkeys({0x8001, 0x0005}));
  EXPECT_EQ(d.pkey_index_of(0x0001), 0);
  EXPECT_EQ(d.pkey_index_of(0x8005), 1);
  EXPECT_EQ(d.pkey_index_of(0x0005), -1);
  EXPECT_EQ(d.pkey_index_of(0xFFFF), -1);
  int err = 0;
  Pd* pd = d.alloc_pd();
  Cq* cq = d.create_cq(16, &err);
  QpCap cap = default_cap();
  Qp* qp = d.create_qp(pd, QpType::kRc, cq, cq, nullptr, cap, false, &err);
  ASSERT_TRUE(qp);
  EXPECT_EQ(qp->pkey(), 0x8001);  // index 0 until set
  QpAttr a;
  a.qp_state = QpState::kInit;
  a.port_num = 1;
  a.pkey_index = 2;  // past the table
  EXPECT_EQ(qp->modify(a, kQpState | kQpPkeyIndex | kQpPort | kQpAccessFlags), EINVAL);
  a.pkey_index = 1;
  EXPECT_EQ(qp->modify(a, kQpState | kQpPkeyIndex | kQpPort | kQpAccessFlags), 0);
  EXPECT_EQ(qp->pkey(), 0x0005);
  d.destroy_qp(qp);
}

}  // namespace
}  // namespace softrdma::rxe::test
