// Memory windows of MrTable: allocation, binding with the checks of IBTA 10.6.7.2, and
// resolving a remote access through a window to the region it is bound to.
#include <cerrno>

#include "core/mr.h"
#include "core/types.h"

namespace softrdma::core {

namespace {

constexpr std::uint32_t kRemoteAccess =
    kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic;

}  // namespace

std::uint32_t MrTable::add_mw(Pd* pd, MwType type) {
  std::unique_lock lock(mutex_);
  if (keys_.size() + windows_.size() >= (1u << 20)) return 0;
  for (;;) {
    const std::uint32_t k = static_cast<std::uint32_t>(rng_());
    const std::uint32_t handle = k >> 8;
    if (handle == 0 || handle == 0xFFFFFF || windows_.contains(handle)) continue;
    // No region's key may share the window's upper 24 bits: then any key byte names the
    // window alone.
    bool clash = false;
    for (const auto& [key, mr] : keys_) clash = clash || (key >> 8) == handle;
    if (clash) continue;
    Mw& w = windows_[handle];
    w.pd = pd;
    w.type = type;
    w.rkey = k;
    return k;
  }
}

void MrTable::unbind(Mw& w) {
  if (w.mr) --w.mr->windows;
  w.mr.reset();
  w.iova = w.base = w.length = 0;
  w.access = 0;
  w.qpn = 0;
}

int MrTable::remove_mw(std::uint32_t handle) {
  std::unique_lock lock(mutex_);
  auto it = windows_.find(handle);
  if (it == windows_.end()) return EINVAL;
  unbind(it->second);
  windows_.erase(it);
  return 0;
}

bool MrTable::bind_mw(const MwBind& b, const Pd* pd, std::uint32_t qpn) {
  std::unique_lock lock(mutex_);
  auto it = windows_.find(b.handle);
  if (it == windows_.end()) return false;
  Mw& w = it->second;
  // The window belongs to the QP's protection domain; its new key keeps its handle.
  if (w.pd != pd || (b.new_rkey >> 8) != b.handle) return false;
  // A type 2 window is bound once, then invalidated before it is bound again.
  if (w.type == MwType::k2 && w.mr) return false;
  // Windows give remote access only, and a type 1 window is never zero-based (as rxe).
  if (b.access & ~(kRemoteAccess | kAccessZeroBased)) return false;
  if (w.type == MwType::k1 && (b.access & kAccessZeroBased)) return false;
  std::shared_ptr<Mr> mr;
  if (b.length || w.type == MwType::k2 || b.mr_lkey) {
    auto m = keys_.find(b.mr_lkey);
    if (m == keys_.end()) return false;
    mr = m->second;
    if (!mr->valid.load(std::memory_order_acquire) || mr->pd != pd) return false;
    if (!(mr->access & kAccessMwBind)) return false;
    // Remote write or atomic through the window needs local write on the region.
    if ((b.access & (kAccessRemoteWrite | kAccessRemoteAtomic)) &&
        !(mr->access & kAccessLocalWrite)) {
      return false;
    }
    if (!in_range(b.addr, b.length, mr->iova, mr->length)) return false;
  }
  unbind(w);
  w.rkey = b.new_rkey;
  if (!mr || b.length == 0) return true;  // a type 1 window unbound
  w.mr = mr;
  ++mr->windows;
  w.base = b.addr;
  w.iova = (b.access & kAccessZeroBased) ? 0 : b.addr;
  w.length = b.length;
  w.access = b.access & kRemoteAccess;
  w.qpn = w.type == MwType::k2 ? qpn : 0;
  return true;
}

bool MrTable::find_mw(std::uint32_t handle, Mw* out) const {
  std::shared_lock lock(mutex_);
  auto it = windows_.find(handle);
  if (it == windows_.end()) return false;
  *out = it->second;
  return true;
}

bool MrTable::has_windows(const Pd* pd) const {
  std::shared_lock lock(mutex_);
  for (const auto& [handle, w] : windows_) {
    if (w.pd == pd) return true;
  }
  return false;
}

MrCheck MrTable::resolve_mw(std::uint32_t key, const Pd* pd, std::uint64_t iova, std::uint64_t len,
                            std::uint32_t access, std::uint8_t** host, std::uint32_t qpn,
                            bool* on_demand) const {
  // Under the caller's Guard, as resolve.
  if (!(access & kRemoteAccess)) return MrCheck::kBadKey;  // local access names regions only
  auto it = windows_.find(key >> 8);
  if (it == windows_.end() || it->second.rkey != key) return MrCheck::kBadKey;
  const Mw& w = it->second;
  if (!w.mr) return MrCheck::kInvalidated;
  if (w.pd != pd) return MrCheck::kBadPd;
  if (w.type == MwType::k2 && w.qpn != qpn) return MrCheck::kBadPd;
  if ((w.access & access) != access) return MrCheck::kNoAccess;
  if (!in_range(iova, len, w.iova, w.length)) return MrCheck::kOutOfBounds;
  const Mr& mr = *w.mr;
  if (!mr.valid.load(std::memory_order_acquire)) return MrCheck::kInvalidated;
  *host = mr.addr + (w.base - mr.iova) + (iova - w.iova);
  if (on_demand) *on_demand = mr.on_demand();
  return MrCheck::kOk;
}

}  // namespace softrdma::core
