// Rule severities: the rule table (lint/rules.h) and docs/lint-rules.md agree; reserved
// fields set by a sender are warnings that do not fail a capture unless strict; an error
// (a bad ICRC) does; text and JSON output carry each violation's severity and the counts.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "lint/lint.h"
#include "lint/rules.h"
#include "pcap/writer.h"
#include "wire/frame.h"
#include "wire/pfc_pause.h"
#include "wire/roce_frame.h"

using namespace softrdma;

// A rule that is not in the table does not compile (Rule's constructor is consteval);
// these pin the severities the task is about.
static_assert(lint::Rule("roce.bth_reserved").severity() == lint::Severity::kWarning);
static_assert(lint::Rule("roce.deth_reserved").severity() == lint::Severity::kWarning);
static_assert(lint::Rule("roce.cnp_reserved").severity() == lint::Severity::kWarning);
static_assert(lint::Rule("ddp.reserved").severity() == lint::Severity::kWarning);
static_assert(lint::Rule("rdmap.reserved").severity() == lint::Severity::kWarning);
static_assert(lint::Rule("mpa.reserved").severity() == lint::Severity::kWarning);
static_assert(lint::Rule("roce.icrc").severity() == lint::Severity::kError);
static_assert(lint::Rule("fpdu.crc").severity() == lint::Severity::kError);
static_assert(lint::Rule("roce.truncated").severity() == lint::Severity::kError);
static_assert(lint::find_rule("roce.no_such_rule") == lint::kRules.size());

namespace {

// The RoCEv2 ICRC of an Ethernet frame, recomputed after its bytes were edited.
void refresh_icrc(std::vector<std::uint8_t>& frame) {
  auto v = wire::parse_frame(wire::Bytes(frame), 1);
  ASSERT_TRUE(v);
  auto icrc = wire::expected_icrc(*v);
  ASSERT_TRUE(icrc);
  wire::store32le(frame.data() + frame.size() - wire::kIcrcLen, *icrc);
}

wire::RoceAddr addr(bool forward) {
  wire::RoceAddr a;
  a.src4 = forward ? 0x0A000001 : 0x0A000002;
  a.dst4 = forward ? 0x0A000002 : 0x0A000001;
  a.src_port = 69;  // as the Huawei NIC sends some of its packets
  a.eth = wire::Ethernet{};
  return a;
}

// BTH as the Huawei NIC fills it: MigReq 1 and byte 4 = 0x10 (a reserved bit).
wire::RoceHeaders huawei(std::uint8_t opcode, std::uint32_t qp, std::uint32_t psn) {
  wire::RoceHeaders h;
  h.bth.opcode = opcode;
  h.bth.dest_qp = qp;
  h.bth.psn = psn;
  h.bth.mig_req = true;
  h.bth.resv6 = 0x10;
  return h;
}

std::vector<std::uint8_t> build(bool forward, const wire::RoceHeaders& h, std::size_t payload_len) {
  std::vector<std::uint8_t> payload(payload_len, 0x5c), frame(256);
  auto n = wire::build_roce_frame(frame, addr(forward), h, payload);
  EXPECT_TRUE(n);
  frame.resize(n ? *n : 0);
  return frame;
}

// Frames a receiver must take although reserved fields are set, all with valid ICRCs:
// 1 SEND ONLY, 2 its ACK, 3 SEND ONLY with a non-zero pad byte, 4 a UD SEND with a non-zero
// DETH reserved byte, 5 a CNP with a non-zero reserved byte. With `bad_icrc`, frame 3's
// payload is changed after its ICRC was computed.
std::vector<std::vector<std::uint8_t>> huawei_frames(bool bad_icrc) {
  std::vector<std::vector<std::uint8_t>> frames;
  auto send = huawei(wire::op::kRcSendOnly, 0x11, 100);
  send.bth.ack_req = true;
  frames.push_back(build(true, send, 64));
  auto ack = huawei(wire::op::kRcAck, 0x22, 100);
  ack.aeth = wire::Aeth{wire::syndrome::kAckNoCredit, 1};
  frames.push_back(build(false, ack, 0));
  send.bth.psn = 101;
  auto padded = build(true, send, 41);  // 3 pad bytes
  padded[padded.size() - wire::kIcrcLen - 2] = 0xaa;
  refresh_icrc(padded);
  if (bad_icrc) padded[padded.size() - wire::kIcrcLen - 10] ^= 0x01;
  frames.push_back(std::move(padded));
  auto ud = huawei(wire::op::kUdSendOnly, 0x33, 7);
  ud.deth = wire::Deth{0x1234, 0x5a, 0x44};
  frames.push_back(build(true, ud, 32));
  auto cnp = build(false, huawei(wire::op::kCnp, 0x22, 0), 0);
  cnp[cnp.size() - wire::kIcrcLen - 3] = 0x01;  // one of the 16 reserved bytes
  refresh_icrc(cnp);
  frames.push_back(std::move(cnp));
  return frames;
}

struct Linted {
  int rc = -1;
  lint::Report report;
};

Linted lint_frames(const std::vector<std::vector<std::uint8_t>>& frames, bool strict) {
  static int seq = 0;
  const std::string path =
      "/tmp/softrdma-lint-sev-" + std::to_string(getpid()) + "-" + std::to_string(seq++) + ".pcap";
  {
    std::string error;
    auto w = pcap::Writer::open(path, 1, error);
    EXPECT_TRUE(w) << error;
    std::int64_t t = 1'700'000'000;
    for (const auto& f : frames) w->write(t++, 0, wire::Bytes(f));
    w->flush();
  }
  Linted out;
  lint::Options opts;
  opts.strict = strict;
  std::string error;
  out.rc = lint::run(path, opts, out.report, error);
  unlink(path.c_str());
  return out;
}

std::vector<std::pair<std::uint64_t, std::string>> rules(const lint::Report& r) {
  std::vector<std::pair<std::uint64_t, std::string>> v;
  for (const auto& x : r.violations()) v.emplace_back(x.frame, x.rule);
  return v;
}

}  // namespace

