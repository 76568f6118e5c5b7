// The receive path against a hand-made peer: the test speaks MPA and writes FPDUs built with
// wire/ to a QP, and reads back what the QP answers. Covers TERMINATE contents (layer, type,
// code, the copied DDP and Read Request headers), IRD enforcement, MSN and opcode checks, and
// a fuzz of mutated and random streams: no crash, no write outside the registered region.
#include <poll.h>

#include <random>

#include "tests/iwarp/harness.h"
#include "wire/ddp_rdmap.h"
#include "wire/ddp_segment.h"
#include "wire/fpdu.h"
#include "wire/mpa.h"

namespace softrdma::iwarp::test {
namespace {

using namespace wire;

// The initiator side of a connection, by hand: revision 1 or 2, CRC as asked, no markers.
class RawPeer {
 public:
  RawPeer(Side& b, bool crc, std::uint16_t ird = 8, std::uint16_t ord = 8, MpaParams pb = {})
      : crc_(crc) {
    fd_ = tcp_.client;
    MpaFrame f;
    f.kind = MpaKind::kRequest;
    f.crc = crc;
    f.revision = 2;
    f.enhanced = true;
    f.ird_ord.ird = ird;
    f.ird_ord.ord = ord;
    std::uint8_t buf[64];
    const auto n = build_mpa(buf, f);
    ok_ = ::send(fd_, buf, *n, 0) == static_cast<ssize_t>(*n);
    ok_ = ok_ && b.dev->read_request(tcp_.server, 5s, b.inbox.on_request()) == 0;
    ok_ = ok_ && b.inbox.wait([&] { return b.inbox.request.has_value(); });
    pb.rtr = RtrType::kNone;
    ok_ = ok_ && b.dev->accept(b.qp, tcp_.server, pb, [](int) {}) == 0;
    // The reply: 20 bytes + 4 IRD/ORD bytes.
    std::uint8_t rep[24];
    ok_ = ok_ && read_exact(rep, sizeof rep);
    auto r = parse_mpa(Bytes(rep, sizeof rep));
    ok_ = ok_ && r && r->kind == MpaKind::kReply && !r->reject;
    ok_ = ok_ && b.inbox.wait_event(QpEvent::Kind::kEstablished);
  }
  ~RawPeer() { ::close(fd_); }
  bool ok() const { return ok_; }
  int fd() const { return fd_; }

  std::vector<std::uint8_t> fpdu(const DdpHeader& h, Bytes body) const {
    return ddp_segment_fpdu(h, body, crc_);
  }
  bool send(const std::vector<std::uint8_t>& bytes) {
    return ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) ==
           static_cast<ssize_t>(bytes.size());
  }
  bool read_exact(std::uint8_t* p, std::size_t n, int timeout_ms = 5000) {
    std::size_t got = 0;
    while (got < n) {
      pollfd pfd{fd_, POLLIN, 0};
      if (::poll(&pfd, 1, timeout_ms) != 1) return false;
      const ssize_t r = ::recv(fd_, p + got, n - got, 0);
      if (r <= 0) return false;
      got += static_cast<std::size_t>(r);
    }
    return true;
  }
  // Reads one FPDU (no markers); returns its ULPDU.
  std::optional<std::vector<std::uint8_t>> read_fpdu() {
    std::uint8_t len[2];
    if (!read_exact(len, 2)) return std::nullopt;
    const std::size_t ulen = load16(len);
    std::vector<std::uint8_t> rest(fpdu_total_len(ulen) - 2);
    if (!read_exact(rest.data(), rest.size())) return std::nullopt;
    rest.resize(ulen);
    return rest;
  }
  // Reads FPDUs until a TERMINATE (queue 2) arrives; returns its body.
  std::optional<std::vector<std::uint8_t>> read_terminate() {
    for (int i = 0; i < 1000; ++i) {
      std::uint8_t len[2];
      if (!read_exact(len, 2)) return std::nullopt;
      const std::size_t ulen = load16(len);
      std::vector<std::uint8_t> rest(fpdu_total_len(ulen) - 2);
      if (!read_exact(rest.data(), rest.size())) return std::nullopt;
      auto h = decode_ddp_header(Bytes(rest.data(), ulen));
      if (h && !h->tagged && h->qn == kQnTerminate) {
        return std::vector<std::uint8_t>(
            rest.begin() + static_cast<std::ptrdiff_t>(h->header_len()),
            rest.begin() + static_cast<std::ptrdiff_t>(ulen));
      }
    }
    return std::nullopt;
  }

