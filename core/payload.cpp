#include "core/payload.h"

#include <cstring>

#include "core/safe_copy.h"

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
    bool on_demand = false;
    if (mrs.resolve(s.lkey, pd, s.addr + off, chunk, access, &host, 0, &on_demand) !=
        MrCheck::kOk) {
      err = WcStatus::kLocProtErr;
      return false;
    }
    if (!copy(host, done, chunk, on_demand)) {
      // An ODP region's page is gone: a protection error, as rxe's failed ODP copy.
      mrs.count_odp_fault();
      err = WcStatus::kLocProtErr;
      return false;
    }
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
              [&](std::uint8_t* host, std::uint64_t at, std::uint64_t len, bool on_demand) {
                if (on_demand) return fault_safe_read(out + at, host, len);
                std::memcpy(out + at, host, len);
                return true;
              });
}

bool scatter(const MrTable& mrs, const Pd* pd, std::span<const Sge> sge, std::uint64_t off,
             const std::uint8_t* in, std::uint32_t n, WcStatus& err) {
  return walk(mrs, pd, sge, off, n, kAccessLocalWrite, err,
              [&](std::uint8_t* host, std::uint64_t at, std::uint64_t len, bool on_demand) {
                if (on_demand) return fault_safe_write(host, in + at, len);
                std::memcpy(host, in + at, len);
                return true;
              });
}

}  // namespace softrdma::core