TEST(LintSeverity, ReservedFieldsAreWarningsAndPass) {
  const Linted l = lint_frames(huawei_frames(false), false);
  using V = std::vector<std::pair<std::uint64_t, std::string>>;
  EXPECT_EQ(rules(l.report), (V{{1, "roce.bth_reserved"},
                                {2, "roce.bth_reserved"},
                                {3, "roce.bth_reserved"},
                                {3, "roce.pad_bytes"},
                                {4, "roce.bth_reserved"},
                                {4, "roce.deth_reserved"},
                                {5, "roce.bth_reserved"},
                                {5, "roce.cnp_reserved"}}));
  for (const auto& v : l.report.violations()) {
    EXPECT_EQ(v.severity, lint::Severity::kWarning) << v.rule;
  }
  EXPECT_EQ(l.report.errors(), 0u);
  EXPECT_EQ(l.report.warnings(), 8u);
  EXPECT_EQ(l.rc, 0);
  EXPECT_EQ(l.report.counters().roce_packets, 5u);
  const auto& deth = l.report.violations()[5];
  EXPECT_EQ(deth.found, "0x5a");
}

TEST(LintSeverity, StrictFailsOnWarnings) {
  const Linted l = lint_frames(huawei_frames(false), true);
  EXPECT_EQ(l.report.errors(), 0u);
  EXPECT_EQ(l.report.warnings(), 8u);
  EXPECT_EQ(l.rc, 1);
}

TEST(LintSeverity, AnErrorFails) {
  for (bool strict : {false, true}) {
    const Linted l = lint_frames(huawei_frames(true), strict);
    EXPECT_EQ(l.rc, 1) << "strict " << strict;
    EXPECT_EQ(l.report.errors(), 1u);
    EXPECT_EQ(l.report.warnings(), 8u);
    bool icrc = false;
    for (const auto& v : l.report.violations()) {
      if (v.rule != "roce.icrc") continue;
      icrc = true;
      EXPECT_EQ(v.frame, 3u);
      EXPECT_EQ(v.severity, lint::Severity::kError);
    }
    EXPECT_TRUE(icrc);
  }
}