 private:
  TcpPair tcp_;
  int fd_ = -1;
  bool crc_;
  bool ok_ = false;
};

DdpHeader send_hdr(std::uint32_t msn, std::uint8_t opcode = 3) {
  DdpHeader h;
  h.opcode = opcode;
  h.qn = kQnSend;
  h.msn = msn;
  return h;
}

// A tagged DDP header of `op` that lands in `s`'s region at `offset`.
DdpHeader tagged(const Side& s, RdmapOpcode op, std::size_t offset = 0) {
  DdpHeader h;
  h.tagged = true;
  h.opcode = static_cast<std::uint8_t>(op);
  h.stag = s.mr->rkey;
  h.to = s.addr(offset);
  return h;
}

class IwarpProtocol : public testing::Test {
 protected:
  void SetUp() override { b.init({}); }
  // After a 64-byte WRITE of `fill` at 100 and a 3-byte SEND starting with `first` into the
  // receive at 4096: the receive completed, both landed, the QP is still in RTS.
  void expect_write_and_send_placed(std::uint8_t fill, std::uint8_t first) {
    auto r = b.wait_wc(b.rcq);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, core::WcStatus::kSuccess);
    EXPECT_EQ(r->byte_len, 3u);
    EXPECT_EQ(b.buf[100], fill);
    EXPECT_EQ(b.buf[163], fill);
    EXPECT_EQ(b.buf[4096], first);
    EXPECT_EQ(b.qp->state(), core::QpState::kRts);
  }
  void expect_term(RawPeer& peer, std::uint8_t layer, std::uint8_t etype, std::uint8_t code,
                   const std::vector<std::uint8_t>* sent_fpdu = nullptr, bool r = false) {
    auto body = peer.read_terminate();
    ASSERT_TRUE(body) << "no TERMINATE";
    auto t = parse_terminate(*body);
    ASSERT_TRUE(t);
    EXPECT_EQ(t->layer, layer);
    EXPECT_EQ(t->etype, etype);
    EXPECT_EQ(t->code, code);
    if (sent_fpdu) {
      ASSERT_TRUE(t->d);
      // The copied DDP header is the one of the offending segment.
      EXPECT_TRUE(std::equal(t->ddp_header.begin(), t->ddp_header.end(), sent_fpdu->begin() + 2));
    }
    EXPECT_EQ(t->r, r);
    ASSERT_TRUE(b.inbox.wait_event(QpEvent::Kind::kTermSent));
    EXPECT_EQ(b.qp->state(), core::QpState::kErr);
  }
  Side b;
};

TEST_F(IwarpProtocol, UnknownOpcodeIsAnRdmapUnexpectedOpcode) {
  RawPeer peer(b, true);
  ASSERT_TRUE(peer.ok());
  DdpHeader h = send_hdr(1);
  auto f = peer.fpdu(h, {});
  f[3] = static_cast<std::uint8_t>((f[3] & 0xF0) | 0x0C);  // opcode 12
  // Recompute the CRC over the changed header.
  store32le(&f[f.size() - 4], fpdu_crc(Bytes(f.data(), f.size() - 4)));
  ASSERT_TRUE(peer.send(f));
  expect_term(peer, 0, 2, 0x06, &f);
}

TEST_F(IwarpProtocol, MsnOutOfRangeIsADdpUntaggedError) {
  RawPeer peer(b, false);
  ASSERT_TRUE(peer.ok());
  ASSERT_EQ(b.post_recv(1, 0, 64), 0);
  const std::uint8_t payload[4] = {1, 2, 3, 4};
  auto f = peer.fpdu(send_hdr(7), payload);
  ASSERT_TRUE(peer.send(f));
  expect_term(peer, 1, 2, 0x03, &f);
}

TEST_F(IwarpProtocol, ReadRequestsBeyondIrdAreADdpNoBufferWithTheRequestCopied) {
  MpaParams pb;
  pb.ird = 1;
  RawPeer peer(b, true, 8, 8, pb);
  ASSERT_TRUE(peer.ok());
  ReadRequest rr;
  rr.sink_stag = 0x100;
  rr.size = 4096;
  rr.src_stag = b.mr->rkey;
  rr.src_to = b.addr();
  std::uint8_t body[kReadRequestLen];
  (void)build_read_request(body, rr);
  DdpHeader h;
  h.opcode = static_cast<std::uint8_t>(RdmapOpcode::kReadRequest);
  h.qn = kQnReadRequest;
  h.msn = 1;
  auto f1 = peer.fpdu(h, body);
  h.msn = 2;
  auto f2 = peer.fpdu(h, body);
  std::vector<std::uint8_t> both(f1);
  both.insert(both.end(), f2.begin(), f2.end());
  ASSERT_TRUE(peer.send(both));  // one write: both arrive before the first is answered
  expect_term(peer, 1, 2, 0x02, &f2, true);
}

