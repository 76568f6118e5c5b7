// A stream that takes less than it is offered, ending exactly at an FPDU's end (what a full
// kernel socket often does: FPDUs are sized to its segments), leaves nothing pending in the QP:
// the QP must still wait for the stream to be writable and carry on, not for the next post. A
// sender that posted its last work requests and then only polled its CQ stalled (qperf rc_bw
// over lwIP hung at its end, about one run in four).
#include <sys/eventfd.h>

#include <algorithm>
#include <array>
#include <atomic>

#include "iwarp/kernel_tcp_stream.h"
#include "tests/iwarp/harness.h"

namespace softrdma::iwarp::test {
namespace {

// A kernel TCP stream whose send takes only the first FPDU of a batch of several (its ULPDU
// length, the ULPDU, padding to 4 bytes, the CRC field: present, zero, without CRC); a single
// buffer (the MPA request and reply) goes whole.
class OneFpduStream final : public ByteStream {
 public:
  explicit OneFpduStream(std::unique_ptr<ByteStream> inner) : inner_(std::move(inner)) {}
  StreamIo send(std::span<const iovec> batch) override {
    if (batch.size() < 2 || batch[0].iov_len < 2) return inner_->send(batch);
    const auto* head = static_cast<const std::uint8_t*>(batch[0].iov_base);
    const std::size_t ulpdu = std::size_t{head[0]} << 8 | head[1];
    const std::size_t fpdu = ((2 + ulpdu + 3) & ~std::size_t{3}) + 4;
    std::array<iovec, 64> cut{};
    std::size_t n = 0, left = fpdu, total = 0;
    for (const iovec& v : batch) total += v.iov_len;
    for (const iovec& v : batch) {
      if (left == 0 || n == cut.size()) break;
      cut[n] = iovec{v.iov_base, std::min(left, v.iov_len)};
      left -= cut[n++].iov_len;
    }
    if (left == 0 && fpdu < total) ++cuts;
    return inner_->send(std::span<const iovec>(cut.data(), n));
  }
  StreamIo recv(std::span<std::uint8_t> into) override { return inner_->recv(into); }
  int wait_fd() const override { return inner_->wait_fd(); }
  void shutdown_send() override { inner_->shutdown_send(); }
  void abort() override { inner_->abort(); }
  void close() override { inner_->close(); }
  bool endpoints(TcpEndpoint& l, TcpEndpoint& r) const override { return inner_->endpoints(l, r); }
  std::uint32_t mss() const override { return inner_->mss(); }

  static inline std::atomic<int> cuts{0};  // batches cut at an FPDU's end

 private:
  std::unique_ptr<ByteStream> inner_;
};

// Hands the device OneFpduStreams over the kernel sockets the test connects; no sockets of its
// own.
class OneFpduTcp final : public UserTcp {
 public:
  OneFpduTcp() : idle_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}
  ~OneFpduTcp() override { ::close(idle_); }
  int wait_fd() const override { return idle_; }
  int next_timeout_ms() override { return -1; }
  void poll() override {}
  std::unique_ptr<ByteStream> stream(int handle) override {
    std::unique_ptr<ByteStream> k;
    if (open_kernel_tcp_stream(handle, k) != 0) return nullptr;
    return std::make_unique<OneFpduStream>(std::move(k));
  }
  int socket() override { return -EOPNOTSUPP; }
  int bind(int, const sockaddr*) override { return EOPNOTSUPP; }
  int listen(int, int) override { return EOPNOTSUPP; }
  int connect(int, const sockaddr*) override { return EOPNOTSUPP; }
  int accept(int) override { return -EOPNOTSUPP; }
  int error(int) override { return EOPNOTSUPP; }
  bool names(int, sockaddr_storage&, sockaddr_storage&) override { return false; }
  void close(int) override {}
  sockaddr_storage address() const override { return {}; }
  bool owns(const sockaddr*) const override { return false; }
  std::vector<std::pair<std::string, std::uint64_t>> counters() override { return {}; }

 private:
  int idle_;
};

TEST(IwarpShortWrite, AWriteEndingAtAnFpdusEndWaitsForWritableNotForTheNextPost) {
  Side a, b;
  DeviceConfig with_stub;
  with_stub.user_tcp = std::make_shared<OneFpduTcp>();
  a.init(with_stub);
  b.init(DeviceConfig{});
  MpaParams p;  // revision 2, no CRC, no markers
  p.crc = false;
  p.markers = false;
  TcpPair tcp;
  ASSERT_TRUE(connect_pair(a, b, p, p, tcp));
  constexpr int kMessages = 64;
  constexpr std::uint32_t kLen = 512;  // one FPDU each
  for (int i = 0; i < kMessages; ++i) ASSERT_EQ(b.post_recv(i, i * kLen, kLen), 0);
  // All in one post: the QP is pumped once from here, and nothing is posted after it.
  std::vector<core::Sge> sges;
  for (int i = 0; i < kMessages; ++i) sges.push_back(a.sge(i * kLen, kLen));
  std::vector<core::SendWr> wrs(kMessages);
  for (int i = 0; i < kMessages; ++i) {
    wrs[i].wr_id = i;
    wrs[i].opcode = core::WrOpcode::kSend;
    wrs[i].send_flags = core::kSendSignaled;
    wrs[i].sg_list = std::span<const core::Sge>(&sges[i], 1);
  }
  const int before = OneFpduStream::cuts.load();
  ASSERT_EQ(a.qp->post_send(wrs), 0);
  // Completions polled from the CQ alone, as an application does (no poll_progress).
  int done = 0;
  EXPECT_TRUE(wait_until(
      [&] {
        core::Wc wc;
        while (a.scq->poll(std::span<core::Wc>(&wc, 1)) == 1) {
          EXPECT_EQ(wc.status, core::WcStatus::kSuccess);
          ++done;
        }
        return done == kMessages;
      },
      5s, 1ms))
      << done << " of " << kMessages << " sends completed";
  EXPECT_GT(OneFpduStream::cuts.load(), before) << "the stream never cut a batch";
  for (int i = 0; i < kMessages; ++i) {
    auto wc = b.wait_wc(b.rcq);
    ASSERT_TRUE(wc) << "receive " << i;
    EXPECT_EQ(wc->byte_len, kLen);
  }
}

}  // namespace
}  // namespace softrdma::iwarp::test