TEST(LintSeverity, TextAndJsonCarrySeverities) {
  const Linted l = lint_frames(huawei_frames(true), false);
  std::ostringstream text, json;
  l.report.print_text(text, "cap.pcap");
  l.report.print_json(json, "cap.pcap");
  const std::string t = text.str(), j = json.str();
  EXPECT_NE(t.find("frame 1: 10.0.0.1:69 > 10.0.0.2:4791 qp 0x000011: warning: roce.bth_reserved: "
                   "expected 0, found byte4 0x10 byte8 0x00\n"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find(": error: roce.icrc: expected "), std::string::npos) << t;
  EXPECT_NE(t.find("5 packets read, 5 RoCEv2 packets, 0 iWARP FPDUs, 9 violations "
                   "(1 errors, 8 warnings)\n"),
            std::string::npos)
      << t;
  EXPECT_NE(j.find("\"violation_count\":9,\"error_count\":1,\"warning_count\":8,"),
            std::string::npos)
      << j;
  EXPECT_NE(j.find("\"rule\":\"roce.deth_reserved\",\"severity\":\"warning\",\"expected\""),
            std::string::npos)
      << j;
  EXPECT_NE(j.find("\"rule\":\"roce.icrc\",\"severity\":\"error\""), std::string::npos) << j;
}

// The cells of a Markdown table row, trimmed.
static std::vector<std::string> cells_of(const std::string& line) {
  std::vector<std::string> cells;
  std::size_t pos = 1;
  for (std::size_t bar; (bar = line.find('|', pos)) != std::string::npos; pos = bar + 1) {
    std::string c = line.substr(pos, bar - pos);
    c.erase(0, c.find_first_not_of(' '));
    c.erase(c.find_last_not_of(' ') + 1);
    cells.push_back(c);
  }
  return cells;
}

// docs/lint-rules.md lists every rule of the table once, with the same severity and spec,
// and says why for every warning.
TEST(LintSeverity, DocsListEveryRuleWithItsSeverity) {
  std::ifstream in(std::string(SOFTRDMA_SOURCE_DIR) + "/docs/lint-rules.md");
  ASSERT_TRUE(in) << "docs/lint-rules.md not found";
  std::map<std::string, int> listed, explained;
  enum { kNone, kRules, kWhy } table = kNone;
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("|", 0) != 0) {
      table = kNone;
      continue;
    }
    if (line == "| rule | severity | checks | spec |") table = kRules;
    if (line == "| rule | what the spec says about the field |") table = kWhy;
    if (table == kNone || line.rfind("| `", 0) != 0) continue;
    const auto cells = cells_of(line);
    ASSERT_GE(cells[0].size(), 2u) << line;
    const std::string name = cells[0].substr(1, cells[0].size() - 2);
    const std::size_t at = lint::find_rule(name);
    ASSERT_LT(at, lint::kRules.size()) << name << " is in the docs but not in lint/rules.h";
    const lint::RuleInfo* r = &lint::kRules[at];
    if (table == kWhy) {
      ++explained[name];
      EXPECT_EQ(r->severity, lint::Severity::kWarning) << name << " is explained as a warning";
      continue;
    }
    ASSERT_EQ(cells.size(), 4u) << line;
    ++listed[name];
    EXPECT_EQ(cells[1], lint::to_string(r->severity)) << name;
    EXPECT_EQ(cells[3], r->spec) << name;
  }
  for (const lint::RuleInfo& r : lint::kRules) {
    const std::string name(r.name);
    EXPECT_EQ(listed[name], 1) << name << " should be listed once in the docs";
    if (r.severity == lint::Severity::kWarning) {
      EXPECT_EQ(explained[name], 1) << "the docs should say why " << name << " is a warning";
    }
  }
}

