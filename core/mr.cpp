#include "core/mr.h"

#include <cerrno>

#include "core/types.h"

namespace softrdma::core {

MrTable::MrTable() : rng_(std::random_device{}()) {}

bool MrTable::key_taken(std::uint32_t k) const {
  return keys_.contains(k) || windows_.contains(k >> 8);
}

std::uint32_t MrTable::new_key() {
  for (;;) {
    const std::uint32_t k = static_cast<std::uint32_t>(rng_());
    if (k != 0 && k != 0xFFFFFFFF && !key_taken(k)) return k;
  }
}

std::shared_ptr<Mr> MrTable::add(Pd* pd, void* addr, std::uint64_t length, std::uint64_t iova,
                                 std::uint32_t access) {
  auto mr = std::make_shared<Mr>();
  mr->pd = pd;
  mr->addr = static_cast<std::uint8_t*>(addr);
  mr->length = length;
  mr->iova = iova;
  mr->access = access;
  std::unique_lock lock(mutex_);
  if (keys_.size() >= (1u << 20)) return nullptr;
  mr->lkey = mr->rkey = new_key();
  keys_[mr->lkey] = mr;
  publish(*mr);
  return mr;
}

void MrTable::publish(const Mr& mr) {
  if (!watcher_ || !(mr.access & kAccessRemoteWrite) || !mr.valid.load(std::memory_order_acquire)) {
    return;
  }
  watcher_->region_open(mr);
}

int MrTable::remove(std::uint32_t lkey) {
  std::unique_lock lock(mutex_);
  auto it = keys_.find(lkey);
  if (it == keys_.end()) return EINVAL;
  if (it->second->windows) return EBUSY;
  // Withdrawn first: once this returns, no sender of this host writes through the key.
  if (watcher_) watcher_->region_closed(lkey);
  keys_.erase(it);
  return 0;
}

bool MrTable::rereg(std::uint32_t lkey, Pd* pd, void* addr, std::uint64_t length,
                    std::uint64_t iova, std::uint32_t access) {
  std::unique_lock lock(mutex_);
  auto it = keys_.find(lkey);
  if (it == keys_.end() || it->second->windows) return false;
  Mr& mr = *it->second;
  if (watcher_) watcher_->region_closed(mr.rkey);
  if (pd) mr.pd = pd;
  if (addr) {
    mr.addr = static_cast<std::uint8_t*>(addr);
    mr.length = length;
    mr.iova = iova;
  }
  mr.access = access;
  mr.valid = true;
  publish(mr);
  return true;
}

std::shared_ptr<Mr> MrTable::find(std::uint32_t key) const {
  std::shared_lock lock(mutex_);
  auto it = keys_.find(key);
  return it == keys_.end() ? nullptr : it->second;
}

MrCheck MrTable::resolve(std::uint32_t key, const Pd* pd, std::uint64_t iova, std::uint64_t len,
                         std::uint32_t access, std::uint8_t** host, std::uint32_t qpn,
                         bool* on_demand) const {
  // Callers hold a Guard (shared lock) across resolve and the copy.
  auto it = keys_.find(key);
  if (it == keys_.end()) return resolve_mw(key, pd, iova, len, access, host, qpn, on_demand);
  const Mr& mr = *it->second;
  if (!mr.valid.load(std::memory_order_acquire)) return MrCheck::kInvalidated;
  if (mr.pd != pd) return MrCheck::kBadPd;
  if ((mr.access & access) != access) return MrCheck::kNoAccess;
  if (!in_range(iova, len, mr.iova, mr.length)) return MrCheck::kOutOfBounds;
  *host = mr.addr + (iova - mr.iova);
  if (on_demand) *on_demand = mr.on_demand();
  return MrCheck::kOk;
}

bool MrTable::invalidate(std::uint32_t key, std::uint32_t qpn) {
  std::unique_lock lock(mutex_);
  auto it = keys_.find(key);
  if (it == keys_.end()) {
    // A window: type 2 only (IBTA 10.6.7.2.3), bound, by its current key.
    auto w = windows_.find(key >> 8);
    if (w == windows_.end() || w->second.type != MwType::k2 || !w->second.mr ||
        w->second.rkey != key || (qpn && w->second.qpn != qpn)) {
      return false;
    }
    unbind(w->second);
    return true;
  }
  it->second->valid.store(false, std::memory_order_release);
  if (watcher_) watcher_->region_closed(key);
  return true;
}

}  // namespace softrdma::core
