// A netdev for fuzz targets: receives whatever the target queues (never signalling its wait fd,
// so the progress thread sleeps and the target drives the passes itself); sends are discarded.
#pragma once

#include <sys/eventfd.h>
#include <unistd.h>

#include <array>
#include <cstring>
#include <deque>
#include <mutex>
#include <vector>

#include "netdev/netdev.h"

namespace softrdma::fuzz {

class InjectNetdev : public netdev::Netdev {
 public:
  explicit InjectNetdev(netdev::IpAddr self) : addrs_{self}, efd_(eventfd(0, EFD_NONBLOCK)) {}
  ~InjectNetdev() override { close(efd_); }
  std::string name() const override { return "inject"; }
  std::string backend() const override { return "inject"; }
  std::uint32_t mtu() const override { return 4096 + 128; }
  std::span<const netdev::IpAddr> addresses() const override { return addrs_; }
  std::size_t send_batch(std::span<netdev::Packet* const> p) override { return p.size(); }
  std::size_t recv_batch(std::span<netdev::Packet* const> out) override {
    std::lock_guard lock(mu_);
    std::size_t n = 0;
    while (n < out.size() && !q_.empty()) {
      auto& [src, bytes] = q_.front();
      netdev::Packet& p = *out[n];
      if (bytes.size() <= p.cap) {
        if (!bytes.empty()) std::memcpy(p.data, bytes.data(), bytes.size());
        p.len = static_cast<std::uint32_t>(bytes.size());
        p.src = src;
        p.dst = addrs_[0];
        p.src_port = 0xC001;
        p.dst_port = netdev::kRoceV2Port;
        ++n;
      }
      q_.pop_front();
    }
    return n;
  }
  int wait_fd() const override { return efd_; }
  void inject(const netdev::IpAddr& src, std::vector<std::uint8_t> bytes) {
    std::lock_guard lock(mu_);
    q_.emplace_back(src, std::move(bytes));
  }
  std::size_t pending() {
    std::lock_guard lock(mu_);
    return q_.size();
  }

 private:
  std::array<netdev::IpAddr, 1> addrs_;
  int efd_;
  std::mutex mu_;
  std::deque<std::pair<netdev::IpAddr, std::vector<std::uint8_t>>> q_;
};

}  // namespace softrdma::fuzz
