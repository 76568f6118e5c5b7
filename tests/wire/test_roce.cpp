#include <gtest/gtest.h>

#include <array>
#include <random>
#include <vector>

#include "tests/wire/hex.h"
#include "wire/frame.h"
#include "wire/icrc.h"
#include "wire/roce_frame.h"
#include "wire/roce_headers.h"

using namespace softrdma::wire;

namespace {

std::uint32_t r32(std::mt19937& g) {
  return static_cast<std::uint32_t>(g());
}

// The CNP captured from a ConnectX-4 Lx (../shared/conformance/vectors.md).
const char* kCnpFrame =
    "e41d2dab2bc2 7cfe90643b32 0800"
    "45c2003c718c400040119161 0a001101 0a001201"
    "000012b700280000"
    "8100ffff 40000118 00000000"
    "00000000000000000000000000000000"
    "82fd002a";

// Fills every header the opcode needs with distinctive values.
RoceHeaders sample_headers(std::uint8_t opcode, std::mt19937& rng) {
  RoceHeaders h;
  h.bth.opcode = opcode;
  h.bth.se = r32(rng) & 1;
  h.bth.pkey = 0xFFFF;
  h.bth.dest_qp = r32(rng) & kQpnMask;
  h.bth.ack_req = r32(rng) & 1;
  h.bth.psn = r32(rng) & kPsnMask;
  const RoceOpcodeInfo& info = roce_opcode_info(opcode);
  if (info.headers & kDeth)
    h.deth = Deth{static_cast<std::uint32_t>(r32(rng)), 0, r32(rng) & kQpnMask};
  if (info.headers & kXrcEth) h.xrceth = XrcEth{0, r32(rng) & 0xFFFFFF};
  if (info.headers & kFeth)
    h.feth = Feth{static_cast<std::uint8_t>(1 + r32(rng) % 3),
                  static_cast<std::uint8_t>(r32(rng) & 1), 0};
  if (info.headers & kReth)
    h.reth = Reth{(std::uint64_t{r32(rng)} << 32) | r32(rng), static_cast<std::uint32_t>(r32(rng)),
                  static_cast<std::uint32_t>(r32(rng))};
  if (info.headers & kAtomicEth)
    h.atomic_eth = AtomicEth{
        (std::uint64_t{r32(rng)} << 32) | (r32(rng) & ~7u), static_cast<std::uint32_t>(r32(rng)),
        (std::uint64_t{r32(rng)} << 32) | r32(rng), (std::uint64_t{r32(rng)} << 32) | r32(rng)};
  if (info.headers & kAeth)
    h.aeth = Aeth{static_cast<std::uint8_t>(r32(rng) & 0x1F), r32(rng) & 0xFFFFFF};
  if (info.headers & kAtomicAckEth)
    h.atomic_ack_eth = AtomicAckEth{(std::uint64_t{r32(rng)} << 32) | r32(rng)};
  if (info.headers & kImmDt) h.imm = static_cast<std::uint32_t>(r32(rng));
  if (info.headers & kIeth) h.inv_rkey = static_cast<std::uint32_t>(r32(rng));
  return h;
}

// The frame build_roce_frame makes for `a` of `h` and `payload`, at most 200 bytes; empty, and a
// test failure, when it refuses.
std::vector<std::uint8_t> frame_of(const RoceAddr& a, const RoceHeaders& h, Bytes payload = {}) {
  std::vector<std::uint8_t> frame(200);
  auto n = build_roce_frame(frame, a, h, payload);
  if (!n.ok()) {
    ADD_FAILURE() << to_string(n.error());
    return {};
  }
  frame.resize(*n);
  return frame;
}

}  // namespace

TEST(Icrc, MatchesRealHardwareCnp) {
  const auto frame = from_hex(kCnpFrame);
  ASSERT_EQ(frame.size(), 74u);
  auto v = parse_frame(frame, 1);
  ASSERT_TRUE(v.ok()) << to_string(v.error());
  auto pkt = parse_roce(v->payload);
  ASSERT_TRUE(pkt.ok()) << to_string(pkt.error());
  EXPECT_EQ(pkt->hdr.bth.opcode, op::kCnp);
  EXPECT_TRUE(pkt->hdr.bth.becn);
  EXPECT_EQ(pkt->hdr.bth.dest_qp, 0x118u);
  auto icrc = expected_icrc(*v);
  ASSERT_TRUE(icrc.ok());
  EXPECT_EQ(*icrc, pkt->icrc);
  std::array<std::uint8_t, 4> wire{};
  store32le(wire.data(), *icrc);
  EXPECT_EQ(wire, (std::array<std::uint8_t, 4>{0x82, 0xfd, 0x00, 0x2a}));
}

