#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <vector>

#include "tests/wire/random_buffers.h"
#include "wire/ddp_rdmap.h"

using namespace softrdma::wire;

namespace {
DdpHeader header_for(std::uint8_t op) {
  const OpcodeInfo& info = opcode_info(op);
  DdpHeader h;
  h.tagged = info.tagged;
  h.last = (op % 2) == 0;
  h.opcode = op;
  if (h.tagged) {
    h.stag = 0x11223344u + op;
    h.to = 0x0102030405060708ull + op;
  } else {
    h.qn = info.queue;
    h.msn = 0x10000u + op;
    h.mo = 0x200u * op;
    h.inv_stag = info.uses_inv_stag ? 0xdeadbeefu : 0;
  }
  return h;
}
}  // namespace

TEST(Rdmap, OpcodeTable) {
  EXPECT_TRUE(opcode_info(0).tagged);
  EXPECT_TRUE(opcode_info(2).tagged);
  for (int op : {1, 3, 4, 5, 6, 7})
    EXPECT_FALSE(opcode_info(static_cast<std::uint8_t>(op)).tagged) << op;
  EXPECT_EQ(opcode_info(1).queue, kQnReadRequest);
  EXPECT_EQ(opcode_info(7).queue, kQnTerminate);
  for (int op : {3, 4, 5, 6}) EXPECT_EQ(opcode_info(static_cast<std::uint8_t>(op)).queue, kQnSend);
  EXPECT_TRUE(opcode_info(4).uses_inv_stag);
  EXPECT_TRUE(opcode_info(6).uses_inv_stag);
  EXPECT_FALSE(opcode_info(3).uses_inv_stag);
  EXPECT_FALSE(opcode_info(1).payload);
  EXPECT_TRUE(opcode_info(0).payload);
  for (std::uint8_t op = 0; op < 16; ++op) EXPECT_EQ(opcode_info(op).known, op < 8);
}

TEST(Ddp, RoundTripEveryOpcode) {
  for (std::uint8_t op = 0; op < 8; ++op) {
    const DdpHeader h = header_for(op);
    std::array<std::uint8_t, 32> out{};
    auto n = build_ddp_header(out, h);
    ASSERT_TRUE(n.ok());
    EXPECT_EQ(*n, h.tagged ? 14u : 18u);
    EXPECT_EQ(out[0] & 0x03, 1);  // DV
    EXPECT_EQ(out[1] >> 6, 1);    // RV
    EXPECT_EQ(out[1] & 0x0f, op);
    auto p = parse_ddp_header(Bytes(out.data(), *n));
    ASSERT_TRUE(p.ok()) << int(op) << " " << to_string(p.error());
    EXPECT_EQ(p->tagged, h.tagged);
    EXPECT_EQ(p->last, h.last);
    EXPECT_EQ(p->opcode, op);
    EXPECT_EQ(p->stag, h.stag);
    EXPECT_EQ(p->to, h.to);
    EXPECT_EQ(p->qn, h.qn);
    EXPECT_EQ(p->msn, h.msn);
    EXPECT_EQ(p->mo, h.mo);
    EXPECT_EQ(p->inv_stag, h.inv_stag);
    for (std::size_t len = 0; len < *n; ++len) {
      std::vector<std::uint8_t> cut(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(len));
      EXPECT_EQ(parse_ddp_header(cut).error(), Error::kTruncated);
      EXPECT_EQ(decode_ddp_header(cut).error(), Error::kTruncated);
    }
  }
}

TEST(Ddp, CapturedHeaders) {
  const std::uint8_t send[] = {0x41, 0x43, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0};
  auto s = parse_ddp_header(send);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->opcode, static_cast<std::uint8_t>(RdmapOpcode::kSend));
  EXPECT_FALSE(s->tagged);
  EXPECT_TRUE(s->last);
  EXPECT_EQ(s->msn, 1u);
  const std::uint8_t write[] = {0xc1, 0x40, 0, 0, 0x12, 0x34, 0, 0, 0, 0, 0, 0, 0x10, 0};
  auto w = parse_ddp_header(write);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->opcode, static_cast<std::uint8_t>(RdmapOpcode::kWrite));
  EXPECT_EQ(w->stag, 0x1234u);
  EXPECT_EQ(w->to, 0x1000u);
}

