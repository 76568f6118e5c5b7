#include "lwtcp/faulty_port.h"

#include <span>

namespace softrdma::lwtcp {
namespace {

class FaultyPort final : public netdev::FramePort {
 public:
  FaultyPort(std::unique_ptr<netdev::FramePort> port, const netdev::FaultConfig& faults)
      : port_(std::move(port)), faults_(faults, counters_) {}

  ~FaultyPort() override { faults_.flush(emit_); }

  int frame_fd() const override { return port_->frame_fd(); }

  std::size_t recv_frames(const FrameSink& sink, std::size_t max) override {
    faults_.service(emit_);
    return port_->recv_frames(sink, max);
  }

  bool send_frame(const std::uint8_t* frame, std::size_t len) override {
    netdev::Packet p;
    p.data = const_cast<std::uint8_t*>(frame);  // read only: a corrupted frame is a copy
    p.len = static_cast<std::uint32_t>(len);
    p.cap = p.len;
    netdev::Packet* one = &p;
    faults_.process(std::span<netdev::Packet* const>(&one, 1), emit_);
    return true;  // a dropped frame is lost on the wire, not refused
  }

  void hold_sends() override { port_->hold_sends(); }
  // Large segments where the port takes them, cut by the stack (no offload here: each wire
  // segment meets the faults on its own).
  bool tcp_large_segments() const override { return port_->tcp_large_segments(); }
  void release_sends() override { port_->release_sends(); }
  wire::MacAddr frame_mac() const override { return port_->frame_mac(); }
  std::uint32_t frame_mtu() const override { return port_->frame_mtu(); }
  std::optional<std::uint16_t> frame_vlan() const override { return port_->frame_vlan(); }
  int frame_timeout_ms() override { return faults_.next_timeout_ms(); }

  std::vector<std::pair<std::string, std::uint64_t>> frame_counters() override {
    const auto load = [](const std::atomic<std::uint64_t>& c) {
      return c.load(std::memory_order_relaxed);
    };
    auto c = port_->frame_counters();
    c.insert(c.end(), {{"tcp_fault_dropped", load(counters_.fault_dropped)},
                       {"tcp_fault_duplicated", load(counters_.fault_duplicated)},
                       {"tcp_fault_reordered", load(counters_.fault_reordered)},
                       {"tcp_fault_corrupted", load(counters_.fault_corrupted)},
                       {"tcp_fault_delayed", load(counters_.fault_delayed)}});
    return c;
  }

 private:
  std::unique_ptr<netdev::FramePort> port_;
  netdev::AtomicCounters counters_;
  netdev::FaultInjector faults_;
  const netdev::FaultInjector::Emit emit_ = [this](std::span<const netdev::Packet> pkts) {
    for (const netdev::Packet& p : pkts) port_->send_frame(p.data, p.len);
  };
};

}  // namespace

std::unique_ptr<netdev::FramePort> with_faults(std::unique_ptr<netdev::FramePort> port,
                                               const netdev::FaultConfig& faults) {
  if (!faults.any()) return port;
  return std::make_unique<FaultyPort>(std::move(port), faults);
}

}  // namespace softrdma::lwtcp