TEST(Icrc, RebuiltCnpIsByteForByteIdentical) {
  const auto want = from_hex(kCnpFrame);
  auto v = parse_frame(want, 1);
  ASSERT_TRUE(v.ok());
  RoceAddr a;
  a.src4 = v->ipv4.src;
  a.dst4 = v->ipv4.dst;
  a.src_port = 0;
  a.traffic_class = 0xc2;
  a.ip_id = 0x718c;
  a.eth = v->eth;
  RoceHeaders h;
  h.bth.opcode = op::kCnp;
  h.bth.becn = true;
  h.bth.dest_qp = 0x118;
  std::vector<std::uint8_t> got(want.size() + 16);
  auto n = build_roce_frame(got, a, h, {});
  ASSERT_TRUE(n.ok()) << to_string(n.error());
  got.resize(*n);
  EXPECT_EQ(got, want);
}

TEST(Icrc, MaskedFieldsDoNotChangeIt) {
  std::mt19937 rng(1);
  RoceAddr a;
  a.src4 = 0x0a000001;
  a.dst4 = 0x0a000002;
  const auto h = sample_headers(op::kRcSendOnly, rng);
  const std::vector<std::uint8_t> payload(33, 0x5a);
  const std::vector<std::uint8_t> frame = frame_of(a, h, payload);
  auto v = parse_frame(frame, 101);
  ASSERT_TRUE(v.ok());
  const std::uint32_t base = *expected_icrc(*v);
  // TOS, TTL, IP checksum, UDP checksum and BTH byte 4 (FECN/BECN) are invariant-masked.
  for (std::size_t off : {1u, 8u, 10u, 11u, 26u, 27u, 32u}) {
    auto copy = frame;
    copy[off] ^= 0x40;
    auto cv = parse_frame(copy, 101);
    ASSERT_TRUE(cv.ok()) << off;
    EXPECT_EQ(*expected_icrc(*cv), base) << "offset " << off;
  }
  // Anything else changes it: the PSN, the payload.
  for (std::size_t off : {40u, 50u}) {
    auto copy = frame;
    copy[off] ^= 0x01;
    EXPECT_NE(*expected_icrc(*parse_frame(copy, 101)), base) << "offset " << off;
  }
}

TEST(Icrc, Ipv6MasksTrafficClassFlowLabelHopLimit) {
  std::mt19937 rng(2);
  RoceAddr a;
  a.ipv6 = true;
  a.src6[15] = 1;
  a.dst6[15] = 2;
  const std::vector<std::uint8_t> frame = frame_of(a, sample_headers(op::kRcAck, rng));
  auto v = parse_frame(frame, 101);
  ASSERT_TRUE(v.ok());
  ASSERT_TRUE(v->is_ipv6);
  const auto pkt = parse_roce(v->payload);
  ASSERT_TRUE(pkt.ok());
  EXPECT_EQ(*expected_icrc(*v), pkt->icrc);
  auto copy = frame;
  copy[0] ^= 0x0F;
  copy[1] ^= 0xFF;
  copy[3] ^= 0x12;
  copy[7] ^= 0x3F;
  EXPECT_EQ(*expected_icrc(*parse_frame(copy, 101)), pkt->icrc);
  copy[8] ^= 1;  // source address is covered
  EXPECT_NE(*expected_icrc(*parse_frame(copy, 101)), pkt->icrc);
}

