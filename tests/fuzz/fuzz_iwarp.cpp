// Fuzz target: the iWARP codecs — MPA request/reply, FPDU framing with and without
// CRC, DDP/RDMAP headers, Read Request, Terminate — and marker stripping at a few
// stream offsets, fed whole and in pieces.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "wire/ddp_rdmap.h"
#include "wire/fpdu.h"
#include "wire/mpa.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace softrdma::wire;
  const Bytes in(data, size);
  (void)parse_mpa(in);
  for (bool crc : {false, true}) {
    auto f = parse_fpdu(in, crc);
    if (f) {
      (void)f->check();
      (void)parse_ddp_header(f->ulpdu);
    }
  }
  auto h = decode_ddp_header(in);
  if (h) {
    (void)check_ddp_header(*h);
    const Bytes body = in.subspan(h->header_len());
    (void)parse_read_request(body);
    auto t = parse_terminate(body);
    if (t) {
      std::vector<std::uint8_t> out(t->encoded_len());
      (void)build_terminate(out, *t);
    }
  }
  (void)parse_read_request(in);
  (void)parse_terminate(in);

  std::vector<std::uint8_t> plain(size);
  std::array<Marker, 4> markers{};
  for (std::uint64_t start : {0ull, 1ull, 508ull, 511ull, 512ull, 0xFFFFFFFEull}) {
    MarkerStripper st(start);
    std::size_t used = 0, written = 0;
    // Small pieces, so that markers are split across calls and `markers` fills up.
    while (used < size) {
      const std::size_t piece = std::min<std::size_t>(size - used, 1 + (data[used] % 700));
      auto r =
          st.strip(in.subspan(used, piece),
                   Bytes(plain).empty() ? MutBytes() : MutBytes(plain).subspan(written), markers);
      if (r.consumed == 0) break;
      used += r.consumed;
      written += r.written;
    }
    const std::size_t plain_len = fpdu_total_len(size > 1 ? load16(data) : 0);
    (void)fpdu_wire_len(start, plain_len);
    if (written >= 2) {
      auto f = parse_fpdu(Bytes(plain.data(), written), true);
      if (f) {
        MarkerInserter ins(start);
        std::vector<std::uint8_t> w(ins.wire_len(f->total_len));
        (void)ins.put_fpdu(w, Bytes(plain.data(), f->total_len), true);
      }
    }
  }
  return 0;
}
