// What the rdma_cm entry points (cm/api*.cpp) share: the errno convention of their results
// and binding an id under the lock.
#pragma once

#include <sys/socket.h>

#include <cerrno>

#include "cm/state.h"

namespace softrdma::cm {

// Sets errno to `err` and returns -1, as every rdma_cm call fails.
inline int fail(int err) {
  errno = err;
  return -1;
}

// Binds `c` to `addr` (port 0: an ephemeral one): 0 or an errno value. Caller holds the lock.
int bind_locked(CmId* c, const sockaddr* addr);

}  // namespace softrdma::cm
