// Fuzz target: IB CM MADs as the CM agent (cm/agent.cpp on_mad) takes them from the GSI QP: the
// MAD header, then by attribute the REQ, MRA, REJ, REP, RTU, DREQ, DREP, SIDR_REQ or SIDR_REP
// parser, and for REQ and SIDR_REQ the IP CM header at the start of the private data. A MAD
// that parses must build back to one that parses to the same bytes again (parser and builder
// agree), and ClassPortInfo, LAP, APR and other classes must be turned away by the header alone.
// The agent's state machine behind these parsers is fuzz_cm_agent's.
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "wire/ib_cm.h"

namespace {
using namespace softrdma::wire;

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "fuzz_ib_cm: %s\n", what);
  std::abort();
}

// parse, build, parse, build: both builds must give the same MAD. Returns whether M's parser
// took the MAD.
template <class M>
int round_trip(Bytes mad, std::uint64_t tid) {
  auto m = parse_cm<M>(mad);
  if (!m) return 0;
  std::uint8_t a[kMadSize], b[kMadSize];
  if (!build_cm(MutBytes(a, kMadSize), tid, *m)) fail("a parsed message does not build");
  auto again = parse_cm<M>(Bytes(a, kMadSize));
  if (!again) fail("a built message does not parse");
  if (!build_cm(MutBytes(b, kMadSize), tid, *again)) fail("a reparsed message does not build");
  if (std::memcmp(a, b, kMadSize) != 0) fail("parser and builder disagree");
  if constexpr (requires { m->private_data; }) {
    (void)parse_ip_cm_header(Bytes(m->private_data.data(), kIpCmHeaderSize));
  }
  return 1;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // The agent always hands over a whole 256-byte MAD (what the GSI QP received, zero-padded).
  std::uint8_t mad[kMadSize] = {};
  std::memcpy(mad, data, size < kMadSize ? size : kMadSize);
  (void)parse_mad_header(Bytes(data, size));  // and the header of a short one is refused
  const Bytes b(mad, kMadSize);
  auto h = parse_mad_header(b);
  if (!h) return 0;
  if (h->mgmt_class != kMgmtClassCm) return 0;
  const std::uint64_t tid = h->tid;
  // At most the parser of the MAD's own attribute takes it; ClassPortInfo, LAP, APR and
  // unknown attributes are taken by none.
  int taken = 0;
#define SOFTRDMA_ROUND_TRIP(M) taken += round_trip<M>(b, tid);
  SOFTRDMA_CM_MESSAGES(SOFTRDMA_ROUND_TRIP)
#undef SOFTRDMA_ROUND_TRIP
  const bool cm_message = h->attr_id >= static_cast<std::uint16_t>(CmAttr::kReq) &&
                          h->attr_id <= static_cast<std::uint16_t>(CmAttr::kSidrRep);
  if (taken > 1) fail("two CM parsers took one MAD");
  if (taken == 1 && !cm_message) fail("a CM parser took a MAD of another attribute");
  return 0;
}
