// Protection domains, memory regions and memory windows: unpredictable keys, access flags,
// bounds. Every local and remote memory access of the engine goes through MrTable::resolve,
// which never hands out a pointer outside a registered, valid region (a window only inside
// the part of its region it is bound to). On-demand paging regions may have pages unmapped:
// resolve says so, and their memory is touched through core/safe_copy.h only.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <random>
#include <shared_mutex>
#include <unordered_map>

#include "core/types.h"

namespace softrdma::core {

struct Mr;

// Told when a region becomes open to remote writes (valid, REMOTE_WRITE) and when it stops being
// so, under the table's lock: RoCE's direct placement mirrors such regions for its local peers.
class RegionWatcher {
 public:
  virtual ~RegionWatcher() = default;
  virtual void region_open(const Mr& mr) = 0;
  virtual void region_closed(std::uint32_t rkey) = 0;
};

// On-demand paging (IBV_ACCESS_ON_DEMAND's value): nothing is pinned or even mapped at
// registration; every access copies fault-safely. Implicit ODP: addr 0, length kImplicitOdp,
// the whole address space (iova == host address).
inline constexpr std::uint32_t kAccessOnDemand = 1u << 6;
inline constexpr std::uint64_t kImplicitOdpLength = ~std::uint64_t{0};

struct Pd {
  std::uint32_t handle = 0;
};

struct Mr {
  Pd* pd = nullptr;
  std::uint8_t* addr = nullptr;  // host address of the first byte
  std::uint64_t length = 0;
  std::uint64_t iova = 0;  // the address remote peers and SGEs use
  std::uint32_t access = 0;
  std::uint32_t lkey = 0;
  std::uint32_t rkey = 0;
  std::atomic<bool> valid{true};  // cleared by LOCAL_INV / SEND_WITH_INV
  std::uint32_t windows = 0;      // memory windows bound to it (under the table's lock)
  bool on_demand() const { return (access & kAccessOnDemand) != 0; }
};

// A memory window: remote access to part of a region, under a key of its own whose low byte
// is the consumer's (ibv_inc_rkey) and whose upper 24 bits name the window (its handle).
struct Mw {
  Pd* pd = nullptr;
  MwType type = MwType::k1;
  std::uint32_t rkey = 0;
  // While bound (mr set): peers address [iova, iova + length), which is the region's
  // [base, base + length); iova is 0 for a zero-based window.
  std::shared_ptr<Mr> mr;
  std::uint64_t iova = 0, base = 0, length = 0;
  std::uint32_t access = 0;
  std::uint32_t qpn = 0;  // type 2: the QP it is bound to
};

// What a bind asks for (ibv_mw_bind_info plus the window's new key); length 0 with no region
// unbinds a type 1 window.
struct MwBind {
  std::uint32_t handle = 0;  // the window
  std::uint32_t new_rkey = 0;
  std::uint32_t mr_lkey = 0;
  std::uint64_t addr = 0, length = 0;
  std::uint32_t access = 0;
};

// Whether [addr, addr + len) lies inside [base, base + size), without overflowing.
inline bool in_range(std::uint64_t addr, std::uint64_t len, std::uint64_t base,
                     std::uint64_t size) {
  return addr >= base && len <= size && addr - base <= size - len;
}

enum class MrCheck : std::uint8_t { kOk, kBadKey, kBadPd, kNoAccess, kOutOfBounds, kInvalidated };

class MrTable {
 public:
  MrTable();
  // Registers [addr, addr+length) seen by peers at iova. Returns nullptr when out of keys.
  std::shared_ptr<Mr> add(Pd* pd, void* addr, std::uint64_t length, std::uint64_t iova,
                          std::uint32_t access);
  // Removes the MR; returns once no access through it is in progress. EINVAL: no such MR;
  // EBUSY: memory windows are bound to it.
  int remove(std::uint32_t lkey);
  // Changes an MR in place (ibv_rereg_mr): any of pd, range, access. False as well while
  // windows are bound to it.
  bool rereg(std::uint32_t lkey, Pd* pd, void* addr, std::uint64_t length, std::uint64_t iova,
             std::uint32_t access);
  std::shared_ptr<Mr> find(std::uint32_t key) const;
  // Calls fn(const Mr&) for every registered region (monitoring), under the shared lock.
  template <class Fn>
  void for_each(Fn&& fn) const {
    std::shared_lock lock(mutex_);
    for (const auto& [key, mr] : keys_) fn(*mr);
  }