TEST(Ddp, Violations) {
  std::array<std::uint8_t, 18> b{};
  auto issue = [&](auto mutate) {
    DdpHeader h = header_for(3);
    mutate(h);
    EXPECT_TRUE(build_ddp_header(b, h).ok());
    auto d = decode_ddp_header(b);
    EXPECT_TRUE(d.ok());
    return check_ddp_header(*d);
  };
  EXPECT_EQ(issue([](DdpHeader&) {}), DdpIssue::kNone);
  EXPECT_EQ(issue([](DdpHeader& h) { h.ddp_version = 0; }), DdpIssue::kBadDdpVersion);
  EXPECT_EQ(issue([](DdpHeader& h) { h.rdmap_version = 2; }), DdpIssue::kBadRdmapVersion);
  // Reserved fields: a receiver ignores them (check_ddp_header), lint reports them.
  EXPECT_EQ(issue([](DdpHeader& h) { h.ddp_reserved = 4; }), DdpIssue::kNone);
  EXPECT_EQ(issue([](DdpHeader& h) { h.rdmap_reserved = 1; }), DdpIssue::kNone);
  EXPECT_EQ(issue([](DdpHeader& h) { h.inv_stag = 5; }), DdpIssue::kNone);
  auto reserved = [&](auto mutate) {
    DdpHeader h = header_for(3);
    mutate(h);
    EXPECT_TRUE(build_ddp_header(b, h).ok());
    return check_ddp_reserved(*decode_ddp_header(b));
  };
  EXPECT_EQ(reserved([](DdpHeader&) {}), DdpIssue::kNone);
  EXPECT_EQ(reserved([](DdpHeader& h) { h.ddp_reserved = 4; }), DdpIssue::kDdpReserved);
  EXPECT_EQ(reserved([](DdpHeader& h) { h.rdmap_reserved = 1; }), DdpIssue::kRdmapReserved);
  EXPECT_EQ(reserved([](DdpHeader& h) { h.inv_stag = 5; }), DdpIssue::kRdmapReserved);
  EXPECT_EQ(issue([](DdpHeader& h) { h.opcode = 9; }), DdpIssue::kUnknownOpcode);
  EXPECT_EQ(issue([](DdpHeader& h) { h.opcode = 0; }), DdpIssue::kTaggedMismatch);
  EXPECT_EQ(issue([](DdpHeader& h) { h.qn = 1; }), DdpIssue::kQueueNumber);
  EXPECT_EQ(issue([](DdpHeader& h) { h.opcode = 1; }), DdpIssue::kQueueNumber);
  b[0] = 0x41;
  b[1] = 0x8f;  // RV 2
  EXPECT_EQ(parse_ddp_header(b).error(), Error::kBadVersion);
  b[1] = 0x4f;
  EXPECT_EQ(parse_ddp_header(b).error(), Error::kUnknownOpcode);
  b[1] = 0x40;  // Write in an untagged header
  EXPECT_EQ(parse_ddp_header(b).error(), Error::kBadValue);
  std::array<std::uint8_t, 13> small{};
  EXPECT_EQ(build_ddp_header(small, header_for(0)).error(), Error::kNoRoom);
}

TEST(Rdmap, ReadRequestRoundTrip) {
  ReadRequest r{0x01020304, 0x1112131415161718ull, 0x10000, 0xa0b0c0d0, 0xfedcba9876543210ull};
  std::array<std::uint8_t, 28> out{};
  ASSERT_EQ(*build_read_request(out, r), 28u);
  EXPECT_EQ(load32(&out[12]), 0x10000u);
  auto p = parse_read_request(out);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->sink_stag, r.sink_stag);
  EXPECT_EQ(p->sink_to, r.sink_to);
  EXPECT_EQ(p->size, r.size);
  EXPECT_EQ(p->src_stag, r.src_stag);
  EXPECT_EQ(p->src_to, r.src_to);
  for (std::size_t len = 0; len < 28; ++len) {
    std::vector<std::uint8_t> cut(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(len));
    EXPECT_EQ(parse_read_request(cut).error(), Error::kTruncated);
  }
  std::array<std::uint8_t, 27> small{};
  EXPECT_EQ(build_read_request(small, r).error(), Error::kNoRoom);
}

