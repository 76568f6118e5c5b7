// Fuzz target: a host-local ring (netdev/shm_ring.h) as its consumer reads it. The input drives a
// producer (datagrams pushed and published) and a consumer (peek, consume, release), and
// overwrites bytes of the shared memory — records, positions, the header — as a hostile or
// crashed sender could. The consumer must hand out only datagrams inside its mapping, of a
// length it allows, and until anything was tampered with, exactly what was pushed, in order.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "netdev/shm_ring.h"
#include "tests/fuzz/reader.h"

namespace {
using namespace softrdma;
using netdev::ShmRing;

constexpr std::size_t kHeaderBytes = 256;  // netdev/shm_ring.cpp's header, before the data

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "fuzz_shm_ring: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz::Reader r{data, size};
  std::string error;
  auto producer = ShmRing::create(ShmRing::kMinBytes, error);
  if (!producer) fail(error.c_str());
  const std::size_t map_len = kHeaderBytes + producer->bytes();
  auto* raw = static_cast<std::uint8_t*>(
      mmap(nullptr, map_len, PROT_READ | PROT_WRITE, MAP_SHARED, producer->fd(), 0));
  if (raw == MAP_FAILED) fail("mmap failed");
  // Tampering with the header before the consumer attaches: attach must refuse, not misread.
  bool tampered = false;
  if (r.u8() == 0xA7) {
    const std::size_t at = r.u8() % 32;
    raw[at] = r.u8();
    tampered = true;
  }
  auto consumer = ShmRing::attach(dup(producer->fd()), error);
  std::deque<std::vector<std::uint8_t>> expected;
  std::vector<std::uint8_t> buf(netdev::kMaxDatagram);
  bool peeked = false;
  for (int ops = 0; consumer && !r.empty() && ops < 512; ++ops) {
    const std::uint8_t op = r.u8();
    switch (op % 5) {
      case 0: {  // push a datagram
        netdev::Packet p;
        const std::size_t len = (r.u16() % (netdev::kMaxDatagram + 64));
        for (std::size_t i = 0; i < std::min(len, buf.size()); ++i) {
          buf[i] = static_cast<std::uint8_t>(i + op);
        }
        p.data = buf.data();
        p.len = static_cast<std::uint32_t>(len);
        p.cap = static_cast<std::uint32_t>(buf.size());
        if (len <= buf.size() && producer->push(p, op & 8)) {
          expected.emplace_back(buf.begin(), buf.begin() + static_cast<long>(len));
        }
        break;
      }
      case 1:
        (void)producer->publish();
        break;
      case 2: {  // read what is there
        netdev::Packet view;
        bool icrc = false;
        if (!consumer->peek(view, icrc)) break;
        if (view.len > netdev::kMaxDatagram) fail("a datagram longer than the ring allows");
        const auto* d = static_cast<const std::uint8_t*>(view.data);
        if (!tampered) {
          if (expected.empty()) fail("a datagram that was never pushed");
          const auto& e = expected.front();
          if (view.len != e.size() || (view.len && std::memcmp(view.data, e.data(), e.size()))) {
            fail("a datagram other than the one pushed");
          }
        } else if (view.len) {
          volatile std::uint8_t sum = 0;  // every byte handed out must be in the mapping
          for (std::uint32_t i = 0; i < view.len; ++i) sum = static_cast<std::uint8_t>(sum + d[i]);
        }
        peeked = true;
        break;
      }
      case 3:
        if (peeked) {
          consumer->consume();
          if (!expected.empty()) expected.pop_front();
          peeked = false;
        }
        consumer->release();
        break;
      default: {  // a hostile producer: bytes anywhere in the shared memory
        const std::size_t at = r.u16() % 8 == 0 ? r.u8() : kHeaderBytes + r.u16() % 4096;
        const std::uint64_t v = r.u64();
        std::memcpy(raw + std::min(at, map_len - 8), &v, r.u8() % 8 + 1);
        tampered = true;
      }
    }
  }
  munmap(raw, map_len);
  return 0;
}
