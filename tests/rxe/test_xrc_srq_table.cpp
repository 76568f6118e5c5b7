// core::XrcSrqTable, where an XRC target finds the SRQ an XRCETH names: numbers that share a
// slot are told apart, a new SRQ takes a number whose slot is free, and unpublish() returns only
// once the last hold on the SRQ is dropped (what lets ibv_destroy_srq free it).
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "core/srq.h"
#include "core/xrc_srq_table.h"
#include "tests/wait_until.h"

namespace softrdma::core {
namespace {

struct Published {
  Srq srq{nullptr, 4, 1, 0};
  Published(XrcSrqTable& t, std::uint32_t from) {
    srq.srqn = t.free_number(from);
    t.publish(&srq);
  }
};

TEST(XrcSrqTable, FindsAnSrqByItsNumberOnly) {
  XrcSrqTable t(4);
  Published a(t, 1);
  EXPECT_EQ(a.srq.srqn, 1u);
  EXPECT_EQ(t.find(1).get(), &a.srq);
  EXPECT_EQ(t.find(5).get(), nullptr);  // the same slot, another number
  EXPECT_EQ(t.find(0).get(), nullptr);
  // From 5 on: slot 1 is taken, so 6; then 7, 8 (slot 0); then every slot is taken.
  Published b(t, 5), c(t, 7), d(t, 8);
  EXPECT_EQ(b.srq.srqn, 6u);
  EXPECT_EQ(c.srq.srqn, 7u);
  EXPECT_EQ(d.srq.srqn, 8u);
  EXPECT_EQ(t.free_number(9), 0u);
  EXPECT_EQ(t.find(8).get(), &d.srq);
  t.unpublish(&b.srq);
  EXPECT_EQ(t.find(6).get(), nullptr);
  EXPECT_EQ(t.free_number(9), 10u);  // slot 2 again
}

TEST(XrcSrqTable, UnpublishWaitsForTheLastHold) {
  XrcSrqTable t(8);
  Published a(t, 3);
  XrcSrqTable::Hold h = t.find(3);
  ASSERT_EQ(h.get(), &a.srq);
  XrcSrqTable::Hold moved = std::move(h);  // the hold moves with its owner
  EXPECT_EQ(h.get(), nullptr);
  std::atomic<bool> returned{false};
  std::thread destroyer([&] {
    t.unpublish(&a.srq);
    returned = true;
  });
  // Out of the table at once, for new readers...
  EXPECT_TRUE(softrdma::test::wait_until([&] { return !t.find(3).get(); }));
  // ...but not returned while a reader still holds the SRQ.
  EXPECT_FALSE(returned);
  moved.reset();
  destroyer.join();
  EXPECT_TRUE(returned);
}

}  // namespace
}  // namespace softrdma::core