TEST(RoceOpcode, TableMatchesSpec) {
  EXPECT_EQ(roce_opcode_info(op::kRcWriteOnlyImm).headers, kReth | kImmDt);
  EXPECT_EQ(roce_opcode_info(op::kRcReadResponseMiddle).headers, 0);
  EXPECT_EQ(roce_opcode_info(op::kRcReadResponseFirst).headers, kAeth);
  EXPECT_EQ(roce_opcode_info(op::kRcAtomicAck).headers, kAeth | kAtomicAckEth);
  EXPECT_EQ(roce_opcode_info(op::kUdSendOnlyImm).headers, kDeth | kImmDt);
  EXPECT_EQ(roce_opcode_info(op::kUdSendOnly).header_len(), 20u);
  EXPECT_EQ(roce_opcode_info(op::kRcCompareSwap).header_len(), 40u);
  EXPECT_EQ(roce_opcode_info(op::kCnp).header_len(), 28u);
  EXPECT_FALSE(roce_opcode_info(0x15).defined());
  EXPECT_FALSE(roce_opcode_info(0x2C).defined());
  EXPECT_FALSE(roce_opcode_info(0x60).defined());
  EXPECT_TRUE(roce_opcode_info(op::kRcReadRequest).request);
  EXPECT_FALSE(roce_opcode_info(op::kRcReadResponseOnly).request);
  EXPECT_FALSE(roce_opcode_info(op::kRcReadRequest).payload);
  EXPECT_EQ(roce_opcode_info(0x22).transport, Transport::kUc);
  EXPECT_EQ(roce_opcode_info(0x22).seg, Seg::kLast);
  int defined = 0;
  for (int i = 0; i < 256; ++i) defined += roce_opcode_info(static_cast<std::uint8_t>(i)).defined();
  EXPECT_EQ(defined, 25 + 12 + 2 + 1 + 23);
}

// XRC (IBTA annex A14): RC's opcodes at 0xA0 (but RESYNC, 0xB5), the XRCETH first in every
// request and in no response.
TEST(RoceOpcode, XrcOpcodesAreRcsWithTheXrcEth) {
  for (int rc = 0; rc <= 0x17; ++rc) {
    const RoceOpcodeInfo& r = roce_opcode_info(static_cast<std::uint8_t>(rc));
    const RoceOpcodeInfo& x = roce_opcode_info(static_cast<std::uint8_t>(op::kXrcBase | rc));
    SCOPED_TRACE(rc);
    ASSERT_EQ(x.defined(), r.defined() && rc != 0x15);
    if (!x.defined()) continue;
    EXPECT_EQ(x.transport, Transport::kXrc);
    EXPECT_EQ(x.kind, r.kind);
    EXPECT_EQ(x.seg, r.seg);
    EXPECT_EQ(x.request, r.request);
    EXPECT_EQ(x.headers, r.request ? (r.headers | kXrcEth) : r.headers);
    EXPECT_EQ(x.header_len(), r.header_len() + (r.request ? kXrcEthLen : 0));
  }
  // The XRCETH comes before the RETH: a WRITE ONLY's RETH starts 16 bytes in.
  std::mt19937 rng(7);
  RoceHeaders h = sample_headers(0xAA, rng);
  h.xrceth = XrcEth{0, 0xABCDEF};
  std::vector<std::uint8_t> buf(256);
  auto n = build_roce(buf, h, std::vector<std::uint8_t>(8));
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(buf[kBthLen], 0);
  EXPECT_EQ(buf[kBthLen + 1], 0xAB);
  EXPECT_EQ(buf[kBthLen + 3], 0xEF);
  EXPECT_EQ(load64(buf.data() + kBthLen + kXrcEthLen), h.reth->va);
}

