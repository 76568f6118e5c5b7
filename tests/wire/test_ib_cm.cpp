// CM MAD codecs: fields land at the byte and bit positions of IBTA vol. 1 ch. 12's
// tables (checked on raw bytes), every message round-trips, and parsers refuse short or
// foreign MADs.
#include <gtest/gtest.h>

#include <array>
#include <random>

#include "wire/ib_cm.h"

using namespace softrdma::wire;

namespace {

using Mad = std::array<std::uint8_t, kMadSize>;
constexpr std::size_t H = kMadHeaderSize;  // message offsets count from here

CmReq sample_req() {
  CmReq m;
  m.local_comm_id = 0x11223344;
  m.service_id = ip_cm_service_id(0x0106, 7174);
  m.local_ca_guid = 0x0102030405060708ull;
  m.local_qkey = 0x0A0B0C0D;
  m.local_qpn = 0xABCDEF;
  m.responder_resources = 4;
  m.initiator_depth = 5;
  m.remote_cm_response_timeout = 20;
  m.transport_service_type = 1;
  m.end_to_end_flow_control = true;
  m.starting_psn = 0x123456;
  m.local_cm_response_timeout = 18;
  m.retry_count = 6;
  m.pkey = 0xFFFF;
  m.path_mtu = 3;
  m.rnr_retry_count = 7;
  m.max_cm_retries = 15;
  m.srq = true;
  m.primary.local_gid[15] = 1;
  m.primary.remote_gid[15] = 2;
  m.primary.flow_label = 0xABCDE;
  m.primary.packet_rate = 0x2A;
  m.primary.traffic_class = 0x60;
  m.primary.hop_limit = 64;
  m.primary.sl = 5;
  m.primary.subnet_local = true;
  m.primary.local_ack_timeout = 14;
  for (std::size_t i = 0; i < m.private_data.size(); ++i)
    m.private_data[i] = static_cast<std::uint8_t>(i);
  return m;
}

}  // namespace

TEST(IbCm, ReqFieldsSitWhereTable106PutsThem) {
  Mad mad{};
  ASSERT_TRUE(build_cm(mad, 0x1122334455667788ull, sample_req()));
  EXPECT_EQ(mad[0], 1);     // base version
  EXPECT_EQ(mad[1], 0x07);  // CM class
  EXPECT_EQ(mad[2], 2);     // class version
  EXPECT_EQ(mad[3], 0x03);  // Send
  EXPECT_EQ(load64(&mad[8]), 0x1122334455667788ull);
  EXPECT_EQ(load16(&mad[16]), 0x0010);
  EXPECT_EQ(load32(&mad[H + 0]), 0x11223344u);
  EXPECT_EQ(load64(&mad[H + 8]), 0x0000000001061C06ull);  // TCP port space, port 7174
  EXPECT_EQ(load32(&mad[H + 32]), 0xABCDEF04u);           // QPN | responder resources
  EXPECT_EQ(mad[H + 39], 5);                              // initiator depth
  EXPECT_EQ(mad[H + 43], (20u << 3) | (1u << 1) | 1u);    // timeout | type | e2e
  EXPECT_EQ(load32(&mad[H + 44]), (0x123456u << 8) | (18u << 3) | 6u);
  EXPECT_EQ(mad[H + 50], (3u << 4) | 7u);      // MTU | RNR retry
  EXPECT_EQ(mad[H + 51], (15u << 4) | 0x08u);  // CM retries | SRQ
  EXPECT_EQ(load16(&mad[H + 52]), 0xFFFF);     // permissive LIDs
  EXPECT_EQ(mad[H + 56 + 15], 1);              // local GID
  EXPECT_EQ(mad[H + 72 + 15], 2);              // remote GID
  EXPECT_EQ(load32(&mad[H + 88]), (0xABCDEu << 12) | 0x2Au);
  EXPECT_EQ(mad[H + 92], 0x60);
  EXPECT_EQ(mad[H + 93], 64);
  EXPECT_EQ(mad[H + 94], (5u << 4) | 0x08u);
  EXPECT_EQ(mad[H + 95], 14u << 3);
  EXPECT_EQ(mad[H + 140], 0);  // private data starts at 140
  EXPECT_EQ(mad[H + 141], 1);
  EXPECT_EQ(mad[H + 231], 91);
}

