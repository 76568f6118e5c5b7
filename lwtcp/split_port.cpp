#include "lwtcp/split_port.h"

#include <sys/epoll.h>
#include <unistd.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace softrdma::lwtcp {
namespace {

class SplitPort final : public netdev::FramePort {
 public:
  SplitPort(std::unique_ptr<netdev::FramePort> main, std::unique_ptr<netdev::FramePort> side,
            int epfd)
      : main_(std::move(main)), side_(std::move(side)), epfd_(epfd) {}
  ~SplitPort() override { ::close(epfd_); }

  int frame_fd() const override { return epfd_; }
  std::size_t recv_frames(const FrameSink& sink, std::size_t max) override {
    const std::size_t n = main_->recv_frames(sink, max);
    steered_ += n;
    return n < max ? n + side_->recv_frames(sink, max - n) : n;
  }
  bool send_frame(const std::uint8_t* frame, std::size_t len) override {
    return main_->send_frame(frame, len);
  }
  bool tcp_segmentation() const override { return main_->tcp_segmentation(); }
  bool tcp_large_segments() const override { return main_->tcp_large_segments(); }
  bool send_tcp_segments(const std::uint8_t* frame, std::size_t len, std::uint16_t mss) override {
    return main_->send_tcp_segments(frame, len, mss);
  }
  void hold_sends() override { main_->hold_sends(); }
  void release_sends() override { main_->release_sends(); }
  bool steer_tcp_port(std::uint16_t port, bool ours) override {
    return main_->steer_tcp_port(port, ours);
  }
  wire::MacAddr frame_mac() const override { return main_->frame_mac(); }
  std::uint32_t frame_mtu() const override { return main_->frame_mtu(); }
  std::optional<std::uint16_t> frame_vlan() const override { return main_->frame_vlan(); }
  int frame_timeout_ms() override { return main_->frame_timeout_ms(); }
  // Both ports' counters, those of one name added up, and tcp_rx_steered: the frames that came
  // through `main` (its program's steering).
  std::vector<std::pair<std::string, std::uint64_t>> frame_counters() override {
    std::map<std::string, std::uint64_t> sum{{"tcp_rx_steered", steered_}};
    for (auto* p : {main_.get(), side_.get()}) {
      for (auto& [name, value] : p->frame_counters()) sum[name] += value;
    }
    return {sum.begin(), sum.end()};
  }

 private:
  std::unique_ptr<netdev::FramePort> main_, side_;
  int epfd_;
  std::uint64_t steered_ = 0;  // recv_frames runs on one thread at a time
};

}  // namespace

std::unique_ptr<netdev::FramePort> split_port(std::unique_ptr<netdev::FramePort> main,
                                              std::unique_ptr<netdev::FramePort> side) {
  const int epfd = epoll_create1(EPOLL_CLOEXEC);
  if (epfd < 0) return nullptr;
  for (auto* p : {main.get(), side.get()}) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = p->frame_fd();
    if (epoll_ctl(epfd, EPOLL_CTL_ADD, p->frame_fd(), &ev) != 0) {
      ::close(epfd);
      return nullptr;
    }
  }
  return std::make_unique<SplitPort>(std::move(main), std::move(side), epfd);
}

}  // namespace softrdma::lwtcp
