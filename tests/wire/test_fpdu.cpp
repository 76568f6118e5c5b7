#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <random>
#include <vector>

#include "tests/wire/hex.h"
#include "tests/wire/random_buffers.h"
#include "wire/crc.h"
#include "wire/fpdu.h"

using namespace softrdma::wire;

namespace {
std::vector<std::uint8_t> unhex(const char* s) {
  return from_hex(s);
}

std::vector<std::uint8_t> send_fpdu() {
  return unhex("001e 41 43 00000000 00000000 00000001 00000000 68656c6c6f20697761727021 85c55345");
}
std::vector<std::uint8_t> write_fpdu() {
  auto v = unhex("002e c1 40 00001234 0000000000001000");
  v.insert(v.end(), 32, 0x02);
  const auto crc = unhex("d38ae24b");
  v.insert(v.end(), crc.begin(), crc.end());
  return v;
}
}  // namespace

TEST(Fpdu, Lengths) {
  EXPECT_EQ(fpdu_pad_len(30), 0u);
  EXPECT_EQ(fpdu_pad_len(31), 3u);
  EXPECT_EQ(fpdu_pad_len(32), 2u);
  EXPECT_EQ(fpdu_pad_len(33), 1u);
  EXPECT_EQ(fpdu_total_len(30), 36u);
  EXPECT_EQ(fpdu_total_len(46), 52u);
  EXPECT_EQ(fpdu_total_len(0), 8u);
}

TEST(Fpdu, CapturedSendHasGoodCrc) {
  const auto v = send_fpdu();
  ASSERT_EQ(v.size(), 36u);
  auto f = parse_fpdu(v, true);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->ulpdu_len, 30);
  EXPECT_EQ(f->total_len, 36u);
  EXPECT_EQ(f->ulpdu.data(), v.data() + 2);
  EXPECT_EQ(f->crc_found, 0x4553c585u);  // wire bytes 85 c5 53 45, LSB first
  EXPECT_EQ(f->crc_computed, 0x4553c585u);
  EXPECT_EQ(f->check(), Error::kNone);
  // Rebuilding from the ULPDU gives the captured bytes.
  std::array<std::uint8_t, 36> out{};
  ASSERT_EQ(*build_fpdu(out, f->ulpdu, true), 36u);
  EXPECT_TRUE(std::equal(out.begin(), out.end(), v.begin()));
}

TEST(Fpdu, CapturedWriteHasGoodCrc) {
  const auto v = write_fpdu();
  ASSERT_EQ(v.size(), 52u);
  auto f = parse_fpdu(v, true);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->ulpdu_len, 46);
  EXPECT_TRUE(f->crc_ok());
  EXPECT_EQ(f->check(), Error::kNone);
}

TEST(Fpdu, WrongByteOrderCrcIsBad) {
  auto v = send_fpdu();
  std::reverse(v.end() - 4, v.end());
  auto f = parse_fpdu(v, true);
  ASSERT_TRUE(f.ok());
  EXPECT_FALSE(f->crc_ok());
  EXPECT_EQ(f->check(), Error::kBadChecksum);
  EXPECT_EQ(f->crc_computed, 0x4553c585u);
  // Without CRC negotiated the field is not judged.
  EXPECT_EQ(parse_fpdu(v, false)->check(), Error::kNone);
}

