#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <vector>

#include "tests/wire/hex.h"
#include "tests/wire/random_buffers.h"
#include "wire/mpa.h"

using namespace softrdma::wire;

namespace {
std::vector<std::uint8_t> unhex(const char* s) {
  return from_hex(s);
}
}  // namespace

TEST(Mpa, CapturedRequestParses) {
  const auto req = unhex("4d50412049442052657120467261 6d65 40 01 0000");
  auto f = parse_mpa(req);
  ASSERT_TRUE(f.ok()) << to_string(f.error());
  EXPECT_EQ(f->kind, MpaKind::kRequest);
  EXPECT_TRUE(f->crc);
  EXPECT_FALSE(f->markers);
  EXPECT_FALSE(f->reject);
  EXPECT_FALSE(f->enhanced);
  EXPECT_EQ(f->revision, 1);
  EXPECT_EQ(f->pd_length, 0);
  EXPECT_EQ(f->total_len(), 20u);
  EXPECT_TRUE(f->private_data.empty());
}

TEST(Mpa, CapturedReplyBuildsIdentically) {
  const auto rep = unhex("4d50412049442052657020467261 6d65 40 02 0000");
  MpaFrame f;
  f.kind = MpaKind::kReply;
  f.crc = true;
  f.revision = 2;
  std::array<std::uint8_t, 20> out{};
  auto n = build_mpa(out, f);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 20u);
  EXPECT_TRUE(std::equal(out.begin(), out.end(), rep.begin(), rep.end()));
  auto p = parse_mpa(rep);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->kind, MpaKind::kReply);
  EXPECT_EQ(p->revision, 2);
}

TEST(Mpa, RoundTripWithPrivateDataAllFlags) {
  const std::uint8_t pd[] = {1, 2, 3, 4, 5, 6, 7};
  for (int bits = 0; bits < 8; ++bits) {
    MpaFrame f;
    f.kind = bits & 1 ? MpaKind::kReply : MpaKind::kRequest;
    f.markers = bits & 2;
    f.crc = bits & 4;
    f.reject = f.kind == MpaKind::kReply;
    f.revision = 1;
    f.private_data = pd;
    std::array<std::uint8_t, 64> out{};
    auto n = build_mpa(out, f);
    ASSERT_TRUE(n.ok());
    ASSERT_EQ(*n, 27u);
    auto p = parse_mpa(Bytes(out.data(), *n));
    ASSERT_TRUE(p.ok());
    EXPECT_EQ(p->kind, f.kind);
    EXPECT_EQ(p->markers, f.markers);
    EXPECT_EQ(p->crc, f.crc);
    EXPECT_EQ(p->reject, f.reject);
    EXPECT_EQ(p->pd_length, 7);
    ASSERT_EQ(p->private_data.size(), 7u);
    EXPECT_EQ(std::memcmp(p->private_data.data(), pd, 7), 0);
    EXPECT_EQ(p->private_data.data(), out.data() + 20);  // a view, not a copy
  }
}

TEST(Mpa, EnhancedIrdOrdRoundTrip) {
  const std::uint8_t pd[] = {0xaa, 0xbb};
  MpaFrame f;
  f.kind = MpaKind::kRequest;
  f.enhanced = true;
  f.revision = 2;
  f.ird_ord = {true, false, 0x1234, false, true, 0x0007};
  f.private_data = pd;
  std::array<std::uint8_t, 64> out{};
  auto n = build_mpa(out, f);
  ASSERT_TRUE(n.ok());
  ASSERT_EQ(*n, 26u);
  EXPECT_EQ(load16(&out[18]), 6);
  EXPECT_EQ(out[16], kMpaFlagEnhanced);
  EXPECT_EQ(load16(&out[20]), 0x8000 | 0x1234);
  EXPECT_EQ(load16(&out[22]), 0x4000 | 0x0007);
  auto p = parse_mpa(Bytes(out.data(), *n));
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->ird_ord.peer_to_peer);
  EXPECT_FALSE(p->ird_ord.zero_send_rtr);
  EXPECT_EQ(p->ird_ord.ird, 0x1234);
  EXPECT_FALSE(p->ird_ord.zero_write_rtr);
  EXPECT_TRUE(p->ird_ord.zero_read_rtr);
  EXPECT_EQ(p->ird_ord.ord, 7);
  ASSERT_EQ(p->private_data.size(), 2u);
  EXPECT_EQ(p->private_data[0], 0xaa);
}