TEST(RoceHeaders, EveryOpcodeRoundTrips) {
  std::mt19937 rng(42);
  for (int opc = 0; opc < 256; ++opc) {
    const auto opcode = static_cast<std::uint8_t>(opc);
    const RoceOpcodeInfo& info = roce_opcode_info(opcode);
    if (!info.defined()) continue;
    for (std::size_t plen : {0u, 1u, 2u, 3u, 4u, 255u, 1024u}) {
      if (!info.payload && plen) continue;
      SCOPED_TRACE(std::string(info.name) + " payload " + std::to_string(plen));
      const RoceHeaders h = sample_headers(opcode, rng);
      std::vector<std::uint8_t> payload(plen);
      for (auto& b : payload) b = static_cast<std::uint8_t>(r32(rng));
      std::vector<std::uint8_t> buf(2048);
      auto n = build_roce(buf, h, payload);
      ASSERT_TRUE(n.ok()) << to_string(n.error());
      ASSERT_EQ(*n, roce_len(info, plen));
      buf.resize(*n);
      auto p = parse_roce(buf);
      ASSERT_TRUE(p.ok()) << to_string(p.error());
      EXPECT_EQ(p->hdr.bth.opcode, opcode);
      EXPECT_EQ(p->hdr.bth.psn, h.bth.psn);
      EXPECT_EQ(p->hdr.bth.dest_qp, h.bth.dest_qp);
      EXPECT_EQ(p->hdr.bth.se, h.bth.se);
      EXPECT_EQ(p->hdr.bth.ack_req, h.bth.ack_req);
      EXPECT_EQ(p->hdr.bth.pad_count, roce_pad(plen));
      EXPECT_EQ(p->header_len, info.header_len());
      ASSERT_EQ(p->payload.size(), plen);
      EXPECT_TRUE(std::equal(payload.begin(), payload.end(), p->payload.begin()));
      EXPECT_EQ(p->hdr.reth.has_value(), h.reth.has_value());
      if (h.reth) {
        EXPECT_EQ(p->hdr.reth->va, h.reth->va);
        EXPECT_EQ(p->hdr.reth->rkey, h.reth->rkey);
        EXPECT_EQ(p->hdr.reth->dma_len, h.reth->dma_len);
      }
      if (h.aeth) {
        EXPECT_EQ(p->hdr.aeth->syndrome, h.aeth->syndrome);
        EXPECT_EQ(p->hdr.aeth->msn, h.aeth->msn);
      }
      if (h.atomic_eth) {
        EXPECT_EQ(p->hdr.atomic_eth->va, h.atomic_eth->va);
        EXPECT_EQ(p->hdr.atomic_eth->rkey, h.atomic_eth->rkey);
        EXPECT_EQ(p->hdr.atomic_eth->swap_add, h.atomic_eth->swap_add);
        EXPECT_EQ(p->hdr.atomic_eth->compare, h.atomic_eth->compare);
      }
      if (h.atomic_ack_eth) {
        EXPECT_EQ(p->hdr.atomic_ack_eth->orig, h.atomic_ack_eth->orig);
      }
      if (h.deth) {
        EXPECT_EQ(p->hdr.deth->qkey, h.deth->qkey);
        EXPECT_EQ(p->hdr.deth->src_qp, h.deth->src_qp);
      }
      EXPECT_EQ(p->hdr.xrceth.has_value(), h.xrceth.has_value());
      if (h.xrceth) {
        EXPECT_EQ(p->hdr.xrceth->srqn, h.xrceth->srqn);
      }
      EXPECT_EQ(p->hdr.feth.has_value(), h.feth.has_value());
      if (h.feth) {
        EXPECT_EQ(p->hdr.feth->placement, h.feth->placement);
        EXPECT_EQ(p->hdr.feth->selectivity, h.feth->selectivity);
      }
      EXPECT_EQ(p->hdr.imm, h.imm);
      EXPECT_EQ(p->hdr.inv_rkey, h.inv_rkey);
    }
  }
}

