#include "core/safe_copy.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

namespace softrdma::core {

namespace {

// process_vm_* move at most this much per call before returning a partial count; loop on it.
bool vm_copy(bool write, void* dst, const void* src, std::size_t n) {
  auto* d = static_cast<std::uint8_t*>(dst);
  auto* s = static_cast<const std::uint8_t*>(src);
  const pid_t self = getpid();
  while (n) {
    iovec local{}, remote{};
    if (write) {
      local = {const_cast<std::uint8_t*>(s), n};
      remote = {d, n};
    } else {
      local = {d, n};
      remote = {const_cast<std::uint8_t*>(s), n};
    }
    const ssize_t k = write ? process_vm_writev(self, &local, 1, &remote, 1, 0)
                            : process_vm_readv(self, &local, 1, &remote, 1, 0);
    if (k <= 0) {
      if (k < 0 && errno == EINTR) continue;
      return false;  // EFAULT: the first page is not there (or not writable)
    }
    d += k;
    s += k;
    n -= static_cast<std::size_t>(k);
  }
  return true;
}

}  // namespace

bool fault_safe_available() {
  static const bool ok = [] {
    std::uint64_t from = 0x0123456789ABCDEF, to = 0;
    std::uint32_t word = 7;
    return vm_copy(false, &to, &from, sizeof to) && to == from &&
           vm_copy(true, &to, &word, sizeof word) && fault_safe_probe_writable(&word) && word == 7;
  }();
  return ok;
}

bool fault_safe_read(void* dst, const void* src, std::size_t n) {
  return vm_copy(false, dst, src, n);
}

bool fault_safe_write(void* dst, const void* src, std::size_t n) {
  return vm_copy(true, dst, src, n);
}

bool fault_safe_probe_writable(void* p) {
  if (reinterpret_cast<std::uintptr_t>(p) % 4) return false;
  // *p += 0 on the second word, wake at most 0 waiters of a private word of ours.
  static std::uint32_t dummy = 0;
  const long r = syscall(SYS_futex, &dummy, FUTEX_WAKE_OP | FUTEX_PRIVATE_FLAG, 0, nullptr, p,
                         FUTEX_OP(FUTEX_OP_ADD, 0, FUTEX_OP_CMP_EQ, 0));
  return r >= 0;
}

}  // namespace softrdma::core
