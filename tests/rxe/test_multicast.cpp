// UD multicast on the in-memory fabric: attached QPs on several devices each receive every
// datagram sent to the group with QPN 0xFFFFFF (with the group as the GRH destination); detached,
// unattached and destroyed QPs receive nothing; Q_Keys still apply; only UD QPs and multicast
// GIDs may attach.
#include <map>

#include "tests/rxe/fixture.h"

namespace softrdma::rxe::test {
namespace {

constexpr std::uint32_t kGroupHost = 0xEF010203;  // 239.1.2.3
constexpr std::uint32_t kQkey = 0x11111111;
constexpr std::uint32_t kSlot = 40 + 64;  // GRH + largest payload sent

Gid group_gid() {
  return netdev::IpAddr::v4(kGroupHost).bytes;
}

// Pair's a and b, and c, a third node on the fabric.
class Multicast : public Pair {
 protected:
  void SetUp() override {
    Pair::SetUp();
    c = std::make_unique<Node>(fabric, 3);
    qa = ud(*a);
    b1 = ud(*b);
    b2 = ud(*b);
    b3 = ud(*b);
    c1 = ud(*c);
    AhAttr ah;
    ah.dgid = group_gid();
    int err = 0;
    ahid = a->dev->create_ah(a->pd, ah, &err);
    ASSERT_EQ(err, 0);
    src = std::make_unique<Buffer>(*a, 64, kAllAccess);
    for (Node* n : {b.get(), c.get()}) {
      bufs[n] = std::make_unique<Buffer>(*n, kSlot * 512, kAllAccess);
    }
  }

  Qp* ud(Node& n) {
    Qp* qp = make_qp(n, QpType::kUd);
    bring_up(qp, n.gid(), 0, 0, 0, {});
    return qp;
  }

  // Posts `count` receives on `qp`, each into its own slot of the node's buffer.
  void post_recvs(Node& n, Qp* qp, int count) {
    Buffer& buf = *bufs[&n];
    for (int i = 0; i < count; ++i) {
      const Sge s = buf.sge(static_cast<std::size_t>(next_slot[&n]++) * kSlot, kSlot);
      ASSERT_EQ(post_recv(qp, static_cast<std::uint64_t>(next_slot[&n]) - 1, std::span(&s, 1)), 0);
    }
  }

  // Sends `count` 64-byte datagrams to the group; datagram i carries i + first as immediate
  // data and in every payload byte.
  void send(int count, int first = 0, std::uint32_t qkey = kQkey) {
    for (int i = 0; i < count; ++i) {
      std::fill(src->bytes.begin(), src->bytes.end(), static_cast<std::uint8_t>(first + i));
      const Sge s = src->sge(0, 64);
      SendWr w =
          wr(WrOpcode::kSendWithImm, static_cast<std::uint64_t>(first + i), std::span(&s, 1));
      w.ah = ahid;
      w.remote_qpn = kMulticastQpn;
      w.remote_qkey = qkey;
      w.imm_data = static_cast<std::uint32_t>(first + i);
      ASSERT_EQ(qa->post_send(w), 0);
      Wc swc = one_wc(a->cq);
      ASSERT_EQ(swc.status, WcStatus::kSuccess);
    }
  }

  // Posts a SEND of src's first `len` bytes through `ah` to QPN 0xFFFFFF; post_send's result.
  int send_to_qpn_ffffff(std::uint32_t ah, std::uint32_t len) {
    const Sge s = src->sge(0, len);
    SendWr w = wr(WrOpcode::kSend, 1, std::span(&s, 1));
    w.ah = ah;
    w.remote_qpn = kMulticastQpn;
    w.remote_qkey = kQkey;
    return qa->post_send(w);
  }

  // Checks a receive completion: status, length, GRH (sender 192.0.2.1 to the group) and data.
  void check(Node& n, const Wc& wc) {
    ASSERT_EQ(wc.status, WcStatus::kSuccess);
    ASSERT_EQ(wc.byte_len, 40u + 64u);
    EXPECT_EQ(wc.src_qp, qa->qpn());
    EXPECT_EQ(wc.wc_flags, static_cast<std::uint32_t>(kWcGrh | kWcWithImm));
    const std::uint8_t* slot = bufs[&n]->bytes.data() + wc.wr_id * kSlot;
    EXPECT_TRUE(std::all_of(slot, slot + 20, [](std::uint8_t x) { return x == 0; }));
    const std::uint8_t* ip = slot + 20;
    EXPECT_EQ(ip[0], 0x45);
    EXPECT_EQ(ip[9], 17);
    EXPECT_EQ(ip[12], 192);
    EXPECT_EQ(ip[15], 1);  // from 192.0.2.1
    EXPECT_EQ(ip[16], 239);
    EXPECT_EQ(ip[17], 1);
    EXPECT_EQ(ip[18], 2);
    EXPECT_EQ(ip[19], 3);  // to 239.1.2.3
    const auto tag = static_cast<std::uint8_t>(wc.imm_data);
    EXPECT_TRUE(std::all_of(slot + 40, slot + 104, [tag](std::uint8_t x) { return x == tag; }));
  }

