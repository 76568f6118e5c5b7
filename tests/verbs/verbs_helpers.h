// Helpers of the gtests that use the drop-in libibverbs through its C API.
#pragma once

#include <infiniband/verbs.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

namespace softrdma::verbs::test {

// The device named `name`, opened; nullptr when there is none.
inline ibv_context* open_by_name(const char* name) {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  ibv_context* ctx = nullptr;
  for (int i = 0; i < n && !ctx; ++i) {
    if (std::strcmp(ibv_get_device_name(list[i]), name) == 0) ctx = ibv_open_device(list[i]);
  }
  ibv_free_device_list(list);
  return ctx;
}

// Polls `cq` until it has given `want` completions, it fails, or 10 s passed.
inline std::vector<ibv_wc> poll_n(ibv_cq* cq, std::size_t want) {
  using namespace std::chrono_literals;
  std::vector<ibv_wc> got;
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (got.size() < want && std::chrono::steady_clock::now() < deadline) {
    ibv_wc wc[16];
    const int n = ibv_poll_cq(cq, 16, wc);
    if (n < 0) break;
    got.insert(got.end(), wc, wc + n);
    if (n == 0) std::this_thread::sleep_for(100us);
  }
  return got;
}

}  // namespace softrdma::verbs::test
