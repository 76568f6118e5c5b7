#include "iwarp/terminate.h"

#include <array>

#include "wire/ddp_rdmap.h"

namespace softrdma::iwarp {

namespace {

using wire::DdpErrorType;
using wire::DdpTaggedErrorCode;
using wire::DdpUntaggedErrorCode;
using wire::MpaErrorCode;
using wire::RdmapErrorCode;
using wire::RdmapErrorType;
using wire::TermLayer;

struct Row {
  RxError e;
  const char* name;
  TermInfo term;
};

template <class L, class T, class C>
constexpr TermInfo ti(L l, T t, C c) {
  return {static_cast<std::uint8_t>(l), static_cast<std::uint8_t>(t), static_cast<std::uint8_t>(c)};
}

constexpr auto kMpa = TermLayer::kLlp;
constexpr auto kDdp = TermLayer::kDdp;
constexpr auto kRdmap = TermLayer::kRdmap;

constexpr std::array<Row, 22> kRows = {{
    {RxError::kCrc, "crc", ti(kMpa, wire::MpaErrorType::kMpa, MpaErrorCode::kCrc)},
    {RxError::kMarker, "marker", ti(kMpa, wire::MpaErrorType::kMpa, MpaErrorCode::kMarker)},
    {RxError::kFraming, "framing",
     ti(kDdp, DdpErrorType::kCatastrophic, DdpTaggedErrorCode::kInvalidStag)},
    {RxError::kDdpVersion, "ddp_version",
     ti(kDdp, DdpErrorType::kUntaggedBuffer, DdpUntaggedErrorCode::kInvalidVersion)},
    {RxError::kRdmapVersion, "rdmap_version",
     ti(kRdmap, RdmapErrorType::kRemoteOperation, RdmapErrorCode::kInvalidVersion)},
    {RxError::kBadOpcode, "opcode",
     ti(kRdmap, RdmapErrorType::kRemoteOperation, RdmapErrorCode::kUnexpectedOpcode)},
    {RxError::kBadQn, "qn",
     ti(kDdp, DdpErrorType::kUntaggedBuffer, DdpUntaggedErrorCode::kInvalidQn)},
    {RxError::kNoBuffer, "no_buffer",
     ti(kDdp, DdpErrorType::kUntaggedBuffer, DdpUntaggedErrorCode::kInvalidMsnNoBuffer)},
    {RxError::kMsnRange, "msn_range",
     ti(kDdp, DdpErrorType::kUntaggedBuffer, DdpUntaggedErrorCode::kInvalidMsnRange)},
    {RxError::kBadMo, "mo",
     ti(kDdp, DdpErrorType::kUntaggedBuffer, DdpUntaggedErrorCode::kInvalidMo)},
    {RxError::kTooLong, "too_long",
     ti(kDdp, DdpErrorType::kUntaggedBuffer, DdpUntaggedErrorCode::kMessageTooLong)},
    {RxError::kInvalidStag, "invalid_stag",
     ti(kDdp, DdpErrorType::kTaggedBuffer, DdpTaggedErrorCode::kInvalidStag)},
    {RxError::kStagNotAssoc, "stag_not_associated",
     ti(kDdp, DdpErrorType::kTaggedBuffer, DdpTaggedErrorCode::kStagNotAssociated)},
    {RxError::kBaseBounds, "base_bounds",
     ti(kDdp, DdpErrorType::kTaggedBuffer, DdpTaggedErrorCode::kBaseBounds)},
    {RxError::kAccessRights, "access_rights",
     ti(kRdmap, RdmapErrorType::kRemoteProtection, RdmapErrorCode::kAccessRights)},
    {RxError::kCannotInvalidate, "cannot_invalidate",
     ti(kRdmap, RdmapErrorType::kRemoteOperation, RdmapErrorCode::kStagCannotInvalidate)},
    {RxError::kReadSrcInvalid, "read_invalid_stag",
     ti(kRdmap, RdmapErrorType::kRemoteProtection, RdmapErrorCode::kInvalidStag)},
    {RxError::kReadSrcBounds, "read_base_bounds",
     ti(kRdmap, RdmapErrorType::kRemoteProtection, RdmapErrorCode::kBaseBounds)},
    {RxError::kReadSrcAccess, "read_access_rights",
     ti(kRdmap, RdmapErrorType::kRemoteProtection, RdmapErrorCode::kAccessRights)},
    {RxError::kUnexpectedResp, "unexpected_response",
     ti(kRdmap, RdmapErrorType::kRemoteOperation, RdmapErrorCode::kUnexpectedOpcode)},
    {RxError::kNoMatchingRtr, "no_matching_rtr",
     ti(kMpa, wire::MpaErrorType::kMpa, MpaErrorCode::kNoMatchingRtr)},
    {RxError::kLocal, "local",
     ti(kRdmap, RdmapErrorType::kLocalCatastrophic, RdmapErrorCode::kUnspecified)},
}};

const Row& row(RxError e) {
  for (const Row& r : kRows) {
    if (r.e == e) return r;
  }
  return kRows.back();
}

}  // namespace

TermInfo term_info(RxError e) {
  return row(e).term;
}

const char* to_string(RxError e) {
  return row(e).name;
}

core::WcStatus status_for_term(const TermInfo& t) {
  const auto layer = static_cast<TermLayer>(t.layer);
  if (layer == kDdp && t.etype == static_cast<std::uint8_t>(DdpErrorType::kTaggedBuffer)) {
    return core::WcStatus::kRemAccessErr;
  }
  if (layer == kRdmap && t.etype == static_cast<std::uint8_t>(RdmapErrorType::kRemoteProtection)) {
    return core::WcStatus::kRemAccessErr;
  }
  if (layer == kDdp && t.etype == static_cast<std::uint8_t>(DdpErrorType::kUntaggedBuffer)) {
    return t.code == static_cast<std::uint8_t>(DdpUntaggedErrorCode::kInvalidMsnNoBuffer)
               ? core::WcStatus::kRemOpErr
               : core::WcStatus::kRemInvReqErr;
  }
  return core::WcStatus::kRemOpErr;
}

}  // namespace softrdma::iwarp
