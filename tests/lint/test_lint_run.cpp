#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "lint/lint.h"
#include "pcap/reader.h"

using namespace softrdma;

namespace {
std::string conformance(const char* name) {
  const char* dir = std::getenv("SOFTRDMA_CONFORMANCE");
  return std::string(dir ? dir : "../shared/conformance") + "/" + name;
}
std::vector<std::uint8_t> slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}
}  // namespace

TEST(LintRun, InMemoryCaptureGivesTheSameViolationsAsTheFile) {
  const auto bytes = slurp(conformance("roce-good-badicrc-truncated.pcap"));
  ASSERT_FALSE(bytes.empty()) << "conformance captures not found; set SOFTRDMA_CONFORMANCE";
  std::string error;
  auto reader = pcap::Reader::open_memory(bytes, error);
  ASSERT_TRUE(reader) << error;
  lint::Report report;
  EXPECT_EQ(lint::run(*reader, lint::Options{}, report, error), 1);
  ASSERT_EQ(report.violations().size(), 2u);
  EXPECT_EQ(report.violations()[0].frame, 2u);
  EXPECT_EQ(report.violations()[0].rule, "roce.icrc");
  EXPECT_EQ(report.violations()[1].frame, 3u);
  EXPECT_EQ(report.violations()[1].rule, "roce.truncated");
}

TEST(LintRun, EveryTruncationOfACaptureIsHandled) {
  const auto bytes = slurp(conformance("roce-good-badicrc-truncated.pcap"));
  ASSERT_FALSE(bytes.empty());
  int damaged = 0;
  for (std::size_t len = 1; len < bytes.size(); ++len) {
    std::vector<std::uint8_t> cut(bytes.begin(), bytes.begin() + static_cast<long>(len));
    std::string error;
    auto reader = pcap::Reader::open_memory(cut, error);
    if (!reader) {
      EXPECT_FALSE(error.empty());
      continue;
    }
    lint::Report report;
    const int rc = lint::run(*reader, lint::Options{}, report, error);
    EXPECT_GE(rc, 0);
    EXPECT_LE(rc, 2);
    if (rc == 2) {
      ++damaged;
      EXPECT_FALSE(error.empty());
    }
  }
  EXPECT_GT(damaged, 0);
}