TEST(Rdmap, TerminateRoundTrip) {
  std::array<std::uint8_t, 18> ddp{};
  ASSERT_TRUE(build_ddp_header(ddp, header_for(1)).ok());
  std::array<std::uint8_t, 28> rr{};
  ASSERT_TRUE(build_read_request(rr, ReadRequest{1, 2, 3, 4, 5}).ok());
  for (int variant = 0; variant < 4; ++variant) {
    Terminate t;
    t.layer = static_cast<std::uint8_t>(TermLayer::kDdp);
    t.etype = static_cast<std::uint8_t>(DdpErrorType::kUntaggedBuffer);
    t.code = static_cast<std::uint8_t>(DdpUntaggedErrorCode::kInvalidMsnRange);
    t.d = variant & 1;
    t.m = t.d;
    t.r = variant & 2;
    if (t.d) {
      t.ddp_header = ddp;
      t.ddp_segment_len = 46;
    }
    if (t.r) t.rdmap_header = rr;
    std::array<std::uint8_t, 64> out{};
    auto n = build_terminate(out, t);
    ASSERT_TRUE(n.ok());
    EXPECT_EQ(*n, t.encoded_len());
    EXPECT_EQ(out[0], 0x12);
    EXPECT_EQ(out[1], 0x03);
    auto p = parse_terminate(Bytes(out.data(), *n));
    ASSERT_TRUE(p.ok()) << variant;
    EXPECT_EQ(p->layer, 1);
    EXPECT_EQ(p->etype, 2);
    EXPECT_EQ(p->code, 3);
    EXPECT_EQ(p->m, t.m);
    EXPECT_EQ(p->d, t.d);
    EXPECT_EQ(p->r, t.r);
    EXPECT_EQ(p->ddp_segment_len, t.ddp_segment_len);
    EXPECT_EQ(p->ddp_header.size(), t.ddp_header.size());
    EXPECT_EQ(p->rdmap_header.size(), t.rdmap_header.size());
    for (std::size_t len = 0; len < *n; ++len) {
      std::vector<std::uint8_t> cut(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(len));
      EXPECT_EQ(parse_terminate(cut).error(), Error::kTruncated) << variant << " " << len;
    }
  }
  std::array<std::uint8_t, 4> bad = {0x30, 0, 0, 0};  // layer 3
  EXPECT_EQ(parse_terminate(bad).error(), Error::kBadValue);
  bad = {0x00, 0, 0x80, 0};  // M without D
  EXPECT_EQ(parse_terminate(bad).error(), Error::kBadValue);
  bad = {0x00, 0, 0x00, 1};          // reserved
  auto term = parse_terminate(bad);  // reserved bits: returned, not judged
  ASSERT_TRUE(term.ok());
  EXPECT_EQ(term->reserved, 1u);
}

TEST(Rdmap, ErrorCodeValues) {
  EXPECT_EQ(static_cast<int>(RdmapErrorCode::kStagNotAssociated), 0x03);
  EXPECT_EQ(static_cast<int>(RdmapErrorCode::kUnexpectedOpcode), 0x06);
  EXPECT_EQ(static_cast<int>(RdmapErrorCode::kUnspecified), 0xff);
  EXPECT_EQ(static_cast<int>(DdpTaggedErrorCode::kInvalidVersion), 0x04);
  EXPECT_EQ(static_cast<int>(DdpUntaggedErrorCode::kInvalidVersion), 0x06);
  EXPECT_EQ(static_cast<int>(MpaErrorCode::kCrc), 0x02);
  EXPECT_EQ(static_cast<int>(MpaErrorCode::kMarker), 0x03);
  EXPECT_EQ(static_cast<int>(TermLayer::kLlp), 2);
}

TEST(Ddp, RandomBytesNeverCrash) {
  const int ok = parsed_random_buffers(11, 50000, 64, [](int i, auto& buf, auto&) {
    if (i % 2 && buf.size() >= 2) {  // plausible control bytes, so some parse
      buf[0] = static_cast<std::uint8_t>((buf[0] & 0xc0) | 0x01);
      buf[1] = static_cast<std::uint8_t>(0x40 | (buf[1] & 0x07));
    }
    auto h = parse_ddp_header(buf);
    if (h.ok()) {
      EXPECT_LE(h->header_len(), buf.size());
    }
    (void)parse_terminate(buf);
    (void)parse_read_request(buf);
    return h.ok();
  });
  EXPECT_GT(ok, 0);
}
