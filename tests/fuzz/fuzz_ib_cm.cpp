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

// parse, build, parse, build: both builds must give the same MAD.
template <class Msg, class Parse, class Build>
void round_trip(Bytes mad, std::uint64_t tid, Parse parse, Build build) {
  auto m = parse(mad);
  if (!m) return;
  std::uint8_t a[kMadSize], b[kMadSize];
  if (!build(MutBytes(a, kMadSize), tid, *m)) fail("a parsed message does not build");
  auto again = parse(Bytes(a, kMadSize));
  if (!again) fail("a built message does not parse");
  if (!build(MutBytes(b, kMadSize), tid, *again)) fail("a reparsed message does not build");
  if (std::memcmp(a, b, kMadSize) != 0) fail("parser and builder disagree");
  if constexpr (requires { m->private_data; }) {
    (void)parse_ip_cm_header(Bytes(m->private_data.data(), kIpCmHeaderSize));
  }
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
  switch (static_cast<CmAttr>(h->attr_id)) {
    case CmAttr::kReq:
      round_trip<CmReq>(b, tid, parse_cm_req, build_cm_req);
      break;
    case CmAttr::kMra:
      round_trip<CmMra>(b, tid, parse_cm_mra, build_cm_mra);
      break;
    case CmAttr::kRej:
      round_trip<CmRej>(b, tid, parse_cm_rej, build_cm_rej);
      break;
    case CmAttr::kRep:
      round_trip<CmRep>(b, tid, parse_cm_rep, build_cm_rep);
      break;
    case CmAttr::kRtu:
      round_trip<CmRtu>(b, tid, parse_cm_rtu, build_cm_rtu);
      break;
    case CmAttr::kDreq:
      round_trip<CmDreq>(b, tid, parse_cm_dreq, build_cm_dreq);
      break;
    case CmAttr::kDrep:
      round_trip<CmDrep>(b, tid, parse_cm_drep, build_cm_drep);
      break;
    case CmAttr::kSidrReq:
      round_trip<CmSidrReq>(b, tid, parse_cm_sidr_req, build_cm_sidr_req);
      break;
    case CmAttr::kSidrRep:
      round_trip<CmSidrRep>(b, tid, parse_cm_sidr_rep, build_cm_sidr_rep);
      break;
    default:  // ClassPortInfo, LAP, APR, unknown: no CM parser may take it
      if (parse_cm_req(b) || parse_cm_rep(b) || parse_cm_rtu(b) || parse_cm_rej(b) ||
          parse_cm_mra(b) || parse_cm_dreq(b) || parse_cm_drep(b) || parse_cm_sidr_req(b) ||
          parse_cm_sidr_rep(b)) {
        fail("a CM parser took a MAD of another attribute");
      }
  }
  return 0;
}
