// On-demand paging: which device offers it and for what (odp_caps), and ibv_advise_mr. Nothing
// is pinned in software, so an ODP region is a range whose pages the engine touches only
// through fault-safe copies (core/safe_copy.h); docs/verbs-abi.md#on-demand-paging.
#include <unistd.h>

#include <cerrno>
#include <cstdint>

#include "core/safe_copy.h"
#include "verbs/objects.h"
#include "verbs/provider.h"

namespace softrdma::verbs {

namespace {

// What each transport's tests cover (tests/verbs/test_odp.cpp, verbs.ib_*_odp).
constexpr std::uint32_t kRcCaps = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV |
                                  IBV_ODP_SUPPORT_WRITE | IBV_ODP_SUPPORT_READ |
                                  IBV_ODP_SUPPORT_ATOMIC | IBV_ODP_SUPPORT_SRQ_RECV;
constexpr std::uint32_t kUcCaps =
    IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_WRITE;
constexpr std::uint32_t kUdCaps = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV;

// Faults in [addr, addr + len) page by page: readable (PREFETCH) or writable (PREFETCH_WRITE).
bool fault_in(std::uint8_t* addr, std::uint64_t len, bool write) {
  const auto page = static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE));
  const std::uint64_t first = reinterpret_cast<std::uint64_t>(addr) & ~(page - 1);
  const std::uint64_t end = reinterpret_cast<std::uint64_t>(addr) + len;
  for (std::uint64_t p = first; p < end; p += page) {
    auto* at = reinterpret_cast<std::uint8_t*>(p);
    std::uint8_t byte = 0;
    if (write ? !core::fault_safe_probe_writable(at) : !core::fault_safe_read(&byte, at, 1)) {
      return false;
    }
  }
  return true;
}

}  // namespace

bool odp_supported(ibv_context* c) {
  return provider(c).odp() && core::fault_safe_available();
}

void fill_odp_caps(ibv_context* c, ibv_device_attr_ex& a) {
  a.odp_caps = {};
  a.xrc_odp_caps = 0;
  if (!odp_supported(c)) return;
  a.odp_caps.general_caps = IBV_ODP_SUPPORT | IBV_ODP_SUPPORT_IMPLICIT;
  a.odp_caps.per_transport_caps.rc_odp_caps = kRcCaps;
  a.odp_caps.per_transport_caps.uc_odp_caps = kUcCaps;
  a.odp_caps.per_transport_caps.ud_odp_caps = kUdCaps;
}

// As the kernel's: EINVAL for bad flags or an empty list or a region that is not ODP, EFAULT for
// a bad lkey, a range outside its region, PREFETCH_WRITE without local write, or (PREFETCH,
// PREFETCH_WRITE) memory that is not there. NO_FAULT faults nothing and only checks.
int advise_mr(ibv_pd* pd, ibv_advise_mr_advice advice, std::uint32_t flags, ibv_sge* sg_list,
              std::uint32_t num_sge) {
  if (inherited(pd->context)) return ENODEV;
  if (!odp_supported(pd->context)) return EOPNOTSUPP;
  if (advice != IBV_ADVISE_MR_ADVICE_PREFETCH && advice != IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE &&
      advice != IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT) {
    return EOPNOTSUPP;
  }
  if ((flags & ~static_cast<std::uint32_t>(IBV_ADVISE_MR_FLAG_FLUSH)) || !sg_list || !num_sge) {
    return EINVAL;
  }
  const bool write = advice == IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE;
  core::MrTable& mrs = objects(pd->context).mrs();
  for (std::uint32_t i = 0; i < num_sge; ++i) {
    const ibv_sge& s = sg_list[i];
    const auto mr = mrs.find(s.lkey);
    if (!mr || mr->lkey != s.lkey) return EFAULT;  // no such region (a window's key is no lkey)
    if (!mr->on_demand()) return EINVAL;
    core::MrTable::Guard g(mrs);
    std::uint8_t* host = nullptr;
    bool on_demand = false;
    if (mrs.resolve(s.lkey, soft(pd)->rxe, s.addr, s.length,
                    write ? std::uint32_t{core::kAccessLocalWrite} : 0u, &host, 0,
                    &on_demand) != core::MrCheck::kOk) {
      return EFAULT;
    }
    if (advice != IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT && s.length &&
        !fault_in(host, s.length, write)) {
      return EFAULT;
    }
  }
  return 0;
}

}  // namespace softrdma::verbs
