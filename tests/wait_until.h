// wait_until(pred, timeout): polls `pred` every `poll` until it holds or `timeout` passes,
// and says whether it held. What a test uses instead of a fixed sleep to let something happen.
#pragma once

#include <chrono>
#include <thread>

namespace softrdma::test {

template <class Pred>
bool wait_until(Pred&& pred, std::chrono::milliseconds timeout = std::chrono::seconds(10),
                std::chrono::microseconds poll = std::chrono::microseconds(100)) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() >= end) return pred();
    std::this_thread::sleep_for(poll);
  }
  return true;
}

}  // namespace softrdma::test