TEST_F(IwarpProtocol, ReadResponseWithNoReadOutstandingIsUnexpected) {
  RawPeer peer(b, false);
  ASSERT_TRUE(peer.ok());
  DdpHeader h = tagged(b, RdmapOpcode::kReadResponse);
  const std::uint8_t payload[8] = {};
  auto f = peer.fpdu(h, payload);
  ASSERT_TRUE(peer.send(f));
  expect_term(peer, 0, 2, 0x06, &f);
}

TEST_F(IwarpProtocol, BadCrcIsAnMpaCrcErrorAndNothingIsPlaced) {
  RawPeer peer(b, true);
  ASSERT_TRUE(peer.ok());
  DdpHeader h = tagged(b, RdmapOpcode::kWrite);
  const std::vector<std::uint8_t> payload(64, 0x77);
  auto f = peer.fpdu(h, payload);
  f[f.size() - 1] ^= 1;
  ASSERT_TRUE(peer.send(f));
  expect_term(peer, 2, 0, 0x02);
  EXPECT_EQ(b.buf[0], 0);
}

TEST_F(IwarpProtocol, ValidSegmentsFromTheRawPeerArePlaced) {
  // The other tests' counterpart: the same peer, correct FPDUs, data lands.
  RawPeer peer(b, true);
  ASSERT_TRUE(peer.ok());
  ASSERT_EQ(b.post_recv(5, 4096, 64), 0);
  DdpHeader h = tagged(b, RdmapOpcode::kWrite, 100);
  const std::vector<std::uint8_t> payload(64, 0x77);
  ASSERT_TRUE(peer.send(peer.fpdu(h, payload)));
  const std::uint8_t msg[3] = {9, 8, 7};
  ASSERT_TRUE(peer.send(peer.fpdu(send_hdr(1), msg)));
  ASSERT_NO_FATAL_FAILURE(expect_write_and_send_placed(0x77, 9));
  EXPECT_EQ(b.buf[164], 0);
}

// RFC 5040/5041: reserved fields are sent as zero and not checked on receive. A WRITE and a
// SEND with every reserved bit of the DDP and RDMAP control set, and an Inv STag where the SEND
// has none, are placed as if they were clean.
TEST_F(IwarpProtocol, ReservedBitsAreIgnored) {
  RawPeer peer(b, true);
  ASSERT_TRUE(peer.ok());
  ASSERT_EQ(b.post_recv(5, 4096, 64), 0);
  DdpHeader w = tagged(b, RdmapOpcode::kWrite, 100);
  w.ddp_reserved = 0x0F;
  w.rdmap_reserved = 0x03;
  const std::vector<std::uint8_t> payload(64, 0x5A);
  ASSERT_TRUE(peer.send(peer.fpdu(w, payload)));
  DdpHeader h = send_hdr(1);
  h.ddp_reserved = 0x0F;
  h.rdmap_reserved = 0x03;
  h.inv_stag = 0xDEADBEEF;  // reserved in a plain SEND
  const std::uint8_t msg[3] = {4, 5, 6};
  ASSERT_TRUE(peer.send(peer.fpdu(h, msg)));
  ASSERT_NO_FATAL_FAILURE(expect_write_and_send_placed(0x5A, 4));
}

// A large WRITE segment whose header arrives before its payload is placed straight from the
// socket into the region; its CRC is still checked (over what was placed).
class IwarpDirect : public IwarpProtocol, public testing::WithParamInterface<bool> {};