  // Completions per QPN, after waiting for `want` of them (and a little longer for extras).
  std::map<std::uint32_t, std::vector<Wc>> collect(Node& n, std::size_t want) {
    auto got = wait_wc(n.cq, want, std::chrono::seconds(5));
    std::this_thread::sleep_for(std::chrono::milliseconds(30));  // time itself: extras
    Wc extra[16];
    int k;
    while ((k = n.cq->poll(extra)) > 0) got.insert(got.end(), extra, extra + k);
    std::map<std::uint32_t, std::vector<Wc>> by_qp;
    for (const Wc& wc : got) by_qp[wc.qp_num].push_back(wc);
    return by_qp;
  }

  std::unique_ptr<Node> c;
  Qp *qa = nullptr, *b1 = nullptr, *b2 = nullptr, *b3 = nullptr, *c1 = nullptr;
  std::uint32_t ahid = 0;
  std::unique_ptr<Buffer> src;
  std::map<Node*, std::unique_ptr<Buffer>> bufs;
  std::map<Node*, int> next_slot;
};

TEST_F(Multicast, EveryAttachedQpReceivesEveryDatagram) {
  ASSERT_EQ(b->dev->attach_mcast(b1, group_gid()), 0);
  ASSERT_EQ(b->dev->attach_mcast(b2, group_gid()), 0);
  ASSERT_EQ(b->dev->attach_mcast(b2, group_gid()), 0);  // again: no change
  ASSERT_EQ(c->dev->attach_mcast(c1, group_gid()), 0);
  EXPECT_EQ(b->dev->mcast_attached(group_gid()), 2u);
  EXPECT_EQ(c->dev->mcast_attached(group_gid()), 1u);
  post_recvs(*b, b1, 70);
  post_recvs(*b, b2, 70);
  post_recvs(*b, b3, 70);
  post_recvs(*c, c1, 70);

  send(50);
  auto on_b = collect(*b, 100);
  auto on_c = collect(*c, 50);
  ASSERT_EQ(on_b[b1->qpn()].size(), 50u);
  ASSERT_EQ(on_b[b2->qpn()].size(), 50u);
  EXPECT_EQ(on_b.count(b3->qpn()), 0u);  // not attached: nothing
  ASSERT_EQ(on_c[c1->qpn()].size(), 50u);
  for (Qp* qp : {b1, b2}) {
    for (std::size_t i = 0; i < 50; ++i) {
      EXPECT_EQ(on_b[qp->qpn()][i].imm_data, i);  // in order
      check(*b, on_b[qp->qpn()][i]);
    }
  }
  for (std::size_t i = 0; i < 50; ++i) check(*c, on_c[c1->qpn()][i]);
  EXPECT_EQ(b3->counters().rx_packets, 0u);

  // b2 detaches: b1 and c1 go on receiving, b2 does not.
  ASSERT_EQ(b->dev->detach_mcast(b2, group_gid()), 0);
  EXPECT_EQ(b->dev->detach_mcast(b2, group_gid()), EINVAL);  // not attached any more
  send(10, 50);
  on_b = collect(*b, 10);
  on_c = collect(*c, 10);
  EXPECT_EQ(on_b[b1->qpn()].size(), 10u);
  EXPECT_EQ(on_b.count(b2->qpn()), 0u);
  EXPECT_EQ(on_c[c1->qpn()].size(), 10u);
  for (const Wc& wc : on_b[b1->qpn()]) check(*b, wc);

  // A wrong Q_Key is dropped at every receiver, and counted there.
  send(1, 60, 0x22222222);
  EXPECT_TRUE(wait_until([&] {
    return b1->counters().dropped_bad_qkey == 1 && c1->counters().dropped_bad_qkey == 1;
  }));
  EXPECT_EQ(b->cq->count(), 0u);
  EXPECT_EQ(c->cq->count(), 0u);
  EXPECT_EQ(b1->counters().dropped_bad_qkey, 1u);
  EXPECT_EQ(c1->counters().dropped_bad_qkey, 1u);
}

TEST_F(Multicast, TheLastDetachOrDestroyLeavesTheGroup) {
  ASSERT_EQ(b->dev->attach_mcast(b1, group_gid()), 0);
  ASSERT_EQ(c->dev->attach_mcast(c1, group_gid()), 0);
  post_recvs(*b, b1, 10);
  post_recvs(*c, c1, 10);
  send(2);
  EXPECT_EQ(collect(*b, 2)[b1->qpn()].size(), 2u);
  EXPECT_EQ(collect(*c, 2)[c1->qpn()].size(), 2u);
  // Destroying C's only attached QP leaves the group: C's netdev sees no more datagrams.
  ASSERT_EQ(c->dev->destroy_qp(c1), 0);
  EXPECT_EQ(c->dev->mcast_attached(group_gid()), 0u);
  const auto c_rx = c->dev->netdev().counters().rx_packets;
  ASSERT_EQ(b->dev->detach_mcast(b1, group_gid()), 0);
  const auto a_dropped = a->dev->netdev().counters().tx_dropped;
  send(3, 2);
  EXPECT_TRUE(wait_until([&] { return a->dev->netdev().counters().tx_dropped == a_dropped + 3; }));
  EXPECT_EQ(c->dev->netdev().counters().rx_packets, c_rx);
  EXPECT_EQ(b->cq->count(), 0u);
  EXPECT_EQ(a->dev->netdev().counters().tx_dropped, a_dropped + 3);  // nobody in the group
}

TEST_F(Multicast, TheSendersOwnDeviceReceivesWhenAttached) {
  Qp* a2 = ud(*a);
  ASSERT_EQ(a->dev->attach_mcast(a2, group_gid()), 0);
  Buffer dst(*a, kSlot, kAllAccess);
  const Sge s = dst.sge(0, kSlot);
  ASSERT_EQ(post_recv(a2, 7, std::span(&s, 1)), 0);
  ASSERT_EQ(send_to_qpn_ffffff(ahid, 64), 0);
  auto wcs = wait_wc(a->cq, 2);  // the send's and the receive's, in either order
  ASSERT_EQ(wcs.size(), 2u);
  const Wc& rwc = wcs[0].qp_num == a2->qpn() ? wcs[0] : wcs[1];
  EXPECT_EQ(rwc.qp_num, a2->qpn());
  EXPECT_EQ(rwc.opcode, WcOpcode::kRecv);
  EXPECT_EQ(rwc.byte_len, 104u);
  EXPECT_EQ(dst.bytes[20 + 16], 239);
}

TEST_F(Multicast, OnlyUdQpsAndMulticastGids) {
  Qp* rc = make_qp(*b, QpType::kRc);
  Qp* uc = make_qp(*b, QpType::kUc);
  EXPECT_EQ(b->dev->attach_mcast(rc, group_gid()), EINVAL);
  EXPECT_EQ(b->dev->attach_mcast(uc, group_gid()), EINVAL);
  EXPECT_EQ(b->dev->attach_mcast(b1, b->gid()), EINVAL);                              // unicast
  EXPECT_EQ(b->dev->attach_mcast(b1, netdev::IpAddr::v4(0xF0000001).bytes), EINVAL);  // 240/4
  EXPECT_EQ(b->dev->attach_mcast(c1, group_gid()), EINVAL);  // another device's QP
  EXPECT_EQ(b->dev->detach_mcast(b1, group_gid()), EINVAL);  // not attached
  // ff00::/8 is a multicast GID, but this device is IPv4: its netdev refuses the group.
  Gid v6{};
  v6[0] = 0xFF;
  v6[1] = 0x0E;
  v6[15] = 1;
  EXPECT_EQ(b->dev->attach_mcast(b1, v6), EINVAL);
  EXPECT_EQ(b->dev->mcast_attached(v6), 0u);
  // The limits the device reports hang together.
  const DeviceAttr& at = b->dev->attr();
  EXPECT_GT(at.max_mcast_grp, 0u);
  EXPECT_GT(at.max_mcast_qp_attach, 0u);
  EXPECT_LE(at.max_total_mcast_qp_attach, at.max_mcast_grp * at.max_mcast_qp_attach);
  EXPECT_GE(at.max_total_mcast_qp_attach, at.max_mcast_qp_attach);
}

TEST_F(Multicast, PerGroupAttachLimit) {
  std::vector<Qp*> qps;
  const std::uint32_t limit = b->dev->attr().max_mcast_qp_attach;
  for (std::uint32_t i = 0; i <= limit; ++i) qps.push_back(make_qp(*b, QpType::kUd));
  for (std::uint32_t i = 0; i < limit; ++i) {
    ASSERT_EQ(b->dev->attach_mcast(qps[i], group_gid()), 0);
  }
  EXPECT_EQ(b->dev->attach_mcast(qps[limit], group_gid()), ENOMEM);
  EXPECT_EQ(b->dev->mcast_attached(group_gid()), limit);
}

TEST_F(Multicast, QpnFfffffToAUnicastAddressIsACountedDrop) {
  AhAttr ah;
  ah.dgid = b->gid();
  int err = 0;
  const std::uint32_t to_b = a->dev->create_ah(a->pd, ah, &err);
  ASSERT_EQ(err, 0);
  post_recvs(*b, b1, 1);
  ASSERT_EQ(send_to_qpn_ffffff(to_b, 8), 0);
  ASSERT_EQ(wait_wc(a->cq, 1).size(), 1u);
  auto dropped = [&] {
    for (const auto& [name, v] : b->dev->hw_counters()) {
      if (name == "drop_mcast") return v;
    }
    return std::uint64_t{0};
  };
  wait_until([&] { return dropped() != 0; });
  EXPECT_EQ(dropped(), 1u);
  EXPECT_EQ(b->cq->count(), 0u);
}

}  // namespace
}  // namespace softrdma::rxe::test
