#include <numeric>
#include <random>

#include "tests/rxe/fixture.h"

namespace softrdma::rxe::test {
namespace {

class Rc : public Connected<QpType::kRc> {};

void fill_pattern(std::vector<std::uint8_t>& v, unsigned seed) {
  std::mt19937 rng(seed);
  for (auto& x : v) x = static_cast<std::uint8_t>(rng());
}

TEST_F(Rc, SendOfEverySizeArrivesIntact) {
  Buffer src(*a, 1 << 20, kAllAccess);
  Buffer dst(*b, 1 << 20, kAllAccess);
  fill_pattern(src.bytes, 1);
  std::uint64_t id = 0;
  for (std::uint32_t len : {0u, 1u, 3u, 4095u, 4096u, 4097u, 65536u, 1u << 20}) {
    SCOPED_TRACE(len);
    std::fill(dst.bytes.begin(), dst.bytes.end(), 0);
    const Sge rs = dst.sge(0, 1 << 20);
    ASSERT_EQ(post_recv(qb, ++id, std::span(&rs, 1)), 0);
    const Sge ss = src.sge(0, len);
    ASSERT_EQ(qa->post_send(wr(WrOpcode::kSend, id, std::span(&ss, 1))), 0);
    Wc rwc = one_wc(b->cq);
    EXPECT_EQ(rwc.status, WcStatus::kSuccess);
    EXPECT_EQ(rwc.opcode, WcOpcode::kRecv);
    EXPECT_EQ(rwc.byte_len, len);
    EXPECT_EQ(rwc.wr_id, id);
    EXPECT_EQ(rwc.qp_num, qb->qpn());
    EXPECT_EQ(rwc.src_qp, qa->qpn());
    EXPECT_EQ(rwc.wc_flags, 0u);
    Wc swc = one_wc(a->cq);
    EXPECT_EQ(swc.status, WcStatus::kSuccess);
    EXPECT_EQ(swc.opcode, WcOpcode::kSend);
    EXPECT_EQ(swc.wr_id, id);
    EXPECT_TRUE(std::equal(src.bytes.begin(), src.bytes.begin() + len, dst.bytes.begin()));
    if (len < dst.bytes.size()) {
      EXPECT_EQ(dst.bytes[len], 0);  // nothing beyond the message
    }
  }
}

TEST_F(Rc, SendWithImmediateAndScatterGather) {
  Buffer src(*a, 30000, kAllAccess);
  Buffer dst(*b, 30000, kAllAccess);
  fill_pattern(src.bytes, 2);
  // Three gather pieces into four scatter pieces.
  const Sge ss[3] = {src.sge(0, 1000), src.sge(5000, 7000), src.sge(20000, 3)};
  const Sge rs[4] = {dst.sge(0, 10), dst.sge(100, 5000), dst.sge(10000, 2000), dst.sge(20000, 5000)};
  ASSERT_EQ(post_recv(qb, 7, rs), 0);
  SendWr w = wr(WrOpcode::kSendWithImm, 8, ss, kSendSignaled | kSendSolicited);
  w.imm_data = 0xA1B2C3D4;
  ASSERT_EQ(qa->post_send(w), 0);
  Wc rwc = one_wc(b->cq);
  EXPECT_EQ(rwc.status, WcStatus::kSuccess);
  EXPECT_EQ(rwc.byte_len, 8003u);
  EXPECT_EQ(rwc.wc_flags, static_cast<std::uint32_t>(kWcWithImm));
  EXPECT_EQ(rwc.imm_data, 0xA1B2C3D4u);
  std::vector<std::uint8_t> sent, got;
  for (const Sge& s : ss) {
    auto* p = reinterpret_cast<const std::uint8_t*>(s.addr);
    sent.insert(sent.end(), p, p + s.length);
  }
  std::size_t left = sent.size();
  for (const Sge& s : rs) {
    auto* p = reinterpret_cast<const std::uint8_t*>(s.addr);
    const std::size_t take = std::min<std::size_t>(left, s.length);
    got.insert(got.end(), p, p + take);
    left -= take;
  }
  EXPECT_EQ(sent, got);
  EXPECT_EQ(wait_wc(a->cq, 1).size(), 1u);
}

TEST_F(Rc, InlineSendCopiesAtPostTime) {
  Buffer dst(*b, 256, kAllAccess);
  std::vector<std::uint8_t> msg(200, 0x5A);  // not registered: inline needs no MR
  const Sge rs = dst.sge(0, 256);
  ASSERT_EQ(post_recv(qb, 1, std::span(&rs, 1)), 0);
  const Sge ss{reinterpret_cast<std::uint64_t>(msg.data()), 200, 0};
  ASSERT_EQ(qa->post_send(wr(WrOpcode::kSend, 1, std::span(&ss, 1), kSendSignaled | kSendInline)), 0);
  std::fill(msg.begin(), msg.end(), 0);  // the application reuses its buffer at once
  Wc rwc = one_wc(b->cq);
  EXPECT_EQ(rwc.byte_len, 200u);
  EXPECT_EQ(dst.bytes[0], 0x5A);
  EXPECT_EQ(dst.bytes[199], 0x5A);
  // Too much inline data is refused.
  std::vector<std::uint8_t> big(1024);
  const Sge bs{reinterpret_cast<std::uint64_t>(big.data()), 1024, 0};
  EXPECT_EQ(qa->post_send(wr(WrOpcode::kSend, 2, std::span(&bs, 1), kSendInline)), EINVAL);
}

TEST_F(Rc, WriteAndWriteWithImmediate) {
  Buffer src(*a, 100000, kAllAccess);
  Buffer dst(*b, 100000, kAllAccess);
  fill_pattern(src.bytes, 3);
  const Sge ss = src.sge(0, 70001);
  SendWr w = rdma_wr(WrOpcode::kRdmaWrite, 1, std::span(&ss, 1), dst, 17);
  ASSERT_EQ(qa->post_send(w), 0);
  Wc swc = one_wc(a->cq);
  EXPECT_EQ(swc.status, WcStatus::kSuccess);
  EXPECT_EQ(swc.opcode, WcOpcode::kRdmaWrite);
  EXPECT_TRUE(std::equal(src.bytes.begin(), src.bytes.begin() + 70001, dst.bytes.begin() + 17));
  EXPECT_EQ(dst.bytes[16], 0);
  EXPECT_EQ(dst.bytes[17 + 70001], 0);
  EXPECT_EQ(b->cq->count(), 0u);  // a plain WRITE consumes no receive

  const Sge rs = dst.sge(0, 1);
  ASSERT_EQ(post_recv(qb, 55, std::span(&rs, 1)), 0);
  const Sge s2 = src.sge(0, 5000);
  w = rdma_wr(WrOpcode::kRdmaWriteWithImm, 2, std::span(&s2, 1), dst, 50000);
  w.imm_data = 0x01020304;
  ASSERT_EQ(qa->post_send(w), 0);
  Wc rwc = one_wc(b->cq);
  EXPECT_EQ(rwc.status, WcStatus::kSuccess);
  EXPECT_EQ(rwc.opcode, WcOpcode::kRecvRdmaWithImm);
  EXPECT_EQ(rwc.wr_id, 55u);
  EXPECT_EQ(rwc.imm_data, 0x01020304u);
  EXPECT_EQ(rwc.byte_len, 5000u);
  EXPECT_EQ(rwc.wc_flags, static_cast<std::uint32_t>(kWcWithImm));
  EXPECT_TRUE(std::equal(src.bytes.begin(), src.bytes.begin() + 5000, dst.bytes.begin() + 50000));
}

TEST_F(Rc, ReadOfEverySize) {
  Buffer local(*a, 1 << 20, kAllAccess);
  Buffer remote(*b, 1 << 20, kAllAccess);
  fill_pattern(remote.bytes, 4);
  std::uint64_t id = 0;
  for (std::uint32_t len : {0u, 1u, 4096u, 4097u, 12345u, 1u << 20}) {
    SCOPED_TRACE(len);
    std::fill(local.bytes.begin(), local.bytes.end(), 0);
    const Sge ls = local.sge(0, len);
    SendWr w = rdma_wr(WrOpcode::kRdmaRead, ++id, std::span(&ls, 1), remote);
    ASSERT_EQ(qa->post_send(w), 0);
    Wc swc = one_wc(a->cq);
    EXPECT_EQ(swc.status, WcStatus::kSuccess) << to_string(swc.status);
    EXPECT_EQ(swc.opcode, WcOpcode::kRdmaRead);
    EXPECT_EQ(swc.byte_len, len);
    EXPECT_TRUE(std::equal(remote.bytes.begin(), remote.bytes.begin() + len, local.bytes.begin()));
  }
}

TEST_F(Rc, AtomicsReturnTheOldValue) {
  Buffer local(*a, 64, kAllAccess);
  Buffer remote(*b, 64, kAllAccess);
  std::uint64_t v = 100;
  std::memcpy(remote.bytes.data() + 8, &v, 8);
  const Sge ls = local.sge(0, 8);
  SendWr w = rdma_wr(WrOpcode::kAtomicFetchAndAdd, 1, std::span(&ls, 1), remote, 8);
  w.compare_add = 23;
  ASSERT_EQ(qa->post_send(w), 0);
  Wc wc = one_wc(a->cq);
  EXPECT_EQ(wc.status, WcStatus::kSuccess);
  EXPECT_EQ(wc.opcode, WcOpcode::kFetchAdd);
  EXPECT_EQ(wc.byte_len, 8u);
  std::uint64_t got = 0;
  std::memcpy(&got, local.bytes.data(), 8);
  EXPECT_EQ(got, 100u);
  std::memcpy(&got, remote.bytes.data() + 8, 8);
  EXPECT_EQ(got, 123u);

  w = rdma_wr(WrOpcode::kAtomicCmpAndSwp, 2, std::span(&ls, 1), remote, 8);
  w.compare_add = 123;
  w.swap = 7;
  ASSERT_EQ(qa->post_send(w), 0);
  wc = one_wc(a->cq);
  EXPECT_EQ(wc.opcode, WcOpcode::kCompSwap);
  std::memcpy(&got, local.bytes.data(), 8);
  EXPECT_EQ(got, 123u);
  std::memcpy(&got, remote.bytes.data() + 8, 8);
  EXPECT_EQ(got, 7u);
  // A failed compare leaves memory alone and still returns the old value.
  w.wr_id = 3;
  w.compare_add = 999;
  w.swap = 1;
  ASSERT_EQ(qa->post_send(w), 0);
  wc = one_wc(a->cq);
  std::memcpy(&got, local.bytes.data(), 8);
  EXPECT_EQ(got, 7u);
  std::memcpy(&got, remote.bytes.data() + 8, 8);
  EXPECT_EQ(got, 7u);
  // Misaligned atomics are refused at post time.
  w.remote_addr = remote.addr(9);
  EXPECT_EQ(qa->post_send(w), EINVAL);
}

TEST_F(Rc, ManyMessagesCompleteInOrder) {
  Buffer src(*a, 1 << 16, kAllAccess);
  Buffer dst(*b, 1 << 16, kAllAccess);
  const int n = 2000;
  const Sge rs = dst.sge(0, 1 << 16);
  for (int i = 0; i < n; ++i) ASSERT_EQ(post_recv(qb, i, std::span(&rs, 1)), 0);
  for (int i = 0; i < n; ++i) {
    const Sge ss = src.sge(0, static_cast<std::uint32_t>(i % 9000));
    ASSERT_EQ(qa->post_send(wr(WrOpcode::kSend, i, std::span(&ss, 1))), 0);
  }
  auto swc = wait_wc(a->cq, n);
  auto rwc = wait_wc(b->cq, n);
  ASSERT_EQ(swc.size(), static_cast<std::size_t>(n));
  ASSERT_EQ(rwc.size(), static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(swc[i].wr_id, static_cast<std::uint64_t>(i));
    EXPECT_EQ(rwc[i].wr_id, static_cast<std::uint64_t>(i));
    EXPECT_EQ(rwc[i].byte_len, static_cast<std::uint32_t>(i % 9000));
  }
}

}  // namespace
}  // namespace softrdma::rxe::test
