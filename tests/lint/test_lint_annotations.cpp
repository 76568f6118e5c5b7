// lint and softrdma's trace annotations: a frame the receiver discarded (drop=…) is
// not judged; without the annotation the same frame is a violation.
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "lint/lint.h"
#include "pcap/pcapng_writer.h"
#include "wire/roce_frame.h"

using namespace softrdma;

namespace {

std::vector<std::uint8_t> send_only(std::uint32_t psn) {
  wire::RoceAddr a;
  a.src4 = 0xC0000201;
  a.dst4 = 0xC0000202;
  a.eth = wire::Ethernet{};
  wire::RoceHeaders h;
  h.bth.opcode = wire::op::kRcSendOnly;
  h.bth.dest_qp = 0x11;
  h.bth.psn = psn;
  h.bth.ack_req = true;
  std::vector<std::uint8_t> payload(40, 7), frame(200);
  frame.resize(*wire::build_roce_frame(frame, a, h, payload));
  return frame;
}

lint::Report lint_file(bool annotate) {
  const std::string path =
      "/tmp/softrdma-lint-ann-" + std::to_string(getpid()) + (annotate ? "a" : "b") + ".pcapng";
  {
    std::string error;
    auto w = pcap::PcapngWriter::open(path, error);
    EXPECT_TRUE(w) << error;
    const std::uint32_t ifc = w->add_interface("softroce0", 1, 0);
    auto good = send_only(100);
    auto bad = send_only(101);
    bad[60] ^= 0x10;  // corrupted in flight: the receiver's ICRC check drops it
    auto next = send_only(101);  // the resend
    const std::uint64_t t = 1'700'000'000'000'000'000ull;
    w->write(ifc, t, wire::Bytes(good), static_cast<std::uint32_t>(good.size()), 1,
             "softrdma: dir=rx dev=softroce0 qp=0x000011");
    w->write(ifc, t + 1000, wire::Bytes(bad), static_cast<std::uint32_t>(bad.size()), 1,
             annotate ? "softrdma: dir=rx dev=softroce0 qp=0x000011 drop=icrc" : "");
    w->write(ifc, t + 2000, wire::Bytes(next), static_cast<std::uint32_t>(next.size()), 1,
             "softrdma: dir=rx dev=softroce0 qp=0x000011");
    w->flush();
  }
  lint::Report report;
  std::string error;
  lint::run(path, lint::Options{}, report, error);
  unlink(path.c_str());
  return report;
}

}  // namespace

TEST(LintAnnotations, FramesTheReceiverDroppedAreNotJudged) {
  const lint::Report with = lint_file(true);
  EXPECT_EQ(with.counters().packets, 3u);
  EXPECT_EQ(with.counters().excused, 1u);
  EXPECT_TRUE(with.violations().empty()) << with.violations()[0].rule;
  const lint::Report without = lint_file(false);
  EXPECT_EQ(without.counters().excused, 0u);
  ASSERT_FALSE(without.violations().empty());
  EXPECT_EQ(without.violations()[0].rule, "roce.icrc");
  EXPECT_EQ(without.violations()[0].frame, 2u);
}
