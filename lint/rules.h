// The lint rules: every rule's stable name, its severity and the spec rule behind it.
// This table is the only place a rule is defined; Report::add takes a Rule, which can
// only be made (at compile time) from a name in the table, so a check cannot report a
// rule that has no severity. docs/lint-rules.md lists the same rows (a test compares).
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace softrdma::lint {

// kError: a receiver would reject the packet or stream, or the protocol is broken (or, for
// the capture-completeness rules, lint cannot vouch for what it did not see).
// kWarning: a sender should not do it, but the spec tells receivers to ignore it
// (reserved fields and pad bytes: "set to zero when sent, ignored on receive").
enum class Severity : std::uint8_t { kError, kWarning };

constexpr std::string_view to_string(Severity s) {
  return s == Severity::kWarning ? "warning" : "error";
}

struct RuleInfo {
  std::string_view name;  // e.g. "roce.icrc"
  Severity severity;
  std::string_view spec;  // the IBTA section or RFC section the check and severity rest on
};

inline constexpr auto kRules = std::to_array<RuleInfo>({
    {"ip.checksum", Severity::kError, "RFC 791 §3.1; RFC 1122 §3.2.1.2"},
    // RoCEv2, per packet
    {"roce.truncated", Severity::kError, "IBTA vol. 1 §9.2–9.3, RoCEv2 annex A17.4"},
    {"roce.opcode", Severity::kError, "IBTA vol. 1 §9.2, table 38; A17.9 (CNP)"},
    {"roce.tver", Severity::kError, "IBTA vol. 1 §9.2"},
    {"roce.bth_reserved", Severity::kWarning, "IBTA vol. 1 §9.2; A17 (FECN/BECN)"},
    {"roce.pad", Severity::kError, "IBTA vol. 1 §9.2 (PadCnt), §9.7.3"},
    {"roce.payload", Severity::kError, "IBTA vol. 1 §9.4, table 38"},
    {"roce.header", Severity::kError, "IBTA vol. 1 §9.2–9.3"},
    {"roce.pad_bytes", Severity::kWarning, "IBTA vol. 1 §9.2 (PadCnt)"},
    {"roce.atomic_alignment", Severity::kError, "IBTA vol. 1 §9.4.5; rel. 1.5 annex A19"},
    {"roce.atomic_write", Severity::kError, "IBTA rel. 1.5 annex A19 (ATOMIC WRITE)"},
    {"roce.feth", Severity::kError, "IBTA rel. 1.5 annex A19 (FLUSH, FETH)"},
    {"roce.feth_reserved", Severity::kWarning, "IBTA rel. 1.5 annex A19 (FETH)"},
    {"roce.aeth_syndrome", Severity::kError, "IBTA vol. 1 §9.3.5, table 43"},
    {"roce.deth_reserved", Severity::kWarning, "IBTA vol. 1 §9.3.3 (DETH)"},
    {"roce.xrceth", Severity::kWarning, "IBTA vol. 1 annex A14 (XRC, XRCETH)"},
    {"roce.xrceth_reserved", Severity::kWarning, "IBTA vol. 1 annex A14 (XRCETH)"},
    {"roce.cnp_reserved", Severity::kWarning, "RoCEv2 annex A17.9.3"},
    {"roce.icrc", Severity::kError, "IBTA vol. 1 §7.8, annex A17.4.3"},
    // RoCEv2, per flow
    {"roce.psn_gap", Severity::kError, "IBTA vol. 1 §9.7 (reliable service), §9.8 (UC)"},
    {"roce.sequence", Severity::kError, "IBTA vol. 1 §9.4 (opcode sequences), §9.7"},
    {"roce.segment_size", Severity::kError, "IBTA vol. 1 §9.7 (segmentation at the PMTU)"},
    {"roce.write_length", Severity::kError, "IBTA vol. 1 §9.3 (RETH), §9.7"},
    {"roce.ack_psn", Severity::kError, "IBTA vol. 1 §9.7 (ACK/NAK generation and validation)"},
    {"roce.msn", Severity::kError, "IBTA vol. 1 §9.7 (MSN)"},
    {"roce.read_response", Severity::kError, "IBTA vol. 1 §9.7 (RDMA Read responses)"},
    {"roce.atomic_ack", Severity::kError, "IBTA vol. 1 §9.7 (atomic operations)"},
    {"roce.qkey", Severity::kError, "IBTA vol. 1 §9.6 (Q_Key check), ch. 13 (GSI QP1)"},
    {"roce.cnp_target", Severity::kError, "RoCEv2 annex A17.9.3 (CNP); DCQCN"},
    // iWARP
    {"mpa.key", Severity::kError, "RFC 5044 §7.1"},
    {"mpa.pd_length", Severity::kError, "RFC 5044 §7.1; RFC 6581 §5"},
    {"mpa.reserved", Severity::kWarning, "RFC 5044 §7.1; RFC 6581 §5"},
    {"mpa.revision", Severity::kError, "RFC 5044 §7.1; RFC 6581 §5"},
    {"mpa.reply_missing", Severity::kError, "RFC 5044 §7.1.2"},
    {"fpdu.length", Severity::kError, "RFC 5044 §4.1; RFC 5041 §4"},
    {"fpdu.pad", Severity::kWarning, "RFC 5044 §4.1"},
    {"fpdu.crc", Severity::kError, "RFC 5044 §4.1, §4.2"},
    {"fpdu.marker", Severity::kError, "RFC 5044 §4.3, §5"},
    {"fpdu.marker_reserved", Severity::kWarning, "RFC 5044 §4.3"},
    {"ddp.version", Severity::kError, "RFC 5041 §4.1"},
    {"ddp.reserved", Severity::kWarning, "RFC 5041 §4.1"},
    {"ddp.tagged_mismatch", Severity::kError, "RFC 5040 §4.2, §4.3"},
    {"ddp.qn", Severity::kError, "RFC 5040 §5.1"},
    {"ddp.header", Severity::kError, "RFC 5041 §4"},
    {"rdmap.version", Severity::kError, "RFC 5040 §4.2"},
    {"rdmap.reserved", Severity::kWarning, "RFC 5040 §4.2, §4.3"},
    {"rdmap.opcode", Severity::kError, "RFC 5040 §4.2, table"},
    {"rdmap.read_request_length", Severity::kError, "RFC 5040 §4.4"},
    {"tcp.gap", Severity::kError, "— (capture completeness)"},
    {"stream.truncated", Severity::kError, "— (capture completeness)"},
});

// The index of `name` in kRules, or kRules.size(). (Indices, not pointers: GCC's
// -fsanitize=undefined makes pointer arithmetic in a constant expression non-constant.)
constexpr std::size_t find_rule(std::string_view name) {
  for (std::size_t i = 0; i < kRules.size(); ++i) {
    if (kRules[i].name == name) return i;
  }
  return kRules.size();
}

constexpr bool rule_names_unique() {
  for (std::size_t i = 0; i < kRules.size(); ++i) {
    for (std::size_t j = i + 1; j < kRules.size(); ++j) {
      if (kRules[i].name == kRules[j].name) return false;
    }
  }
  return true;
}
static_assert(rule_names_unique(), "a lint rule is listed twice in kRules");

// A rule of kRules, named by a literal. The constructor runs at compile time: a name that
// is not in the table is not a constant expression and does not compile.
class Rule {
 public:
  consteval Rule(const char* name) : index_(find_rule(name)) {  // NOLINT: implicit on purpose
    if (index_ == kRules.size()) throw "not a lint rule: add it to kRules in lint/rules.h";
  }
  constexpr const RuleInfo& info() const { return kRules[index_]; }
  constexpr std::string_view name() const { return info().name; }
  constexpr Severity severity() const { return info().severity; }

 private:
  std::size_t index_;
};

}  // namespace softrdma::lint