TEST_P(IwarpDirect, SplitSegmentIsPlacedStraightFromTheSocket) {
  const bool corrupt = GetParam();
  RawPeer peer(b, true);
  ASSERT_TRUE(peer.ok());
  DdpHeader h = tagged(b, RdmapOpcode::kWrite, 1000);
  std::vector<std::uint8_t> payload(60000);
  for (std::size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<std::uint8_t>(i * 7);
  auto f = peer.fpdu(h, payload);
  if (corrupt) f[f.size() - 2] ^= 0x10;  // the CRC
  const std::vector<std::uint8_t> first(f.begin(), f.begin() + 5000);
  const std::vector<std::uint8_t> rest(f.begin() + 5000, f.end());
  ASSERT_TRUE(peer.send(first));
  // The rest follows once the first part was placed, so the segment arrives split.
  wait_until([&] { return b.qp->counters().rx_direct_bytes > 0; }, 2s);
  ASSERT_TRUE(peer.send(rest));
  if (corrupt) {
    expect_term(peer, 2, 0, 0x02);
  } else {
    ASSERT_EQ(b.post_recv(1, 0, 16), 0);
    const std::uint8_t msg[1] = {5};
    ASSERT_TRUE(peer.send(peer.fpdu(send_hdr(1), msg)));
    auto r = b.wait_wc(b.rcq);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, core::WcStatus::kSuccess);
    EXPECT_TRUE(std::equal(payload.begin(), payload.end(), b.buf.begin() + 1000));
    EXPECT_EQ(b.buf[999], 0);
    EXPECT_EQ(b.buf[61000], 0);
  }
  EXPECT_GT(b.qp->counters().rx_direct_bytes, 50000u);
}

TEST_P(IwarpDirect, SplitReadResponseIsPlacedStraightIntoTheSink) {
  const bool corrupt = GetParam();
  RawPeer peer(b, true);
  ASSERT_TRUE(peer.ok());
  ASSERT_EQ(b.post(core::WrOpcode::kRdmaRead, 5, 2000, 40000, 0x5000, 0x77), 0);
  auto req = peer.read_fpdu();
  ASSERT_TRUE(req);
  auto h = parse_ddp_header(*req);
  ASSERT_TRUE(h);
  ASSERT_EQ(h->opcode, static_cast<std::uint8_t>(RdmapOpcode::kReadRequest));
  auto rr = parse_read_request(Bytes(*req).subspan(kDdpUntaggedLen));
  ASSERT_TRUE(rr);
  EXPECT_EQ(rr->size, 40000u);
  EXPECT_EQ(rr->src_stag, 0x77u);
  EXPECT_EQ(rr->src_to, 0x5000u);
  EXPECT_EQ(rr->sink_stag, b.mr->lkey);
  EXPECT_EQ(rr->sink_to, b.addr(2000));
  DdpHeader resp;
  resp.tagged = true;
  resp.opcode = static_cast<std::uint8_t>(RdmapOpcode::kReadResponse);
  resp.stag = rr->sink_stag;
  resp.to = rr->sink_to;
  std::vector<std::uint8_t> payload(40000);
  for (std::size_t i = 0; i < payload.size(); ++i)
    payload[i] = static_cast<std::uint8_t>(i * 5 + 1);
  auto f = peer.fpdu(resp, payload);
  if (corrupt) f[f.size() - 3] ^= 0x01;
  ASSERT_TRUE(peer.send(std::vector<std::uint8_t>(f.begin(), f.begin() + 3000)));
  wait_until([&] { return b.qp->counters().rx_direct_bytes > 0; }, 2s);  // split, as above
  ASSERT_TRUE(peer.send(std::vector<std::uint8_t>(f.begin() + 3000, f.end())));
  auto wc = b.wait_wc(b.scq);
  ASSERT_TRUE(wc);
  if (corrupt) {
    EXPECT_NE(wc->status, core::WcStatus::kSuccess);
    expect_term(peer, 2, 0, 0x02);
  } else {
    EXPECT_EQ(wc->status, core::WcStatus::kSuccess);
    EXPECT_EQ(wc->opcode, core::WcOpcode::kRdmaRead);
    EXPECT_EQ(wc->byte_len, 40000u);
    EXPECT_TRUE(std::equal(payload.begin(), payload.end(), b.buf.begin() + 2000));
  }
  EXPECT_GT(b.qp->counters().rx_direct_bytes, 30000u);
}

INSTANTIATE_TEST_SUITE_P(Crc, IwarpDirect, testing::Values(false, true),
                         [](const auto& i) { return i.param ? "BadCrc" : "GoodCrc"; });