TEST(Fpdu, PadAndCrcChecks) {
  const std::uint8_t ulpdu[] = {1, 2, 3, 4, 5};
  std::array<std::uint8_t, 16> out{};
  auto n = build_fpdu(out, ulpdu, true);
  ASSERT_EQ(*n, 12u);  // 2 + 5 + 1 pad + 4
  EXPECT_EQ(out[7], 0);
  EXPECT_EQ(parse_fpdu(Bytes(out.data(), 12), true)->check(), Error::kNone);
  out[7] = 0x80;  // nonzero pad; CRC recomputed so only the pad is wrong
  store32le(&out[8], crc32c(0, Bytes(out.data(), 8)));
  auto f = parse_fpdu(Bytes(out.data(), 12), true);
  EXPECT_FALSE(f->pad_zero());
  EXPECT_EQ(f->check(), Error::kBadPad);
  out[3] ^= 1;
  EXPECT_EQ(parse_fpdu(Bytes(out.data(), 12), true)->check(), Error::kBadChecksum);
  // No CRC: field zero.
  ASSERT_EQ(*build_fpdu(out, ulpdu, false), 12u);
  EXPECT_EQ(load32(&out[8]), 0u);
  std::array<std::uint8_t, 11> small{};
  EXPECT_EQ(build_fpdu(small, ulpdu, true).error(), Error::kNoRoom);
  std::vector<std::uint8_t> huge(70000);
  std::vector<std::uint8_t> hout(70010);
  EXPECT_EQ(build_fpdu(hout, huge, true).error(), Error::kBadLength);
}

TEST(Fpdu, EveryTruncationFails) {
  for (const auto& v : {send_fpdu(), write_fpdu()}) {
    for (std::size_t len = 0; len < v.size(); ++len) {
      std::vector<std::uint8_t> cut(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(len));
      EXPECT_EQ(parse_fpdu(cut, true).error(), Error::kTruncated) << len;
    }
  }
}

TEST(Fpdu, RandomBytesNeverCrash) {
  const int ok = parsed_random_buffers(3, 20000, 100, [](int i, auto& buf, auto& rng) {
    if (buf.size() >= 2 && i % 2) store16(buf.data(), static_cast<std::uint16_t>(rng() % 100));
    auto f = parse_fpdu(buf, i % 3 == 0);
    if (f.ok()) {
      EXPECT_LE(f->total_len, buf.size());
    }
    return f.ok();
  });
  EXPECT_GT(ok, 0);
}

TEST(Marker, WireLenAndPointers) {
  EXPECT_EQ(fpdu_wire_len(0, 36), 40u);    // leading marker
  EXPECT_EQ(fpdu_wire_len(4, 36), 36u);    // none
  EXPECT_EQ(fpdu_wire_len(500, 36), 40u);  // one inside
  EXPECT_EQ(fpdu_wire_len(476, 36), 36u);  // ends exactly at 512: next FPDU's marker
  EXPECT_EQ(fpdu_wire_len(480, 36), 40u);
  EXPECT_EQ(fpdu_wire_len(4, 1024), 1032u);  // markers at 512 and 1024
  EXPECT_EQ(expected_fpdu_ptr(512, 512), 0u);
  EXPECT_EQ(expected_fpdu_ptr(1024, 512), 508u);
  EXPECT_EQ(expected_fpdu_ptr(512, 500), 12u);
}

TEST(Marker, InserterPlacesMarkersAndCoversThemWithCrc) {
  std::vector<std::uint8_t> ulpdu(1100);
  for (std::size_t i = 0; i < ulpdu.size(); ++i) ulpdu[i] = static_cast<std::uint8_t>(i * 7);
  std::vector<std::uint8_t> fpdu(fpdu_total_len(ulpdu.size()));
  ASSERT_TRUE(build_fpdu(fpdu, ulpdu, true).ok());
  MarkerInserter ins(508);
  std::vector<std::uint8_t> wire(ins.wire_len(fpdu.size()));
  ASSERT_EQ(wire.size(), fpdu.size() + 12);  // markers at 512, 1024, 1536
  auto n = ins.put_fpdu(wire, fpdu, true);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, wire.size());
  EXPECT_EQ(ins.offset(), 508 + wire.size());
  // Marker at stream 512 is wire byte 4; the header is at 508.
  EXPECT_EQ(load16(&wire[4]), 0u);
  EXPECT_EQ(load16(&wire[6]), 4u);
  EXPECT_EQ(load16(&wire[4 + 512 + 2]), 516u);
  EXPECT_EQ(load32le(&wire[wire.size() - 4]), crc32c(0, Bytes(wire.data(), wire.size() - 4)));
  std::vector<std::uint8_t> small(wire.size() - 1);
  MarkerInserter ins2(508);
  EXPECT_EQ(ins2.put_fpdu(small, fpdu, true).error(), Error::kNoRoom);
  EXPECT_EQ(ins2.offset(), 508u);
  EXPECT_EQ(ins2.put_fpdu(wire, Bytes(fpdu.data(), fpdu.size() - 1), true).error(),
            Error::kBadLength);
}