TEST(IbCm, EveryMessageRoundTrips) {
  Mad mad{};
  const CmReq req = sample_req();
  ASSERT_TRUE(build_cm(mad, 1, req));
  auto r = parse_cm<CmReq>(mad);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->local_qpn, req.local_qpn);
  EXPECT_EQ(r->starting_psn, req.starting_psn);
  EXPECT_EQ(r->primary.flow_label, req.primary.flow_label);
  EXPECT_EQ(r->primary.local_ack_timeout, req.primary.local_ack_timeout);
  EXPECT_EQ(r->transport_service_type, 1);
  EXPECT_TRUE(r->srq);
  EXPECT_EQ(r->private_data, req.private_data);

  CmRep rep;
  rep.local_comm_id = 1;
  rep.remote_comm_id = 2;
  rep.local_qpn = 0x123456;
  rep.starting_psn = 0xFEDCBA;
  rep.responder_resources = 16;
  rep.initiator_depth = 8;
  rep.target_ack_delay = 9;
  rep.rnr_retry_count = 5;
  rep.srq = true;
  rep.local_ca_guid = 77;
  rep.private_data[195] = 0xEE;
  ASSERT_TRUE(build_cm(mad, 2, rep));
  EXPECT_EQ(mad[H + 27], (5u << 5) | 0x10u);
  auto p = parse_cm<CmRep>(mad);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->local_qpn, 0x123456u);
  EXPECT_EQ(p->starting_psn, 0xFEDCBAu);
  EXPECT_EQ(p->rnr_retry_count, 5);
  EXPECT_TRUE(p->srq);
  EXPECT_EQ(p->target_ack_delay, 9);
  EXPECT_EQ(p->private_data[195], 0xEE);

  CmRej rej;
  rej.local_comm_id = 3;
  rej.remote_comm_id = 4;
  rej.message_rejected = 1;
  rej.reason = rej_reason::kConsumerDefined;
  rej.private_data[0] = 0x42;
  ASSERT_TRUE(build_cm(mad, 3, rej));
  EXPECT_EQ(load16(&mad[H + 10]), 28);
  EXPECT_EQ(mad[H + 84], 0x42);  // private data at 84
  auto j = parse_cm<CmRej>(mad);
  ASSERT_TRUE(j);
  EXPECT_EQ(j->message_rejected, 1);
  EXPECT_EQ(j->reason, 28);

  CmDreq dreq;
  dreq.local_comm_id = 5;
  dreq.remote_comm_id = 6;
  dreq.remote_qpn = 0xABCDEF;
  ASSERT_TRUE(build_cm(mad, 4, dreq));
  auto d = parse_cm<CmDreq>(mad);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->remote_qpn, 0xABCDEFu);
  EXPECT_FALSE(parse_cm<CmRep>(mad));  // the attribute is checked

  CmMra mra;
  mra.message_mraed = 1;
  mra.service_timeout = 17;
  ASSERT_TRUE(build_cm(mad, 5, mra));
  auto a = parse_cm<CmMra>(mad);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->message_mraed, 1);
  EXPECT_EQ(a->service_timeout, 17);

  CmSidrReq sreq;
  sreq.request_id = 9;
  sreq.service_id = ip_cm_service_id(0x0111, 7471);
  ASSERT_TRUE(build_cm(mad, 6, sreq));
  auto sq = parse_cm<CmSidrReq>(mad);
  ASSERT_TRUE(sq);
  EXPECT_EQ(sq->service_id, 0x0000000001111D2Full);

  CmSidrRep srep;
  srep.request_id = 9;
  srep.status = sidr_status::kSuccess;
  srep.qpn = 0x42;
  srep.qkey = 0x01234567;
  srep.service_id = sreq.service_id;
  ASSERT_TRUE(build_cm(mad, 7, srep));
  EXPECT_EQ(load32(&mad[H + 8]) >> 8, 0x42u);
  EXPECT_EQ(load32(&mad[H + 20]), 0x01234567u);
  auto sp = parse_cm<CmSidrRep>(mad);
  ASSERT_TRUE(sp);
  EXPECT_EQ(sp->qpn, 0x42u);
  EXPECT_EQ(sp->qkey, 0x01234567u);

  CmRtu rtu;
  rtu.local_comm_id = 10;
  rtu.remote_comm_id = 11;
  ASSERT_TRUE(build_cm(mad, 8, rtu));
  EXPECT_EQ(parse_cm<CmRtu>(mad)->remote_comm_id, 11u);
  CmDrep drep;
  drep.local_comm_id = 12;
  ASSERT_TRUE(build_cm(mad, 9, drep));
  EXPECT_EQ(parse_cm<CmDrep>(mad)->local_comm_id, 12u);
}

