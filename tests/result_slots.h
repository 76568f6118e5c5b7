// ResultSlots: where a progress thread hands results to a test. put() stores one in its slot
// under the mutex and wakes whoever waits on the condition variable.
#pragma once

#include <condition_variable>
#include <mutex>
#include <optional>

namespace softrdma::test {

struct ResultSlots {
  std::mutex mu;
  std::condition_variable cv;
  template <class T>
  void put(std::optional<T>& slot, const T& value) {
    std::lock_guard lock(mu);
    slot = value;
    cv.notify_all();
  }
};

}  // namespace softrdma::test