// IBTA 1.5 A19: an ATOMIC WRITE carries exactly 8 bytes at an aligned address, a FLUSH's FETH
// a defined placement type and level; its reserved bits are a warning. Good ones pass.
TEST(LintSeverity, AtomicWriteAndFlushHeadersAreChecked) {
  const auto plain = [](std::uint8_t opcode, std::uint32_t psn) {
    wire::RoceHeaders h;
    h.bth.opcode = opcode;
    h.bth.dest_qp = 0x11 + psn;  // a QP each: no flow to follow
    h.bth.psn = psn;
    return h;
  };
  std::vector<std::vector<std::uint8_t>> frames;
  auto aw = plain(wire::op::kRcAtomicWrite, 1);
  aw.reth = wire::Reth{0x10000, 0x1234, 8};
  frames.push_back(build(true, aw, 8));  // 1: good
  aw.bth.psn = 2;
  aw.reth->va = 0x10004;
  frames.push_back(build(true, aw, 8));  // 2: misaligned
  aw.bth.psn = 3;
  aw.reth = wire::Reth{0x10000, 0x1234, 16};
  frames.push_back(build(true, aw, 16));  // 3: 16 bytes
  auto fl = plain(wire::op::kRcFlush, 4);
  fl.reth = wire::Reth{0x10000, 0x1234, 4096};
  fl.feth = wire::Feth{wire::flush::kGlobal, wire::flush::kRange, 0};
  frames.push_back(build(true, fl, 0));  // 4: good
  fl.bth.psn = 5;
  fl.feth = wire::Feth{0, 2, 0};
  frames.push_back(build(true, fl, 0));  // 5: no placement type, level 2
  fl.bth.psn = 6;
  fl.feth = wire::Feth{wire::flush::kGlobal, wire::flush::kRegion, 0x40};
  frames.push_back(build(true, fl, 0));  // 6: a reserved bit
  const Linted l = lint_frames(frames, false);
  using V = std::vector<std::pair<std::uint64_t, std::string>>;
  EXPECT_EQ(rules(l.report), (V{{2, "roce.atomic_alignment"},
                                {3, "roce.atomic_write"},
                                {5, "roce.feth"},
                                {5, "roce.feth"},
                                {6, "roce.feth_reserved"}}));
  EXPECT_EQ(l.report.errors(), 4u);
  EXPECT_EQ(l.report.warnings(), 1u);
}

// XRC (IBTA annex A14): an XRCETH naming SRQ 0, or with its reserved byte set, is a warning;
// a good XRC request and its ACK (which has no XRCETH) pass.
TEST(LintSeverity, XrcEthIsChecked) {
  std::vector<std::vector<std::uint8_t>> frames;
  const auto send = [&](std::uint32_t qp, wire::XrcEth x) {
    wire::RoceHeaders h;
    h.bth.opcode = wire::op::kXrcBase | wire::op::kRcSendOnly;
    h.bth.dest_qp = qp;  // a QP each: no flow to follow
    h.xrceth = x;
    frames.push_back(build(true, h, 16));
  };
  send(0x11, {0, 7});  // 1: good
  wire::RoceHeaders ack;
  ack.bth.opcode = wire::op::kXrcBase | wire::op::kRcAck;
  ack.bth.dest_qp = 0x21;
  ack.aeth = wire::Aeth{wire::syndrome::kAckNoCredit, 1};
  frames.push_back(build(false, ack, 0));  // 2: good
  send(0x12, {0, 0});                      // 3: SRQ 0
  send(0x13, {0x80, 7});                   // 4: reserved byte
  const Linted l = lint_frames(frames, false);
  using V = std::vector<std::pair<std::uint64_t, std::string>>;
  EXPECT_EQ(rules(l.report), (V{{3, "roce.xrceth"}, {4, "roce.xrceth_reserved"}}));
  EXPECT_EQ(l.report.errors(), 0u);
  EXPECT_EQ(l.report.warnings(), 2u);
}

// A lossless port's pause frame (opcode 0xC0, the 802.1Qbb body) is softrdma's own and passes;
// another datagram of that opcode is still an unknown opcode.
TEST(LintSeverity, PauseFramesOfALosslessPortPass) {
  wire::RoceHeaders h;
  h.bth.opcode = wire::op::kRcSendOnly;
  h.bth.dest_qp = 0x11;
  std::vector<std::uint8_t> pause = build(true, h, 20);  // BTH + 20 + ICRC: a pause's length
  std::uint8_t* d = pause.data() + pause.size() - wire::kPauseFrameLen;
  d[0] = wire::kPauseOpcode;
  wire::store16(d + wire::kPauseBody, wire::kPfcOpcode);
  d[wire::kPauseBody + 2] = 0;
  refresh_icrc(pause);
  std::vector<std::uint8_t> other = pause;
  other[other.size() - wire::kPauseFrameLen + wire::kPauseBody] = 0x02;  // MAC-control 0x0201
  refresh_icrc(other);
  const Linted l = lint_frames({pause, other}, false);
  using V = std::vector<std::pair<std::uint64_t, std::string>>;
  EXPECT_EQ(rules(l.report), (V{{2, "roce.opcode"}}));
}