TEST(IbCm, ParsersRefuseShortAndForeignMads) {
  Mad mad{};
  ASSERT_TRUE(build_cm(mad, 1, sample_req()));
  for (std::size_t n = 0; n < kMadSize; n += 7) {
    EXPECT_FALSE(parse_cm<CmReq>(Bytes(mad.data(), n))) << n;
  }
  Mad other = mad;
  other[1] = 0x01;  // subnet management class
  EXPECT_EQ(parse_cm<CmReq>(other).error(), Error::kBadVersion);
  other = mad;
  other[0] = 2;
  EXPECT_FALSE(parse_cm<CmReq>(other));
  std::array<std::uint8_t, 100> small{};
  EXPECT_EQ(build_cm(small, 1, sample_req()).error(), Error::kNoRoom);
  // Random bytes never crash a parser.
  std::mt19937 rng(7);
  for (int i = 0; i < 2000; ++i) {
    for (auto& b : mad) b = static_cast<std::uint8_t>(rng());
    mad[0] = 1;
    mad[1] = 0x07;
    mad[2] = 2;
    store16(&mad[16], static_cast<std::uint16_t>(0x10 + i % 9));
    (void)parse_cm<CmReq>(mad);
    (void)parse_cm<CmRep>(mad);
    (void)parse_cm<CmRej>(mad);
    (void)parse_cm<CmSidrReq>(mad);
    (void)parse_ip_cm_header(Bytes(mad.data() + 24 + 140, 92));
  }
}

TEST(IbCm, IpCmHeader) {
  IpCmHeader h;
  h.ip_version = 4;
  h.src_port = 40000;
  h.src_addr[12] = 127;
  h.src_addr[15] = 1;
  h.dst_addr[12] = 10;
  std::array<std::uint8_t, 36> out{};
  ASSERT_TRUE(build_ip_cm_header(out, h));
  EXPECT_EQ(out[0], 0);
  EXPECT_EQ(out[1], 0x40);
  EXPECT_EQ(load16(&out[2]), 40000);
  EXPECT_EQ(out[4 + 12], 127);
  EXPECT_EQ(out[20 + 12], 10);
  auto p = parse_ip_cm_header(out);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->src_port, 40000);
  out[1] = 0x50;
  EXPECT_EQ(parse_ip_cm_header(out).error(), Error::kBadVersion);
  EXPECT_EQ(parse_ip_cm_header(Bytes(out.data(), 35)).error(), Error::kTruncated);
  EXPECT_TRUE(is_ip_cm_service(0x0000000001060000ull | 80));
  EXPECT_FALSE(is_ip_cm_service(0x1000000001060000ull));
}
