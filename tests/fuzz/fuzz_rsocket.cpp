// Fuzz target: what an rsockets peer sends (cm/rsocket_wire.h, used by cm/rsocket.cpp): the hello
// in the connection's private data, riomap window announcements and the riowrite lookups made
// against them, and the credits a peer's credit word grants. A window accepted must be one riomap
// could make; a write found in it must lie inside it; an announcement must survive encoding; the
// credits must never exceed what the peer granted.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

#include "cm/rsocket_wire.h"
#include "tests/fuzz/reader.h"

namespace {
using namespace softrdma::cm;

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "fuzz_rsocket: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  softrdma::fuzz::Reader r{data, size};
  // The hello: the private data as it came (any length up to rdma_cm's 196 bytes).
  const std::size_t hello_len = r.u8() % 40;
  const std::string hello = r.bytes(hello_len);
  const auto h = rs::parse_hello(hello.data(), hello.size(), 32);
  if (h.slots == 0) fail("a hello with no slots");
  std::vector<rs::Window> windows;
  while (!r.empty()) {
    switch (r.u8() % 3) {
      case 0: {  // a control message announcing a window
        const std::size_t len = r.u8() % 64;
        const std::string msg = r.bytes(len);
        auto w = rs::parse_window(reinterpret_cast<const std::uint8_t*>(msg.data()), msg.size());
        if (!w) break;
        if (w->offset < 0 || w->len > static_cast<std::uint64_t>(
                                          std::numeric_limits<std::int64_t>::max() - w->offset)) {
          fail("a window riomap cannot make was accepted");
        }
        std::uint8_t enc[rs::kWindowBytes];
        rs::encode_window(*w, enc);
        auto again = rs::parse_window(enc, sizeof enc);
        if (!again || again->offset != w->offset || again->addr != w->addr ||
            again->rkey != w->rkey || again->len != w->len) {
          fail("a window does not survive encoding");
        }
        windows.push_back(*w);
        break;
      }
      case 1: {  // riowrite(count, offset) looked up in each window
        const auto offset = static_cast<std::int64_t>(r.u64());
        const std::uint64_t count = r.u64() >> (r.u8() % 64);
        for (const auto& w : windows) {
          std::uint64_t remote = 0;
          if (!rs::window_covers(w, offset, count, remote)) continue;
          // offset >= w.offset >= 0 here, or the write is outside.
          if (offset < w.offset) fail("a write before the window was let through");
          const auto into = static_cast<std::uint64_t>(offset - w.offset);
          if (count > w.len || into > w.len - count)
            fail("a write past the window was let through");
          if (remote != w.addr + into) fail("a write maps to the wrong remote address");
        }
        break;
      }
      default: {  // the credit word as the peer wrote it
        const std::uint64_t reposted = r.u64(), sent = r.u64() >> (r.u8() % 64);
        const std::uint64_t c = rs::credits(reposted, h.slots, sent);
        const bool wraps = reposted > std::numeric_limits<std::uint64_t>::max() - h.slots;
        const std::uint64_t granted = reposted + h.slots;
        if (!wraps && c != (granted >= sent ? granted - sent : 0)) fail("credits miscounted");
        if (wraps && c != 0) fail("credits from a wrapped credit word");
      }
    }
  }
  return 0;
}