// IBTA 1.5 A19: FLUSH is BTH | FETH | RETH (the FETH before the RETH), ATOMIC WRITE BTH | RETH
// | 8 bytes; both RC requests of one packet.
TEST(RoceOpcode, FlushAndAtomicWriteAreLaidOutAsA19Says) {
  const RoceOpcodeInfo& f = roce_opcode_info(op::kRcFlush);
  EXPECT_EQ(f.name, "RC FLUSH");
  EXPECT_EQ(f.kind, OpKind::kFlush);
  EXPECT_EQ(f.headers, kFeth | kReth);
  EXPECT_EQ(f.header_len(), 32u);
  EXPECT_FALSE(f.payload);
  EXPECT_TRUE(f.request);
  const RoceOpcodeInfo& w = roce_opcode_info(op::kRcAtomicWrite);
  EXPECT_EQ(w.name, "RC ATOMIC_WRITE");
  EXPECT_EQ(w.kind, OpKind::kAtomicWrite);
  EXPECT_EQ(w.headers, kReth);
  EXPECT_EQ(w.header_len(), 28u);
  EXPECT_TRUE(w.payload);
  EXPECT_EQ(segment_opcode(Transport::kRc, OpKind::kFlush, Seg::kOnly), op::kRcFlush);
  EXPECT_EQ(segment_opcode(Transport::kUc, OpKind::kAtomicWrite, Seg::kOnly), std::nullopt);

  RoceHeaders h;
  h.bth.opcode = op::kRcFlush;
  h.reth = Reth{0x1122334455667788, 0xAABBCCDD, 4096};
  std::vector<std::uint8_t> buf(64);
  EXPECT_EQ(build_roce(buf, h, {}).error(), Error::kBadValue);  // no FETH
  h.feth = Feth{flush::kGlobal | flush::kPersistent, flush::kRegion, 0};
  auto n = build_roce(buf, h, {});
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 36u);
  // The FETH word: selectivity in bits 5-4, placement type in bits 3-0; then the RETH.
  EXPECT_EQ(load32(buf.data() + kBthLen), 0x13u);
  EXPECT_EQ(load64(buf.data() + kBthLen + kFethLen), 0x1122334455667788u);
  buf.resize(*n);
  buf[kBthLen] = 0x80;  // a reserved bit
  auto p = parse_roce(buf);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->hdr.feth->placement, 3);
  EXPECT_EQ(p->hdr.feth->selectivity, 1);
  EXPECT_EQ(p->hdr.feth->reserved, 0x80000000u);
  EXPECT_TRUE(roce_reserved_set(*p));
  EXPECT_EQ(p->hdr.reth->dma_len, 4096u);
}

TEST(RoceHeaders, BuildRejectsMissingHeadersAndPayloadWhereNoneAllowed) {
  std::vector<std::uint8_t> buf(256);
  RoceHeaders h;
  h.bth.opcode = op::kRcWriteOnly;  // needs a RETH
  EXPECT_EQ(build_roce(buf, h, {}).error(), Error::kBadValue);
  h.bth.opcode = op::kRcAck;
  h.aeth = Aeth{};
  const std::uint8_t one = 1;
  EXPECT_EQ(build_roce(buf, h, Bytes(&one, 1)).error(), Error::kBadValue);
  EXPECT_EQ(build_roce(MutBytes(buf.data(), 10), h, {}).error(), Error::kNoRoom);
  h.bth.opcode = 0x15;
  EXPECT_EQ(build_roce(buf, h, {}).error(), Error::kUnknownOpcode);
}

TEST(RoceHeaders, ParseErrorsArePrecise) {
  std::mt19937 rng(7);
  std::vector<std::uint8_t> buf(64);
  const auto h = sample_headers(op::kRcSendOnly, rng);
  const std::vector<std::uint8_t> payload(5, 1);
  auto n = build_roce(buf, h, payload);
  ASSERT_TRUE(n.ok());
  buf.resize(*n);
  auto bad = buf;
  // The packet with `bits` set in byte `off`, parsed (a view of `bad`).
  const auto with_bits = [&](std::size_t off, std::uint8_t bits) {
    bad = buf;
    bad[off] |= bits;
    return parse_roce(bad);
  };
  EXPECT_EQ(with_bits(1, 0x01).error(), Error::kBadVersion);  // TVer 1
  // Reserved bits (BTH byte 4 low six, byte 8 low seven) are returned, not judged.
  auto r4 = with_bits(4, 0x10);
  ASSERT_TRUE(r4.ok());
  EXPECT_EQ(r4->hdr.bth.resv6, 0x10);
  EXPECT_TRUE(roce_reserved_set(*r4));
  EXPECT_FALSE(roce_reserved_set(*parse_roce(buf)));
  auto r8 = with_bits(8, 0x01);
  ASSERT_TRUE(r8.ok());
  EXPECT_EQ(r8->hdr.bth.resv7, 0x01);
  EXPECT_TRUE(roce_reserved_set(*r8));
  bad = buf;
  bad[0] = 0x15;
  EXPECT_EQ(parse_roce(bad).error(), Error::kUnknownOpcode);
  // An ACK with bytes between AETH and ICRC.
  RoceHeaders ack;
  ack.bth.opcode = op::kRcAck;
  ack.aeth = Aeth{0x1F, 3};
  std::vector<std::uint8_t> a(64);
  a.resize(*build_roce(a, ack, {}));
  a.insert(a.end() - 4, {0, 0, 0, 0});
  EXPECT_EQ(parse_roce(a).error(), Error::kBadLength);
  // Pad count larger than the payload present.
  RoceHeaders s;
  s.bth.opcode = op::kRcSendOnly;
  std::vector<std::uint8_t> sb(64);
  sb.resize(*build_roce(sb, s, {}));
  sb[1] |= 0x30;
  EXPECT_EQ(parse_roce(sb).error(), Error::kBadPad);
}

