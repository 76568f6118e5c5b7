// The trace of an iWARP QP is its TCP stream as on the wire: tshark decodes MPA, DDP and
// RDMAP from it with no malformed frame ("Good CRC32" on every FPDU when CRC is on, none bad)
// and `softrdma lint` finds no violation, for MPA revision 1 and 2, with and without CRC and
// markers.
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "pcap/pcapng_writer.h"
#include "tests/iwarp/harness.h"

namespace softrdma::iwarp::test {
namespace {

using core::WrOpcode;

std::string run(const std::string& cmd, int* status = nullptr) {
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int st = ::pclose(p);
  if (status) *status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return out;
}

std::size_t count(const std::string& hay, const std::string& needle) {
  std::size_t n = 0;
  for (std::size_t at = hay.find(needle); at != std::string::npos; at = hay.find(needle, at + 1)) {
    ++n;
  }
  return n;
}

struct TraceConfig {
  std::uint8_t revision;
  bool crc;
  bool markers;
};

class IwarpTrace : public testing::TestWithParam<TraceConfig> {};

TEST_P(IwarpTrace, TsharkDecodesItAndLintAcceptsIt) {
  if (std::string(SOFTRDMA_TSHARK).empty()) GTEST_SKIP() << "tshark is not installed";
  const TraceConfig c = GetParam();
  // The pid keeps concurrent runs (two builds' suites, say) off each other's file.
  const std::string path = testing::TempDir() + "iwarp_trace_" + std::to_string(getpid()) + "_" +
                           std::to_string(c.revision) + (c.crc ? "c" : "") +
                           (c.markers ? "m" : "") + ".pcapng";
  std::string error;
  pcap::PcapngOptions opts;
  opts.per_process_name = false;
  std::shared_ptr<pcap::PcapngWriter> writer = pcap::PcapngWriter::open(path, error, opts);
  ASSERT_TRUE(writer) << error;
  {
    TcpPair tcp;
    Side a, b;
    DeviceConfig ca;
    ca.trace = writer;
    ca.tx.max_fpdu = 1460;  // Ethernet-sized frames, as tshark and lint expect from a NIC
    DeviceConfig cb;
    cb.tx.max_fpdu = 1460;
    a.init(ca);
    b.init(cb);
    MpaParams p;
    p.revision = c.revision;
    p.crc = c.crc;
    p.markers = c.markers;
    p.private_data = {1, 2, 3};
    ASSERT_TRUE(connect_pair(a, b, p, p, tcp));
    ASSERT_TRUE(b.inbox.wait_event(QpEvent::Kind::kEstablished));
    fill(a.buf, 0, 10000, 9);
    ASSERT_EQ(b.post_recv(1, 0, 20000), 0);
    ASSERT_EQ(b.post_recv(2, 0, 20000), 0);
    ASSERT_EQ(a.post(WrOpcode::kSend, 1, 0, 5000), 0);
    ASSERT_EQ(a.post(WrOpcode::kRdmaWrite, 2, 0, 7000, b.addr(65536), b.mr->rkey), 0);
    ASSERT_EQ(a.post(WrOpcode::kRdmaRead, 3, 65536, 4000, b.addr(65536), b.mr->rkey), 0);
    // Invalidate another region: the Read Response may still be reading b.mr.
    int err = 0;
    auto other = b.dev->reg_mr(b.pd, b.buf.data() + (1u << 20), 4096, b.addr(1u << 20),
                               core::kAccessLocalWrite | core::kAccessRemoteWrite, &err);
    ASSERT_TRUE(other);
    ASSERT_EQ(a.post(WrOpcode::kSendWithInv, 4, 0, 10, 0, 0,
                     core::kSendSignaled | core::kSendSolicited, other->rkey),
              0);
    for (int i = 0; i < 4; ++i) {
      auto wc = a.wait_wc(a.scq);
      ASSERT_TRUE(wc);
      ASSERT_EQ(wc->status, core::WcStatus::kSuccess);
    }
    ASSERT_TRUE(b.wait_wc(b.rcq));
    ASSERT_TRUE(b.wait_wc(b.rcq));
    ASSERT_EQ(a.dev->disconnect(a.qp), 0);
    ASSERT_TRUE(b.inbox.wait_event(QpEvent::Kind::kDisconnected));
    ASSERT_EQ(b.dev->disconnect(b.qp), 0);
    ASSERT_TRUE(a.inbox.wait_event(QpEvent::Kind::kDisconnected));
  }
  writer->flush();
  writer.reset();

  const std::string tshark =
      std::string(SOFTRDMA_TSHARK) + " -n -r " + path + " --disable-protocol rpcordma ";
  const std::string verbose = run(tshark + "-V 2>&1");
  EXPECT_EQ(count(verbose, "Malformed"), 0u) << verbose.substr(0, 4000);
  EXPECT_EQ(count(verbose, "Bad CRC32"), 0u);
  EXPECT_GE(count(verbose, "MPA ID Req Frame") + count(verbose, "Request frame"), 1u);
  const std::string fields =
      run(tshark + "-T fields -e iwarp_mpa.req -e iwarp_mpa.rep -e iwarp_rdma.opcode 2>/dev/null");
  std::istringstream lines(fields);
  std::string line;
  int reqs = 0, reps = 0, fpdus = 0;
  std::set<int> opcodes;
  while (std::getline(lines, line)) {
    std::istringstream cols(line);
    std::string req, rep, op;
    std::getline(cols, req, '\t');
    std::getline(cols, rep, '\t');
    std::getline(cols, op, '\t');
    if (!req.empty()) ++reqs;
    if (!rep.empty()) ++reps;
    if (!op.empty()) {
      ++fpdus;
      std::istringstream ops(op);
      std::string one;
      while (std::getline(ops, one, ',')) opcodes.insert(std::stoi(one, nullptr, 0));
    }
  }
  EXPECT_EQ(reqs, 1) << fields.substr(0, 2000);
  EXPECT_EQ(reps, 1);
  EXPECT_GT(fpdus, 10);
  // Send, Write, Read Request, Read Response, Send with SE and Invalidate.
  for (int op : {0, 1, 2, 3, 6}) EXPECT_TRUE(opcodes.count(op)) << "opcode " << op;
  if (c.crc) {
    EXPECT_GE(count(verbose, "Good CRC32"), static_cast<std::size_t>(fpdus));
  }
  int status = -1;
  const std::string lint =
      run(std::string(SOFTRDMA_BIN_DIR) + "/softrdma lint --json " + path + " 2>&1", &status);
  EXPECT_EQ(status, 0) << lint;
  EXPECT_NE(lint.find("\"violation_count\":0"), std::string::npos) << lint;
  EXPECT_NE(lint.find("\"mpa_frames\":2"), std::string::npos) << lint;
}

INSTANTIATE_TEST_SUITE_P(Mpa, IwarpTrace,
                         testing::Values(TraceConfig{2, true, false}, TraceConfig{2, false, false},
                                         TraceConfig{1, true, true}, TraceConfig{1, false, false},
                                         TraceConfig{2, true, true}),
                         [](const auto& i) {
                           return "rev" + std::to_string(i.param.revision) +
                                  (i.param.crc ? "_crc" : "_nocrc") +
                                  (i.param.markers ? "_markers" : "_nomarkers");
                         });

}  // namespace
}  // namespace softrdma::iwarp::test
