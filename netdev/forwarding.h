// A Netdev decorator's base: forwards every call to the backend it wraps, so that a decorator
// overrides only what it changes.
#pragma once

#include <memory>
#include <string>

#include "netdev/netdev.h"

namespace softrdma::netdev {

class ForwardingNetdev : public Netdev {
 public:
  explicit ForwardingNetdev(std::unique_ptr<Netdev> inner) : inner_(std::move(inner)) {}
  Netdev& inner() const { return *inner_; }

  std::string name() const override { return inner_->name(); }
  std::string backend() const override { return inner_->backend(); }
  std::uint32_t mtu() const override { return inner_->mtu(); }
  std::span<const IpAddr> addresses() const override { return inner_->addresses(); }
  std::uint16_t roce_port() const override { return inner_->roce_port(); }
  std::size_t send_batch(std::span<Packet* const> p) override { return inner_->send_batch(p); }
  std::size_t recv_batch(std::span<Packet* const> p) override { return inner_->recv_batch(p); }
  int wait_fd() const override { return inner_->wait_fd(); }
  int next_timeout_ms() const override { return inner_->next_timeout_ms(); }
  void service() override { inner_->service(); }
  bool prepare_sleep(bool wake_me) override { return inner_->prepare_sleep(wake_me); }
  void require_icrc() override { inner_->require_icrc(); }
  Placement* placement() override { return inner_->placement(); }
  void set_fault_observer(FaultObserver o) override { inner_->set_fault_observer(std::move(o)); }
  int join_group(const IpAddr& g) override { return inner_->join_group(g); }
  int leave_group(const IpAddr& g) override { return inner_->leave_group(g); }
  Counters counters() const override { return inner_->counters(); }

 protected:
  // For a decorator whose backend must go before its own members (it may report while closing).
  void close_inner() { inner_.reset(); }

 private:
  std::unique_ptr<Netdev> inner_;
};

}  // namespace softrdma::netdev
