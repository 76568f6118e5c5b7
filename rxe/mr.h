// Protection domains and memory regions: unpredictable keys, access flags, bounds.
// Every local and remote memory access of the engine goes through MrTable::resolve,
// which never hands out a pointer outside a registered, valid region.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <random>
#include <shared_mutex>
#include <unordered_map>

namespace softrdma::rxe {

class Directory;

struct Pd {
  std::uint32_t handle = 0;
};

struct Mr {
  Pd* pd = nullptr;
  std::uint8_t* addr = nullptr;  // host address of the first byte
  std::uint64_t length = 0;
  std::uint64_t iova = 0;        // the address remote peers and SGEs use
  std::uint32_t access = 0;
  std::uint32_t lkey = 0;
  std::uint32_t rkey = 0;
  std::atomic<bool> valid{true};  // cleared by LOCAL_INV / SEND_WITH_INV
};

enum class MrCheck : std::uint8_t { kOk, kBadKey, kBadPd, kNoAccess, kOutOfBounds, kInvalidated };

class MrTable {
 public:
  MrTable();
  // Registers [addr, addr+length) seen by peers at iova. Returns nullptr when out of keys.
  std::shared_ptr<Mr> add(Pd* pd, void* addr, std::uint64_t length, std::uint64_t iova,
                          std::uint32_t access);
  // Removes the MR; returns once no access through it is in progress.
  bool remove(std::uint32_t lkey);
  // Changes an MR in place (ibv_rereg_mr): any of pd, range, access.
  bool rereg(std::uint32_t lkey, Pd* pd, void* addr, std::uint64_t length, std::uint64_t iova,
             std::uint32_t access);
  std::shared_ptr<Mr> find(std::uint32_t key) const;
  // Calls fn(const Mr&) for every registered region (monitoring), under the shared lock.
  template <class Fn>
  void for_each(Fn&& fn) const {
    std::shared_lock lock(mutex_);
    for (const auto& [key, mr] : keys_) fn(*mr);
  }

  // Resolves an access of `len` bytes at `iova` through `key` by an object of `pd`
  // needing `access` (0 for a local read). On kOk, *host is the host pointer.
  // Hold a Guard while the returned pointer is used.
  MrCheck resolve(std::uint32_t key, const Pd* pd, std::uint64_t iova, std::uint64_t len,
                  std::uint32_t access, std::uint8_t** host) const;
  // Invalidate (LOCAL_INV, SEND_WITH_INV): false when no such key.
  bool invalidate(std::uint32_t key);
  // Mirrors the regions open to remote writes into `d` (direct placement) from now on.
  void set_directory(Directory* d) { dir_ = d; }

  // Keeps regions from being deregistered while their memory is touched.
  class Guard {
   public:
    explicit Guard(const MrTable& t) : lock_(t.mutex_) {}

   private:
    std::shared_lock<std::shared_mutex> lock_;
  };

 private:
  std::uint32_t new_key();
  mutable std::shared_mutex mutex_;
  std::unordered_map<std::uint32_t, std::shared_ptr<Mr>> keys_;
  std::mt19937 rng_;
  Directory* dir_ = nullptr;
  void publish(const Mr& mr);  // into dir_, if it is open to remote writes and valid
};

}  // namespace softrdma::rxe
