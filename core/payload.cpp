#include "core/payload.h"

#include <cstring>

namespace softrdma::core {

namespace {

template <class Copy>
bool walk(const MrTable& mrs, const Pd* pd, std::span<const Sge> sge, std::uint64_t off,
          std::uint32_t n, std::uint32_t access, WcStatus& err, Copy copy) {
  MrTable::Guard guard(mrs);
  std::uint64_t done = 0;
  for (const Sge& s : sge) {
    if (n == done) break;
    if (off >= s.length) {
      off -= s.length;
      continue;
    }
    const std::uint64_t chunk = std::min<std::uint64_t>(s.length - off, n - done);
    std::uint8_t* host = nullptr;
    if (mrs.resolve(s.lkey, pd, s.addr + off, chunk, access, &host) != MrCheck::kOk) {
      err = WcStatus::kLocProtErr;
      return false;
    }
    copy(host, done, chunk);
    done += chunk;
    off = 0;
  }
  if (done != n) {
    err = WcStatus::kLocLenErr;
    return false;
  }
  return true;
}

}  // namespace

bool gather(const MrTable& mrs, const Pd* pd, std::span<const Sge> sge, std::uint64_t off,
            std::uint8_t* out, std::uint32_t n, WcStatus& err) {
  return walk(mrs, pd, sge, off, n, 0, err,
              [&](std::uint8_t* host, std::uint64_t at, std::uint64_t len) {
                std::memcpy(out + at, host, len);
              });
}

bool scatter(const MrTable& mrs, const Pd* pd, std::span<const Sge> sge, std::uint64_t off,
             const std::uint8_t* in, std::uint32_t n, WcStatus& err) {
  return walk(mrs, pd, sge, off, n, kAccessLocalWrite, err,
              [&](std::uint8_t* host, std::uint64_t at, std::uint64_t len) {
                std::memcpy(host, in + at, len);
              });
}

}  // namespace softrdma::core
