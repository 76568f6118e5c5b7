// ibv_destroy_qp against a progress pass under way: a receive completion the pass holds until
// its transmit never appears after destroy_qp returned, and destroy_qp does not wait for the
// pass. A netdev that stops the pass in its transmit makes the interleaving certain.
#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

#include "netdev/forwarding.h"
#include "tests/rxe/fixture.h"

namespace softrdma::rxe::test {
namespace {

// A MemoryNetdev whose send_batch, once armed, blocks until opened: the progress pass that
// sends is then stopped between its receive (completions held) and their hand-out.
class GatedNetdev : public netdev::ForwardingNetdev {
 public:
  using ForwardingNetdev::ForwardingNetdev;
  std::size_t send_batch(std::span<netdev::Packet* const> pkts) override {
    std::unique_lock lock(mu_);
    if (armed_) {
      stopped_ = true;
      cv_.notify_all();
      cv_.wait(lock, [&] { return !armed_; });
    }
    lock.unlock();
    return ForwardingNetdev::send_batch(pkts);
  }

  void arm() {
    std::lock_guard lock(mu_);
    armed_ = true;
    stopped_ = false;
  }
  bool stopped() {
    std::lock_guard lock(mu_);
    return stopped_;
  }
  void open() {
    std::lock_guard lock(mu_);
    armed_ = false;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool armed_ = false, stopped_ = false;
};

class DestroyQp : public ::testing::Test {
 protected:
  void SetUp() override {
    fabric = std::make_shared<netdev::MemoryFabric>();
    a = std::make_unique<Node>(fabric, 1);
    auto gated = std::make_unique<GatedNetdev>(
        std::make_unique<netdev::MemoryNetdev>(fabric, addr(2), 9000));
    gate = gated.get();
    b = std::make_unique<Node>(std::move(gated));
  }
  void TearDown() override { gate->open(); }

  // qa (a new RC QP of a) connected to `qb`, a receive posted on qb, then a SEND from qa that
  // b's pass receives: the pass holds its receive completion and stops before sending the ACK.
  void stop_b_holding_a_completion_for(Qp* qb) {
    qa = make_qp(*a, QpType::kRc);
    connect(*a, qa, *b, qb);
    rb = std::make_unique<Buffer>(*b, 64, kAccessLocalWrite);
    const Sge rs = rb->sge(0, 64);
    ASSERT_EQ(post_recv(qb, 7, std::span(&rs, 1)), 0);
    gate->arm();
    sb = std::make_unique<Buffer>(*a, 64, kAllAccess, 0x5A);
    const Sge ss = sb->sge(0, 32);
    ASSERT_EQ(qa->post_send(wr(WrOpcode::kSend, 1, std::span(&ss, 1))), 0);
    ASSERT_TRUE(wait_until([&] { return gate->stopped(); }));
  }
  // Runs `destroy` on a thread while b's pass is stopped, then lets the pass go; `destroy`'s
  // result, or -1 when it did not return while the pass was stopped.
  int destroy_during_the_pass(const std::function<int()>& destroy) {
    std::atomic<int> rc{-1};
    std::thread destroyer([&] { rc = destroy(); });
    const bool returned = wait_until([&] { return rc.load() != -1; });
    gate->open();
    destroyer.join();
    return returned ? rc.load() : -1;
  }

  std::shared_ptr<netdev::MemoryFabric> fabric;
  std::unique_ptr<Node> a, b;
  GatedNetdev* gate = nullptr;
  Qp* qa = nullptr;
  std::unique_ptr<Buffer> rb, sb;
};

TEST_F(DestroyQp, NoCompletionOfItAppearsAfterItReturns) {
  Qp* qb = make_qp(*b, QpType::kRc);
  const std::uint32_t qbn = qb->qpn();
  ASSERT_NO_FATAL_FAILURE(stop_b_holding_a_completion_for(qb));
  ASSERT_EQ(b->cq->count(), 0u) << "the pass was to hold the receive completion";
  // destroy_qp returns while the pass is stopped: it does not wait for it.
  EXPECT_EQ(destroy_during_the_pass([&] { return b->dev->destroy_qp(qb); }), 0)
      << "destroy_qp waited for the progress pass, or failed";

  // Once the stopped pass is over (a pass of our own runs only then), the CQ holds nothing of
  // the destroyed QP.
  ASSERT_TRUE(wait_until([&] { return b->dev->poll_progress(); }));
  Wc wc[8];
  const int n = b->cq->poll(wc);
  for (int i = 0; i < n; ++i) EXPECT_NE(wc[i].qp_num, qbn) << "a completion after destroy_qp";
  EXPECT_EQ(n, 0);
}

TEST_F(DestroyQp, ItsCqCanGoWhileAPassHeldACompletionForIt) {
  // The held completion named the CQ too: destroying the CQ after the QP must leave the pass
  // nothing to write into (under ASan a write into the freed CQ fails the test).
  int err = 0;
  Cq* rcq = b->dev->create_cq(16, &err);
  ASSERT_TRUE(rcq);
  QpCap cap = default_cap();
  Qp* qb = b->dev->create_qp(b->pd, QpType::kRc, b->cq, rcq, nullptr, cap, false, &err);
  ASSERT_TRUE(qb);
  ASSERT_NO_FATAL_FAILURE(stop_b_holding_a_completion_for(qb));
  EXPECT_EQ(destroy_during_the_pass([&] {
              const int q = b->dev->destroy_qp(qb);
              return q ? q : b->dev->destroy_cq(rcq);
            }),
            0);
  ASSERT_TRUE(wait_until([&] { return b->dev->poll_progress(); }));
  // a's SEND was acknowledged all the same: the pass went on normally.
  auto wc = wait_wc(a->cq, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, WcStatus::kSuccess);
}

}  // namespace
}  // namespace softrdma::rxe::test