  // Resolves an access of `len` bytes at `iova` through `key` by QP `qpn` of `pd` needing
  // `access` (0 for a local read). A window's key serves remote access only, and a type 2
  // window only its QP. On kOk, *host is the host pointer and *on_demand (when given) whether
  // the memory is an ODP region's, to be copied through core/safe_copy.h. Hold a Guard while
  // it is used.
  MrCheck resolve(std::uint32_t key, const Pd* pd, std::uint64_t iova, std::uint64_t len,
                  std::uint32_t access, std::uint8_t** host, std::uint32_t qpn = 0,
                  bool* on_demand = nullptr) const;
  // Accesses to ODP regions that found their memory unmapped (or read-only), local or remote.
  void count_odp_fault() const { odp_faults_.fetch_add(1, std::memory_order_relaxed); }
  std::uint64_t odp_faults() const { return odp_faults_.load(std::memory_order_relaxed); }
  // Invalidate (LOCAL_INV, SEND_WITH_INV): an MR's key, or a bound type 2 window's (which
  // `qpn`, when not 0, must be bound to). False when there is no such key to invalidate.
  bool invalidate(std::uint32_t key, std::uint32_t qpn = 0);

  // Memory windows (core/mw.cpp). add_mw gives the new window's key (0 when out of keys);
  // its handle is key >> 8.
  std::uint32_t add_mw(Pd* pd, MwType type);
  // EINVAL: no such window. A bound window is unbound first.
  int remove_mw(std::uint32_t handle);
  // Binds (or, type 1 with length 0, unbinds) a window for QP `qpn` of `pd`, the checks of
  // IBTA 10.6.7.2: false (MW_BIND_ERR) when a check fails, the window unchanged.
  bool bind_mw(const MwBind& b, const Pd* pd, std::uint32_t qpn);
  // The window's state, for tests and monitoring; false when there is no such window.
  bool find_mw(std::uint32_t handle, Mw* out) const;
  bool has_windows(const Pd* pd) const;  // of that protection domain
  // Tells `w` of the regions open to remote writes from now on (set before any region is made).
  void set_watcher(RegionWatcher* w) { watcher_ = w; }

  // Keeps regions from being deregistered while their memory is touched.
  class Guard {
   public:
    explicit Guard(const MrTable& t) : lock_(t.mutex_) {}

   private:
    std::shared_lock<std::shared_mutex> lock_;
  };

 private:
  std::uint32_t new_key();
  bool key_taken(std::uint32_t k) const;  // by a region, or by a window's handle
  void unbind(Mw& w);
  MrCheck resolve_mw(std::uint32_t key, const Pd* pd, std::uint64_t iova, std::uint64_t len,
                     std::uint32_t access, std::uint8_t** host, std::uint32_t qpn,
                     bool* on_demand) const;
  mutable std::atomic<std::uint64_t> odp_faults_{0};
  mutable std::shared_mutex mutex_;
  std::unordered_map<std::uint32_t, std::shared_ptr<Mr>> keys_;
  std::unordered_map<std::uint32_t, Mw> windows_;  // by handle (key >> 8)
  std::mt19937 rng_;
  RegionWatcher* watcher_ = nullptr;
  void publish(const Mr& mr);  // to watcher_, if it is open to remote writes and valid
};

}  // namespace softrdma::core
