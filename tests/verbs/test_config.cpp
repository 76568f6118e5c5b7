// The config file (SOFTRDMA_CONFIG, verbs::load_config): key = value lines, `#` comments, the
// environment over the file, errors as FILE:LINE: ...; and through `softrdma run`: a bad file is
// exit 2 with that message, an option wins over the file.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "tests/run_command.h"
#include "verbs/engine.h"

namespace softrdma::verbs {
namespace {

// A config file in a fresh directory, named by SOFTRDMA_CONFIG for the test's duration; no other
// SOFTRDMA_* variable set.
class ConfigFile : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* v :
         {"SOFTRDMA_DEVICE", "SOFTRDMA_NETDEV", "SOFTRDMA_FAULTS", "SOFTRDMA_MTU", "SOFTRDMA_PCAP",
          "SOFTRDMA_PCAP_FILTER", "SOFTRDMA_TRANSPORT", "SOFTRDMA_MPA", "SOFTRDMA_VLAN",
          "SOFTRDMA_DPDK_QPS", "SOFTRDMA_PKEYS", "SOFTRDMA_LOCAL", "SOFTRDMA_STATS",
          "SOFTRDMA_VIEW", "SOFTRDMA_CONFIG", "SOFTRDMA_CC", "SOFTRDMA_SWITCH"}) {
      unsetenv(v);
    }
    std::string tmpl = (std::filesystem::temp_directory_path() / "softrdma-config-XXXXXX").string();
    dir_ = mkdtemp(tmpl.data());
    path_ = (dir_ / "config").string();
    setenv("SOFTRDMA_CONFIG", path_.c_str(), 1);
  }
  void TearDown() override {
    unsetenv("SOFTRDMA_CONFIG");
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  void write(const std::string& text) { std::ofstream(path_) << text; }
  bool load(Config& cfg, std::string& error) { return load_config(cfg, error); }

  std::filesystem::path dir_;
  std::string path_;
};

TEST_F(ConfigFile, KeyValueLinesCommentsAndBlankLines) {
  write(
      "# softrdma defaults\n"
      "\n"
      "  mtu = 1500  \n"
      "local=kernel\n"
      "pcap = /tmp/t-%p.pcapng\n"
      "\t# indented comment\n"
      "faults = drop=0.01,seed=3\n"
      "stats = 1\n");
  Config cfg;
  std::string error;
  ASSERT_TRUE(load(cfg, error)) << error;
  EXPECT_EQ(cfg.mtu, 1500u);
  EXPECT_EQ(cfg.local, Config::Local::kKernel);
  EXPECT_EQ(cfg.pcap, "/tmp/t-%p.pcapng");
  EXPECT_EQ(cfg.faults, "drop=0.01,seed=3");  // only the first '=' splits
  EXPECT_TRUE(cfg.stats);
  EXPECT_EQ(cfg.transport, "roce");  // what the file leaves out keeps its default
}

TEST_F(ConfigFile, PkeysIsATableOfDistinctPartitions) {
  write("pkeys = 0xffff,0x8001,0x0001,32770\n");
  Config cfg;
  std::string error;
  ASSERT_TRUE(load(cfg, error)) << error;
  EXPECT_EQ(cfg.pkeys, (std::vector<std::uint16_t>{0xFFFF, 0x8001, 0x0001, 0x8002}));
  for (const char* bad : {"", "0x", "0x8000", "0", "0x10000", "0xffff,", "0xffff,0xFFFF", "ffff"}) {
    write(std::string("pkeys = ") + bad + "\n");
    Config c;
    EXPECT_FALSE(load(c, error)) << bad;
    EXPECT_NE(error.find("pkeys"), std::string::npos) << bad << ": " << error;
  }
}

TEST_F(ConfigFile, TheEnvironmentWinsOverTheFile) {
  write("mtu = 1500\ntransport = iwarp\n");
  setenv("SOFTRDMA_MTU", "9000", 1);
  Config cfg;
  std::string error;
  ASSERT_TRUE(load(cfg, error)) << error;
  unsetenv("SOFTRDMA_MTU");
  EXPECT_EQ(cfg.mtu, 9000u);
  EXPECT_EQ(cfg.transport, "iwarp");
}

TEST_F(ConfigFile, ErrorsNameTheFileAndLine) {
  const std::pair<const char*, std::string> cases[] = {
      {"mtu = 1500\n# fine\nbogus = 1\n", ":3: unknown setting 'bogus'"},
      {"\ntransport = infiniband\n", ":2: transport must be roce or iwarp, not 'infiniband'"},
      {"mtu 1500\n", ":1: expected key=value"},
      {"mtu = 10\n", ":1: mtu must be a number from 576 to 65536, not '10'"},
      {"cc = vegas\n", ":1: bad congestion control 'vegas' (expected dcqcn or none)"},
      {"\nswitch = rate=1G,buffer=1M\n",
       ":2: missing ecn in 'rate=1G,buffer=1M' (expected "
       "rate=RATE,buffer=BYTES,ecn=KMIN:KMAX:PMAX, "
       "e.g. rate=10G,buffer=1M,ecn=40K:400K:0.1)"},
  };
  for (const auto& [text, want] : cases) {
    write(text);
    Config cfg;
    std::string error;
    EXPECT_FALSE(load(cfg, error)) << text;
    EXPECT_EQ(error, path_ + want) << text;
  }
}

TEST_F(ConfigFile, AMissingFileIsAnError) {
  std::filesystem::remove(path_);
  Config cfg;
  std::string error;
  EXPECT_FALSE(load(cfg, error));
  EXPECT_EQ(error, "SOFTRDMA_CONFIG: cannot read " + path_);
}

using Result = softrdma::test::CommandResult;
Result shell(const std::string& cmd) {
  return softrdma::test::run_command(cmd);
}

TEST_F(ConfigFile, SoftrdmaRunRefusesABadFileWithExit2) {
  write("mtu = 1500\nview = maybe\n");
  const Result r = shell(std::string(SOFTRDMA_BIN_DIR) + "/softrdma run -- true");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_EQ(r.out, "softrdma run: " + path_ +
                       ":2: bad value 'maybe' for view (expected auto, on or off)\n");
}

TEST_F(ConfigFile, ARunOptionWinsOverTheFile) {
  if (shell("command -v ibv_devinfo").status != 0) GTEST_SKIP() << "ibv_devinfo not installed";
  write("mtu = 1500\n");
  const std::string run = std::string(SOFTRDMA_BIN_DIR) + "/softrdma run --view off ";
  Result r = shell(run + "-- ibv_devinfo");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("active_mtu:\t\t1024 (3)"), std::string::npos) << r.out;  // the file's
  r = shell(run + "--mtu 9000 -- ibv_devinfo");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("active_mtu:\t\t4096 (5)"), std::string::npos) << r.out;  // the option's
}

}  // namespace
}  // namespace softrdma::verbs
