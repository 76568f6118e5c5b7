#include "wire/ddp_rdmap.h"

#include <array>
#include <cstring>

namespace softrdma::wire {

namespace {

constexpr std::array<OpcodeInfo, 16> kOpcodes = {{
    {"RDMA Write", true, true, 0, true, false},
    {"RDMA Read Request", true, false, kQnReadRequest, false, false},
    {"RDMA Read Response", true, true, 0, true, false},
    {"Send", true, false, kQnSend, true, false},
    {"Send with Invalidate", true, false, kQnSend, true, true},
    {"Send with SE", true, false, kQnSend, true, false},
    {"Send with SE and Invalidate", true, false, kQnSend, true, true},
    {"Terminate", true, false, kQnTerminate, false, false},
    {"unknown", false, false, 0, false, false},
    {"unknown", false, false, 0, false, false},
    {"unknown", false, false, 0, false, false},
    {"unknown", false, false, 0, false, false},
    {"unknown", false, false, 0, false, false},
    {"unknown", false, false, 0, false, false},
    {"unknown", false, false, 0, false, false},
    {"unknown", false, false, 0, false, false},
}};

constexpr std::uint8_t kHdrctM = 0x80;
constexpr std::uint8_t kHdrctD = 0x40;
constexpr std::uint8_t kHdrctR = 0x20;
constexpr std::uint16_t kTermReservedMask = 0x1FFF;

}  // namespace

const OpcodeInfo& opcode_info(std::uint8_t opcode) {
  return kOpcodes[opcode & 0x0F];
}

std::string_view to_string(DdpIssue i) {
  switch (i) {
    case DdpIssue::kNone:
      return "none";
    case DdpIssue::kBadDdpVersion:
      return "DDP version";
    case DdpIssue::kBadRdmapVersion:
      return "RDMAP version";
    case DdpIssue::kDdpReserved:
      return "DDP reserved bits";
    case DdpIssue::kRdmapReserved:
      return "RDMAP reserved bits";
    case DdpIssue::kUnknownOpcode:
      return "unknown opcode";
    case DdpIssue::kTaggedMismatch:
      return "tagged flag mismatch";
    case DdpIssue::kQueueNumber:
      return "queue number";
  }
  return "?";
}

Error to_error(DdpIssue i) {
  switch (i) {
    case DdpIssue::kNone:
      return Error::kNone;
    case DdpIssue::kBadDdpVersion:
    case DdpIssue::kBadRdmapVersion:
      return Error::kBadVersion;
    case DdpIssue::kDdpReserved:
    case DdpIssue::kRdmapReserved:
      return Error::kReservedBits;
    case DdpIssue::kUnknownOpcode:
      return Error::kUnknownOpcode;
    case DdpIssue::kTaggedMismatch:
    case DdpIssue::kQueueNumber:
      return Error::kBadValue;
  }
  return Error::kBadValue;
}

Expected<DdpHeader> decode_ddp_header(Bytes in) {
  if (in.size() < 2) return Error::kTruncated;
  DdpHeader h;
  const std::uint8_t ctrl = load8(&in[0]);
  const std::uint8_t rctrl = load8(&in[1]);
  h.tagged = (ctrl & kDdpFlagTagged) != 0;
  h.last = (ctrl & kDdpFlagLast) != 0;
  h.ddp_reserved = static_cast<std::uint8_t>((ctrl & kDdpReservedMask) >> 2);
  h.ddp_version = static_cast<std::uint8_t>(ctrl & 0x03);
  h.rdmap_version = static_cast<std::uint8_t>(rctrl >> 6);
  h.rdmap_reserved = static_cast<std::uint8_t>((rctrl & kRdmapReservedMask) >> 4);
  h.opcode = static_cast<std::uint8_t>(rctrl & 0x0F);
  if (in.size() < h.header_len()) return Error::kTruncated;
  if (h.tagged) {
    h.stag = load32(&in[2]);
    h.to = load64(&in[6]);
  } else {
    h.inv_stag = load32(&in[2]);
    h.qn = load32(&in[6]);
    h.msn = load32(&in[10]);
    h.mo = load32(&in[14]);
  }
  return h;
}

DdpIssue check_ddp_header(const DdpHeader& h) {
  if (h.ddp_version != kDdpVersion) return DdpIssue::kBadDdpVersion;
  if (h.rdmap_version != kRdmapVersion) return DdpIssue::kBadRdmapVersion;
  const OpcodeInfo& info = opcode_info(h.opcode);
  if (!info.known) return DdpIssue::kUnknownOpcode;
  if (info.tagged != h.tagged) return DdpIssue::kTaggedMismatch;
  if (!h.tagged && h.qn != info.queue) return DdpIssue::kQueueNumber;
  return DdpIssue::kNone;
}

DdpIssue check_ddp_reserved(const DdpHeader& h) {
  if (h.ddp_reserved != 0) return DdpIssue::kDdpReserved;
  if (h.rdmap_reserved != 0) return DdpIssue::kRdmapReserved;
  const OpcodeInfo& info = opcode_info(h.opcode);
  if (!h.tagged && info.known && !info.uses_inv_stag && h.inv_stag != 0) {
    return DdpIssue::kRdmapReserved;
  }
  return DdpIssue::kNone;
}

Expected<DdpHeader> parse_ddp_header(Bytes in) {
  auto h = decode_ddp_header(in);
  if (!h) return h;
  const DdpIssue issue = check_ddp_header(*h);
  if (issue != DdpIssue::kNone) return to_error(issue);
  return h;
}

Expected<std::size_t> build_ddp_header(MutBytes out, const DdpHeader& h) {
  const std::size_t len = h.header_len();
  if (out.size() < len) return Error::kNoRoom;
  std::uint8_t ctrl =
      static_cast<std::uint8_t>(((h.ddp_reserved & 0x0F) << 2) | (h.ddp_version & 0x03));
  if (h.tagged) ctrl |= kDdpFlagTagged;
  if (h.last) ctrl |= kDdpFlagLast;
  const auto rctrl = static_cast<std::uint8_t>(
      ((h.rdmap_version & 0x03) << 6) | ((h.rdmap_reserved & 0x03) << 4) | (h.opcode & 0x0F));
  store8(&out[0], ctrl);
  store8(&out[1], rctrl);
  if (h.tagged) {
    store32(&out[2], h.stag);
    store64(&out[6], h.to);
  } else {
    store32(&out[2], h.inv_stag);
    store32(&out[6], h.qn);
    store32(&out[10], h.msn);
    store32(&out[14], h.mo);
  }
  return len;
}

Expected<ReadRequest> parse_read_request(Bytes in) {
  if (in.size() < kReadRequestLen) return Error::kTruncated;
  ReadRequest r;
  r.sink_stag = load32(&in[0]);
  r.sink_to = load64(&in[4]);
  r.size = load32(&in[12]);
  r.src_stag = load32(&in[16]);
  r.src_to = load64(&in[20]);
  return r;
}

Expected<std::size_t> build_read_request(MutBytes out, const ReadRequest& r) {
  if (out.size() < kReadRequestLen) return Error::kNoRoom;
  store32(&out[0], r.sink_stag);
  store64(&out[4], r.sink_to);
  store32(&out[12], r.size);
  store32(&out[16], r.src_stag);
  store64(&out[20], r.src_to);
  return kReadRequestLen;
}

Expected<Terminate> parse_terminate(Bytes in) {
  if (in.size() < kTerminateControlLen) return Error::kTruncated;
  Terminate t;
  t.layer = static_cast<std::uint8_t>(in[0] >> 4);
  t.etype = static_cast<std::uint8_t>(in[0] & 0x0F);
  t.code = in[1];
  const std::uint8_t hdrct = in[2];
  t.m = (hdrct & kHdrctM) != 0;
  t.d = (hdrct & kHdrctD) != 0;
  t.r = (hdrct & kHdrctR) != 0;
  t.reserved = static_cast<std::uint16_t>(load16(&in[2]) & kTermReservedMask);
  std::size_t off = kTerminateControlLen;
  if (t.d) {
    if (in.size() - off < 2 + 2) return Error::kTruncated;  // length + DDP control bytes
    t.ddp_segment_len = load16(&in[off]);
    off += 2;
    const std::size_t hlen = (in[off] & kDdpFlagTagged) != 0 ? kDdpTaggedLen : kDdpUntaggedLen;
    if (in.size() - off < hlen) return Error::kTruncated;
    t.ddp_header = in.subspan(off, hlen);
    off += hlen;
  }
  if (t.r) {
    if (in.size() - off < kReadRequestLen) return Error::kTruncated;
    t.rdmap_header = in.subspan(off, kReadRequestLen);
  }
  if (t.layer > static_cast<std::uint8_t>(TermLayer::kLlp)) return Error::kBadValue;
  if (t.m && !t.d) return Error::kBadValue;
  return t;
}

Expected<std::size_t> build_terminate(MutBytes out, const Terminate& t) {
  if (t.layer > 0x0F || t.etype > 0x0F || t.reserved > kTermReservedMask) return Error::kBadValue;
  if (t.m && !t.d) return Error::kBadValue;
  if (t.d && t.ddp_header.size() != kDdpTaggedLen && t.ddp_header.size() != kDdpUntaggedLen) {
    return Error::kBadLength;
  }
  if (t.d && t.ddp_header.size() !=
                 ((t.ddp_header[0] & kDdpFlagTagged) != 0 ? kDdpTaggedLen : kDdpUntaggedLen)) {
    return Error::kBadLength;  // the copied header's T bit must agree with its size
  }
  if (t.r && t.rdmap_header.size() != kReadRequestLen) return Error::kBadLength;
  const std::size_t len = t.encoded_len();
  if (out.size() < len) return Error::kNoRoom;
  store8(&out[0], static_cast<std::uint8_t>((t.layer << 4) | t.etype));
  store8(&out[1], t.code);
  std::uint16_t word = t.reserved;
  if (t.m) word |= static_cast<std::uint16_t>(kHdrctM) << 8;
  if (t.d) word |= static_cast<std::uint16_t>(kHdrctD) << 8;
  if (t.r) word |= static_cast<std::uint16_t>(kHdrctR) << 8;
  store16(&out[2], word);
  std::size_t off = kTerminateControlLen;
  if (t.d) {
    store16(&out[off], t.ddp_segment_len);
    off += 2;
    std::memcpy(&out[off], t.ddp_header.data(), t.ddp_header.size());
    off += t.ddp_header.size();
  }
  if (t.r) std::memcpy(&out[off], t.rdmap_header.data(), t.rdmap_header.size());
  return len;
}

}  // namespace softrdma::wire
