// A netdev whose receive side is whatever the test queues, from any address; what the device
// sends is discarded, or kept for the test to read (Options::keep_sent). With Options::wake the
// wait fd is signalled while packets are queued (the progress thread takes them); without, it
// never is (a fuzz target drives the passes itself).
#pragma once

#include <sys/eventfd.h>
#include <unistd.h>

#include <array>
#include <cstring>
#include <deque>
#include <mutex>
#include <vector>

#include "netdev/netdev.h"

namespace softrdma::test {

class InjectNetdev : public netdev::Netdev {
 public:
  struct Options {
    std::uint32_t mtu = 9000;
    bool wake = true;
    bool keep_sent = true;
  };
  explicit InjectNetdev(netdev::IpAddr self) : InjectNetdev(self, Options{}) {}
  InjectNetdev(netdev::IpAddr self, Options o)
      : opts_(o), addrs_{self}, efd_(eventfd(0, EFD_NONBLOCK)) {}
  ~InjectNetdev() override { close(efd_); }
  std::string name() const override { return "inject"; }
  std::string backend() const override { return "inject"; }
  std::uint32_t mtu() const override { return opts_.mtu; }
  std::span<const netdev::IpAddr> addresses() const override { return addrs_; }
  std::size_t send_batch(std::span<netdev::Packet* const> p) override {
    if (!opts_.keep_sent) return p.size();
    std::lock_guard lock(mu_);
    for (const netdev::Packet* q : p) sent_.emplace_back(q->data, q->data + q->len);
    return p.size();
  }
  // What the device sent (BTH first), with Options::keep_sent.
  std::vector<std::vector<std::uint8_t>> sent() {
    std::lock_guard lock(mu_);
    return sent_;
  }
  // The BTH P_Keys of what the device sent.
  std::vector<std::uint16_t> sent_pkeys() {
    std::vector<std::uint16_t> keys;
    for (const auto& b : sent()) {
      if (b.size() >= 4) keys.push_back(static_cast<std::uint16_t>(b[2] << 8 | b[3]));
    }
    return keys;
  }
  std::size_t recv_batch(std::span<netdev::Packet* const> out) override {
    std::lock_guard lock(mu_);
    std::size_t n = 0;
    while (n < out.size() && !q_.empty()) {
      const auto& [src, bytes] = q_.front();
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
    std::uint64_t v;
    if (opts_.wake && q_.empty()) (void)!read(efd_, &v, sizeof v);
    return n;
  }
  int wait_fd() const override { return efd_; }
  void inject(const netdev::IpAddr& src, std::vector<std::uint8_t> bytes) {
    std::lock_guard lock(mu_);
    q_.emplace_back(src, std::move(bytes));
    const std::uint64_t one = 1;
    if (opts_.wake) (void)!write(efd_, &one, sizeof one);
  }
  std::size_t pending() {
    std::lock_guard lock(mu_);
    return q_.size();
  }

 private:
  Options opts_;
  std::array<netdev::IpAddr, 1> addrs_;
  int efd_;
  std::mutex mu_;
  std::deque<std::pair<netdev::IpAddr, std::vector<std::uint8_t>>> q_;
  std::vector<std::vector<std::uint8_t>> sent_;
};

}  // namespace softrdma::test
