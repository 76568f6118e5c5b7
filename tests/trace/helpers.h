// Shared helpers for the tracing tests: temporary directories, running commands, RoCEv2
// datagrams built with wire/, and reading a trace back with our pcapng reader.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "netdev/netdev.h"
#include "pcap/pcapng_reader.h"
#include "tests/run_command.h"
#include "wire/roce_headers.h"
#include "wire/roce_opcode.h"

namespace softrdma::trace_test {

// A fresh directory under the system temp dir, removed at scope exit.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "softrdma-trace-XXXXXX").string();
    path = mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};

using CmdResult = test::CommandResult;
inline CmdResult run(const std::string& cmd) {
  return test::run_command(cmd);
}

// The softrdma binary: SOFTRDMA_BIN (the build's bin directory) when set, else beside this
// test binary (both are built into bin/).
inline std::string softrdma_bin() {
  if (const char* d = std::getenv("SOFTRDMA_BIN"); d && *d) return std::string(d) + "/softrdma";
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("softrdma") : (self.parent_path() / "softrdma").string();
}
// tshark from TSHARK (set by ctest) or PATH; empty when there is none.
inline std::string tshark() {
  if (const char* t = std::getenv("TSHARK"); t && *t && access(t, X_OK) == 0) return t;
  CmdResult r = run("command -v tshark");
  if (r.status != 0) return "";
  while (!r.out.empty() && (r.out.back() == '\n' || r.out.back() == ' ')) r.out.pop_back();
  return r.out;
}

// A RoCEv2 datagram (BTH … ICRC placeholder) of the given opcode to `qpn` with PSN `psn`.
inline std::vector<std::uint8_t> datagram(std::uint8_t opcode, std::uint32_t qpn, std::uint32_t psn,
                                          std::size_t payload_len = 64) {
  wire::RoceHeaders h;
  h.bth.opcode = opcode;
  h.bth.dest_qp = qpn;
  h.bth.psn = psn & wire::kPsnMask;
  const wire::RoceOpcodeInfo& info = wire::roce_opcode_info(opcode);
  if (info.headers & wire::kReth) h.reth = wire::Reth{0x1000, 0x1234, 64};
  if (info.headers & wire::kFeth) h.feth = wire::Feth{wire::flush::kGlobal, wire::flush::kRange, 0};
  if (info.headers & wire::kAeth) h.aeth = wire::Aeth{0x1F, psn};
  if (info.headers & wire::kDeth) h.deth = wire::Deth{0x11111111, 0, 0x22};
  if (info.headers & wire::kAtomicEth) h.atomic_eth = wire::AtomicEth{0x2000, 0x1234, 1, 0};
  if (info.headers & wire::kAtomicAckEth) h.atomic_ack_eth = wire::AtomicAckEth{7};
  if (info.headers & wire::kImmDt) h.imm = 0xABCD;
  if (info.headers & wire::kIeth) h.inv_rkey = 0x99;
  if (!info.payload) payload_len = 0;
  std::vector<std::uint8_t> payload(payload_len);
  for (std::size_t i = 0; i < payload_len; ++i) payload[i] = static_cast<std::uint8_t>(psn + i);
  std::vector<std::uint8_t> out(payload_len + 128);
  auto n = wire::build_roce(wire::MutBytes(out), h, wire::Bytes(payload));
  EXPECT_TRUE(n.ok()) << static_cast<int>(n.error());
  out.resize(n.ok() ? *n : 0);
  return out;
}

// Every record of a pcapng file.
struct Trace {
  std::vector<pcap::PcapngInterface> ifaces;
  std::vector<pcap::PcapngRecord> recs;
};
inline Trace read_trace(const std::string& path) {
  Trace t;
  std::string error;
  auto r = pcap::PcapngReader::open(path, error);
  EXPECT_TRUE(r) << error;
  if (!r) return t;
  pcap::PcapngRecord rec;
  int rc;
  while ((rc = r->next(rec)) == 1) t.recs.push_back(rec);
  EXPECT_EQ(rc, 0) << r->error();
  t.ifaces = r->interfaces();
  return t;
}

inline bool has(const std::string& s, const std::string& sub) {
  return s.find(sub) != std::string::npos;
}

}  // namespace softrdma::trace_test