TEST(Mpa, Errors) {
  auto base = unhex("4d50412049442052657120467261 6d65 40 01 0000");
  auto with = [&](std::size_t i, std::uint8_t v) {
    auto b = base;
    b[i] = v;
    return parse_mpa(b).error();
  };
  EXPECT_EQ(with(3, 'x'), Error::kBadKey);
  EXPECT_EQ(with(9, 'x'), Error::kBadKey);  // neither "Req" nor "Rep"
  // Reserved flag bits are returned, not judged (RFC 5044: ignored on receive).
  auto res = base;
  res[16] = 0x48;
  auto rp = parse_mpa(res);
  ASSERT_TRUE(rp.ok());
  EXPECT_EQ(rp->reserved, 0x08);
  EXPECT_TRUE(rp->crc);
  EXPECT_EQ(with(17, 0), Error::kBadVersion);
  EXPECT_EQ(with(17, 3), Error::kBadVersion);
  EXPECT_EQ(with(16, 0x50), Error::kBadVersion);  // enhanced with revision 1
  // PD_Length 513 is too long even with the bytes present.
  auto big = base;
  big[18] = 0x02;
  big[19] = 0x01;
  big.resize(20 + 513);
  EXPECT_EQ(parse_mpa(big).error(), Error::kBadLength);
  big[19] = 0x00;  // 512 is fine
  EXPECT_TRUE(parse_mpa(big).ok());
  // Enhanced rev 2 with PD_Length < 4.
  auto enh = base;
  enh[16] = 0x10;
  enh[17] = 2;
  enh[19] = 3;
  enh.resize(23);
  EXPECT_EQ(parse_mpa(enh).error(), Error::kBadLength);
  // Builder refusals.
  std::array<std::uint8_t, 19> small{};
  MpaFrame f;
  EXPECT_EQ(build_mpa(small, f).error(), Error::kNoRoom);
  f.enhanced = true;
  std::array<std::uint8_t, 64> out{};
  EXPECT_EQ(build_mpa(out, f).error(), Error::kBadVersion);
  f.revision = 2;
  f.ird_ord.ird = 0x4000;
  EXPECT_EQ(build_mpa(out, f).error(), Error::kBadValue);
  std::vector<std::uint8_t> pd(509);
  f.ird_ord.ird = 1;
  f.private_data = pd;
  EXPECT_EQ(build_mpa(out, f).error(), Error::kBadLength);
}

TEST(Mpa, EveryTruncationFails) {
  std::vector<std::uint8_t> pd(9, 0x5a);
  MpaFrame f;
  f.kind = MpaKind::kReply;
  f.revision = 2;
  f.enhanced = true;
  f.private_data = pd;
  std::array<std::uint8_t, 64> out{};
  auto n = build_mpa(out, f);
  ASSERT_TRUE(n.ok());
  for (std::size_t len = 0; len < *n; ++len) {
    // A heap copy of exactly `len` bytes so ASan catches any over-read.
    std::vector<std::uint8_t> cut(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(len));
    EXPECT_EQ(parse_mpa(cut).error(), Error::kTruncated) << len;
  }
  std::vector<std::uint8_t> whole(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(*n));
  EXPECT_TRUE(parse_mpa(whole).ok());
}

TEST(Mpa, RandomBytesNeverCrash) {
  const int ok = parsed_random_buffers(7, 20000, 80, [](int i, auto& buf, auto& rng) {
    if (i % 2 && buf.size() >= 20) {  // a plausible header, so some parse
      std::memcpy(buf.data(), kMpaRequestKey, 16);
      buf[16] &= 0xe0;
      buf[17] = 1;
      store16(&buf[18], static_cast<std::uint16_t>(rng() % (buf.size() - 19) + (i % 4 == 1)));
    }
    auto p = parse_mpa(buf);
    if (p.ok()) {
      EXPECT_LE(p->total_len(), buf.size());
    }
    return p.ok();
  });
  EXPECT_GT(ok, 0);
}
