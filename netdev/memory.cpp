#include "netdev/memory.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <system_error>

#include "netdev/datagram_bounds.h"
#include "netdev/icrc_pseudo.h"
#include "wire/net.h"
#include "wire/roce_opcode.h"

namespace softrdma::netdev {

bool MemoryFabric::attach(const IpAddr& addr, MemoryNetdev* dev) {
  std::unique_lock lock(mu_);
  return devices_.emplace(addr, dev).second;
}

void MemoryFabric::detach(const IpAddr& addr) {
  std::unique_lock lock(mu_);
  devices_.erase(addr);
}

bool MemoryFabric::deliver(const Packet& p) {
  std::shared_lock lock(mu_);  // the device cannot leave while we hold this
  if (is_multicast(p.dst)) {
    auto g = groups_.find(p.dst);
    if (g == groups_.end() || g->second.empty()) return false;
    for (MemoryNetdev* member : g->second) member->enqueue(p);
    return true;
  }
  auto it = devices_.find(p.dst);
  if (it == devices_.end()) return false;
  it->second->enqueue(p);
  return true;
}

int MemoryFabric::join(const IpAddr& group, MemoryNetdev* dev, std::size_t limit) {
  std::unique_lock lock(mu_);
  std::size_t mine = 0;
  for (const auto& [g, members] : groups_) {
    if (std::find(members.begin(), members.end(), dev) == members.end()) continue;
    if (g == group) return 0;
    ++mine;
  }
  if (mine >= limit) return ENOBUFS;
  groups_[group].push_back(dev);
  return 0;
}

void MemoryFabric::leave(const IpAddr& group, MemoryNetdev* dev) {
  std::unique_lock lock(mu_);
  auto g = groups_.find(group);
  if (g == groups_.end()) return;
  std::erase(g->second, dev);
  if (g->second.empty()) groups_.erase(g);
}

void MemoryFabric::leave_all(MemoryNetdev* dev) {
  std::unique_lock lock(mu_);
  for (auto g = groups_.begin(); g != groups_.end();) {
    std::erase(g->second, dev);
    g = g->second.empty() ? groups_.erase(g) : std::next(g);
  }
}

MemoryNetdev::MemoryNetdev(std::shared_ptr<MemoryFabric> fabric, IpAddr addr, std::uint32_t mtu,
                           FaultConfig faults)
    : fabric_(std::move(fabric)), addrs_{addr}, mtu_(mtu) {
  if (faults.any()) faults_ = std::make_unique<FaultInjector>(faults, counters_);
  efd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (efd_ < 0) throw std::system_error(errno, std::generic_category(), "eventfd");
  if (!fabric_->attach(addr, this)) {
    close(efd_);
    throw std::invalid_argument("mem:" + addr.str() + ": address already on the fabric");
  }
}

MemoryNetdev::~MemoryNetdev() {
  if (faults_) faults_->flush([this](std::span<const Packet> p) { transmit(p); });
  fabric_->leave_all(this);
  fabric_->detach(addrs_[0]);
  close(efd_);
}

void MemoryNetdev::enqueue(const Packet& p) {
  std::lock_guard lock(qmu_);
  if (queue_.size() >= fabric_->queue_limit()) {
    bump(counters_.rx_dropped);
    if (observer_) observer_(FaultEvent::kRxQueueFull, p);
    return;
  }
  Datagram d;
  if (!spare_.empty()) {
    d.bytes = std::move(spare_.back());
    spare_.pop_back();
  }
  d.bytes.assign(p.data, p.data + p.len);
  d.src = p.src;
  d.dst = p.dst;
  d.src_port = p.src_port;
  d.dst_port = p.dst_port;
  d.traffic_class = p.traffic_class;
  d.hop_limit = p.hop_limit;
  queue_.push_back(std::move(d));
  if (queue_.size() == 1) {
    // The eventfd counter is non-zero exactly while the queue is non-empty.
    const std::uint64_t one = 1;
    [[maybe_unused]] ssize_t n = write(efd_, &one, sizeof one);
  }
}

void MemoryNetdev::transmit(std::span<const Packet> pkts) {
  for (const Packet& p : pkts) {
    bump(counters_.tx_packets);
    bump(counters_.tx_bytes, p.len);
    if (!fabric_->deliver(p)) bump(counters_.tx_dropped);
  }
}

std::size_t MemoryNetdev::send_batch(std::span<Packet* const> pkts) {
  const std::uint32_t max_len = max_datagram_for_mtu(mtu_, addrs_[0].is_v4());
  std::size_t n = 0;
  for (Packet* p : pkts) {
    if (!sendable(*p, max_len)) break;
    p->src = addrs_[0];  // the address this device sends from, whatever the caller put
    p->reset_ipv4_id();
    fill_icrc(*p);
    ++n;
  }
  return emit_batch(faults_.get(), pkts, n, counters_,
                    [this](std::span<const Packet> p) { transmit(p); });
}

std::size_t MemoryNetdev::recv_batch(std::span<Packet* const> pkts) {
  std::size_t n = 0;
  std::lock_guard lock(qmu_);
  while (n < pkts.size() && !queue_.empty()) {
    Datagram d = std::move(queue_.front());
    queue_.pop_front();
    Packet& out = *pkts[n];
    Packet view;
    view.src = d.src;
    view.dst = d.dst;
    view.src_port = d.src_port;
    view.dst_port = d.dst_port;
    view.traffic_class = d.traffic_class;
    view.hop_limit = d.hop_limit;
    view.data = d.bytes.data();
    view.len = static_cast<std::uint32_t>(d.bytes.size());
    view.cap = view.len;
    if (!fits(view, out)) {
      bump(counters_.rx_malformed);
      if (observer_) observer_(FaultEvent::kRxMalformed, view);
    } else if (!check_icrc(view)) {
      bump(counters_.rx_icrc_errors);
      if (observer_) observer_(FaultEvent::kRxIcrc, view);
    } else {
      hand_over(view, out);
      ++n;
    }
    if (spare_.size() < 256) spare_.push_back(std::move(d.bytes));
  }
  if (queue_.empty()) {
    std::uint64_t v;
    [[maybe_unused]] ssize_t r = read(efd_, &v, sizeof v);  // EAGAIN if already drained
  }
  return n;
}

int MemoryNetdev::next_timeout_ms() const {
  return faults_ ? faults_->next_timeout_ms() : -1;
}

void MemoryNetdev::service() {
  if (faults_) faults_->service([this](std::span<const Packet> p) { transmit(p); });
}

void MemoryNetdev::set_fault_observer(FaultObserver observer) {
  if (faults_) faults_->set_observer(observer);
  std::lock_guard lock(qmu_);
  observer_ = std::move(observer);
}

int MemoryNetdev::join_group(const IpAddr& group) {
  if (!is_multicast(group) || group.is_v4() != addrs_[0].is_v4()) return EINVAL;
  return fabric_->join(group, this, kMaxGroups);
}

int MemoryNetdev::leave_group(const IpAddr& group) {
  if (!is_multicast(group) || group.is_v4() != addrs_[0].is_v4()) return EINVAL;
  fabric_->leave(group, this);
  return 0;
}

std::size_t MemoryNetdev::queued() const {
  std::lock_guard lock(qmu_);
  return queue_.size();
}

}  // namespace softrdma::netdev