TEST(RoceHeaders, EveryTruncationIsAnErrorNotACrash) {
  std::mt19937 rng(9);
  for (std::uint8_t opcode : {op::kRcWriteOnlyImm, op::kRcCompareSwap, op::kRcAtomicAck,
                              op::kUdSendOnlyImm, op::kCnp, op::kRcSendOnlyInv}) {
    std::vector<std::uint8_t> buf(128);
    const auto& info = roce_opcode_info(opcode);
    const std::vector<std::uint8_t> payload(info.payload ? 8 : 0, 0x33);
    auto n = build_roce(buf, sample_headers(opcode, rng), payload);
    ASSERT_TRUE(n.ok());
    const std::size_t min = info.header_len() + kIcrcLen;
    for (std::size_t len = 0; len < min; ++len) {
      // Copy into an exact-size heap buffer so ASan sees any over-read.
      std::vector<std::uint8_t> cut(buf.begin(), buf.begin() + static_cast<long>(len));
      EXPECT_EQ(parse_roce(cut).error(), Error::kTruncated) << info.name << " len " << len;
    }
  }
}

TEST(RoceHeaders, RandomBytesNeverCrash) {
  std::mt19937 rng(123);
  int ok = 0;
  for (int i = 0; i < 20000; ++i) {
    std::vector<std::uint8_t> buf(r32(rng) % 80);
    for (auto& b : buf) b = static_cast<std::uint8_t>(r32(rng));
    if (!buf.empty() && (r32(rng) & 1)) buf[0] = static_cast<std::uint8_t>(r32(rng) % 0x18);
    if (buf.size() > 1) buf[1] &= 0xF0;
    if (buf.size() > 8) {
      buf[4] &= 0xC0;
      buf[8] &= 0x80;
    }
    auto p = parse_roce(buf);
    if (p.ok()) {
      ++ok;
      EXPECT_LE(p->header_len + p->payload.size() + p->pad.size() + kIcrcLen, buf.size());
    }
  }
  EXPECT_GT(ok, 0);
}

TEST(Frame, EveryTruncationOfAFrameIsAnError) {
  std::mt19937 rng(5);
  RoceAddr a;
  a.eth = Ethernet{};
  a.eth->vlan_tci = 0x0064;
  const std::vector<std::uint8_t> frame =
      frame_of(a, sample_headers(op::kRcWriteOnly, rng), std::vector<std::uint8_t>(7, 9));
  auto full = parse_frame(frame, 1);
  ASSERT_TRUE(full.ok());
  EXPECT_EQ(full->eth->vlan_tci, 0x0064);
  EXPECT_EQ(ipv4_header_checksum(full->ip_header), 0);
  for (std::size_t len = 0; len < frame.size(); ++len) {
    std::vector<std::uint8_t> cut(frame.begin(), frame.begin() + static_cast<long>(len));
    EXPECT_FALSE(parse_frame(cut, 1).ok()) << len;
  }
}

TEST(Frame, UdpChecksumWhenAskedVerifiesToZero) {
  std::mt19937 rng(6);
  RoceAddr a;
  a.src4 = 0xC0A80001;
  a.dst4 = 0xC0A80002;
  a.udp_checksum = true;
  const std::vector<std::uint8_t> frame =
      frame_of(a, sample_headers(op::kRcSendOnly, rng), std::vector<std::uint8_t>(13, 1));
  auto v = parse_frame(frame, 101);
  ASSERT_TRUE(v.ok());
  EXPECT_NE(v->udp->checksum, 0);
  EXPECT_EQ(l4_checksum_ipv4(a.src4, a.dst4, kIpProtoUdp, v->l4_segment), 0);
}