// Random and mutated streams into a QP whose region sits between guard bytes: whatever
// arrives, the process does not crash and nothing outside the region changes.
TEST_F(IwarpProtocol, FuzzedStreamsNeverWriteOutsideTheRegion) {
  std::mt19937 rng(12345);
  // The region: [64 KiB, 128 KiB) of b.buf; the rest stays 0xAB.
  std::fill(b.buf.begin(), b.buf.end(), 0xAB);
  int err = 0;
  auto region = b.dev->reg_mr(
      b.pd, b.buf.data() + 65536, 65536, b.addr(65536),
      core::kAccessLocalWrite | core::kAccessRemoteWrite | core::kAccessRemoteRead, &err);
  ASSERT_TRUE(region);
  b.dev->dereg_mr(b.mr->lkey);
  int terminated = 0;
  for (int iter = 0; iter < 60; ++iter) {
    int e = 0;
    core::QpCap cap{64, 64, 4, 4, 0};
    b.qp = b.dev->create_qp(b.pd, core::QpType::kRc, b.scq, b.rcq, nullptr, cap, false, &e);
    ASSERT_TRUE(b.qp);
    b.inbox.events.clear();
    b.inbox.request.reset();
    b.qp->set_event_handler([this](const QpEvent& ev) {
      std::lock_guard lock(b.inbox.mu);
      b.inbox.events.push_back(ev);
      b.inbox.cv.notify_all();
    });
    for (int i = 0; i < 4; ++i) {
      core::Sge s{region->iova + static_cast<std::uint64_t>(i) * 1024, 1024, region->lkey};
      core::RecvWr wr;
      wr.wr_id = static_cast<std::uint64_t>(i);
      wr.sg_list = std::span<const core::Sge>(&s, 1);
      b.qp->post_recv(std::span<const core::RecvWr>(&wr, 1));
    }
    const bool crc = iter % 2 == 0;
    {
      RawPeer peer(b, crc);
      ASSERT_TRUE(peer.ok());
      // A valid stream of writes, sends and reads near the region's edges, then mutated.
      std::vector<std::uint8_t> stream;
      for (int k = 0; k < 8; ++k) {
        DdpHeader h;
        std::vector<std::uint8_t> body(static_cast<std::size_t>(rng() % 300));
        switch (rng() % 3) {
          case 0:
            h.tagged = true;
            h.opcode = 0;
            h.stag = region->rkey;
            h.to = region->iova + 65536 - body.size() + (rng() % 3);  // at or past the end
            break;
          case 1:
            h = send_hdr(static_cast<std::uint32_t>(k + 1));
            break;
          default: {
            ReadRequest rr;
            rr.size = static_cast<std::uint32_t>(rng() % 5000);
            rr.src_stag = region->rkey;
            rr.src_to = region->iova + rng() % 70000;
            body.resize(kReadRequestLen);
            (void)build_read_request(body, rr);
            h.opcode = 1;
            h.qn = kQnReadRequest;
            h.msn = static_cast<std::uint32_t>(k + 1);
          }
        }
        auto f = peer.fpdu(h, body);
        stream.insert(stream.end(), f.begin(), f.end());
      }
      if (iter % 3 == 0) {
        for (auto& byte : stream) byte = static_cast<std::uint8_t>(rng());
      } else {
        for (int m = 0; m < 1 + iter % 5; ++m)
          stream[rng() % stream.size()] ^= static_cast<std::uint8_t>(1u << (rng() % 8));
      }
      (void)peer.send(stream);
      b.inbox.wait(
          [&] {
            return b.inbox.has(QpEvent::Kind::kTermSent) || b.inbox.has(QpEvent::Kind::kConnError);
          },
          100ms);
      if (b.inbox.find(QpEvent::Kind::kTermSent)) ++terminated;
    }
    // The peer's close reaches the QP as a disconnect (or a reset), whatever state it is in.
    EXPECT_TRUE(b.inbox.wait(
        [&] {
          return b.inbox.has(QpEvent::Kind::kDisconnected) ||
                 b.inbox.has(QpEvent::Kind::kConnError);
        },
        5s));
    EXPECT_EQ(b.qp->state(), core::QpState::kErr);
    core::Wc wc[16];
    while (b.rcq->poll(wc) > 0) {
    }
    while (b.scq->poll(wc) > 0) {
    }
    ASSERT_EQ(b.dev->destroy_qp(b.qp), 0);
    b.qp = nullptr;
  }
  EXPECT_GT(terminated, 30);
  EXPECT_TRUE(std::all_of(b.buf.begin(), b.buf.begin() + 65536, [](auto c) { return c == 0xAB; }));
  EXPECT_TRUE(std::all_of(b.buf.begin() + 131072, b.buf.end(), [](auto c) { return c == 0xAB; }));
}

}  // namespace
}  // namespace softrdma::iwarp::test