// Insert then strip for many start offsets and FPDU sizes (some straddle
// several markers), feeding the stripper in odd-sized pieces.
TEST(Marker, InsertStripRoundTrip) {
  std::mt19937 rng(5);
  for (std::uint64_t origin : {0ull, 4ull, 256ull, 508ull, 1020ull, 4096ull + 12}) {
    for (std::size_t piece : {1u, 3u, 7u, 512u, 100000u}) {
      MarkerInserter ins(origin);
      std::vector<std::uint8_t> plain;
      std::vector<std::uint8_t> wire;
      std::vector<std::uint64_t> starts;
      for (std::size_t len : {0u, 1u, 30u, 46u, 509u, 510u, 1500u, 2049u, 3u, 700u}) {
        std::vector<std::uint8_t> ulpdu(len);
        for (auto& b : ulpdu) b = static_cast<std::uint8_t>(rng());
        std::vector<std::uint8_t> fpdu(fpdu_total_len(len));
        ASSERT_TRUE(build_fpdu(fpdu, ulpdu, false).ok());
        starts.push_back(ins.offset());
        std::vector<std::uint8_t> w(ins.wire_len(fpdu.size()));
        ASSERT_TRUE(ins.put_fpdu(w, fpdu, true).ok());
        // The CRC field differs (covers markers); compare everything else.
        std::copy(w.end() - 4, w.end(), fpdu.end() - 4);
        plain.insert(plain.end(), fpdu.begin(), fpdu.end());
        wire.insert(wire.end(), w.begin(), w.end());
      }
      MarkerStripper st(origin);
      std::vector<std::uint8_t> out(plain.size());
      std::vector<Marker> markers(wire.size() / 512 + 2);
      std::size_t consumed = 0, written = 0, nm = 0;
      while (consumed < wire.size()) {
        const std::size_t take = std::min(piece, wire.size() - consumed);
        auto r = st.strip(Bytes(wire.data() + consumed, take), MutBytes(out).subspan(written),
                          std::span<Marker>(markers).subspan(nm));
        ASSERT_EQ(r.consumed, take);
        consumed += r.consumed;
        written += r.written;
        nm += r.markers;
      }
      ASSERT_EQ(written, plain.size());
      EXPECT_EQ(out, plain);
      ASSERT_EQ(nm, (origin + wire.size() - 1) / 512 - (origin + 511) / 512 + 1);
      for (std::size_t i = 0; i < nm; ++i) {
        const Marker& m = markers[i];
        EXPECT_EQ(m.offset % 512, 0u);
        EXPECT_EQ(m.reserved, 0u);
        // The FPDU containing the marker is the last one starting at or before it.
        std::uint64_t s = 0;
        for (auto st0 : starts) {
          if (st0 <= m.offset) s = st0;
        }
        EXPECT_EQ(m.fpdu_ptr, expected_fpdu_ptr(m.offset, s)) << origin << " " << m.offset;
      }
    }
  }
}

TEST(Marker, StripperStopsWhenMarkerListFull) {
  std::array<std::uint8_t, 16> wire{};
  store16(&wire[2], 0x1234);
  MarkerStripper st(0);
  std::array<std::uint8_t, 16> out{};
  auto r = st.strip(wire, out, {});
  EXPECT_EQ(r.consumed, 3u);  // the marker's last byte waits for room to report it
  EXPECT_EQ(r.written, 0u);
  std::array<Marker, 1> m{};
  r = st.strip(Bytes(wire).subspan(3), out, m);
  EXPECT_EQ(r.consumed, 13u);
  EXPECT_EQ(r.markers, 1u);
  EXPECT_EQ(m[0].fpdu_ptr, 0x1234);
  EXPECT_EQ(r.written, 12u);
}
