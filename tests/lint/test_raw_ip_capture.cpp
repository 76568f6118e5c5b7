// Raw-IP captures (LINKTYPE_RAW, 101): libpcap reports them as DLT_RAW (12 on Linux), which lint
// refused as an unsupported link type; the reader gives wire/ the file's LINKTYPE value.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "lint/lint.h"
#include "pcap/reader.h"
#include "wire/roce_frame.h"

using namespace softrdma;

namespace {

// A classic pcap file of one raw IPv4 frame: a valid RoCEv2 SEND ONLY.
std::string write_raw_capture() {
  wire::RoceAddr a;
  a.src4 = 0xC0000201;
  a.dst4 = 0xC0000202;
  wire::RoceHeaders h;
  h.bth.opcode = wire::op::kRcSendOnly;
  h.bth.dest_qp = 0x11;
  h.bth.psn = 7;
  std::vector<std::uint8_t> payload(40, 7), frame(200);
  frame.resize(*wire::build_roce_frame(frame, a, h, payload));
  const std::string path = "/tmp/softrdma-raw-ip-" + std::to_string(getpid()) + ".pcap";
  std::FILE* f = std::fopen(path.c_str(), "wb");
  const std::uint32_t file_hdr[6] = {0xA1B2C3D4, 0x00040002, 0, 0, 262144, 101};
  const auto n = static_cast<std::uint32_t>(frame.size());
  const std::uint32_t rec_hdr[4] = {1700000000, 0, n, n};
  std::fwrite(file_hdr, sizeof file_hdr, 1, f);
  std::fwrite(rec_hdr, sizeof rec_hdr, 1, f);
  std::fwrite(frame.data(), 1, frame.size(), f);
  std::fclose(f);
  return path;
}

}  // namespace

TEST(RawIpCapture, ReadsAsLinktypeRawAndIsLinted) {
  const std::string path = write_raw_capture();
  std::string error;
  auto r = pcap::Reader::open(path, error);
  ASSERT_TRUE(r) << error;
  EXPECT_EQ(r->linktype(), static_cast<int>(wire::LinkType::kRaw));
  lint::Report report;
  EXPECT_EQ(lint::run(path, lint::Options{}, report, error), 0) << error;
  EXPECT_EQ(report.counters().packets, 1u);
  EXPECT_TRUE(report.violations().empty());
  unlink(path.c_str());
}
