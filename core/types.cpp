#include "core/types.h"

namespace softrdma::core {

const char* to_string(WcStatus s) {
  switch (s) {
    case WcStatus::kSuccess: return "success";
    case WcStatus::kLocLenErr: return "local length error";
    case WcStatus::kLocQpOpErr: return "local QP operation error";
    case WcStatus::kLocEecOpErr: return "local EE context operation error";
    case WcStatus::kLocProtErr: return "local protection error";
    case WcStatus::kWrFlushErr: return "Work Request Flushed Error";
    case WcStatus::kMwBindErr: return "memory management operation error";
    case WcStatus::kBadRespErr: return "bad response error";
    case WcStatus::kLocAccessErr: return "local access error";
    case WcStatus::kRemInvReqErr: return "remote invalid request error";
    case WcStatus::kRemAccessErr: return "remote access error";
    case WcStatus::kRemOpErr: return "remote operation error";
    case WcStatus::kRetryExcErr: return "transport retry counter exceeded";
    case WcStatus::kRnrRetryExcErr: return "RNR retry counter exceeded";
    case WcStatus::kLocRddViolErr: return "local RDD violation error";
    case WcStatus::kRemInvRdReqErr: return "remote invalid RD request";
    case WcStatus::kRemAbortErr: return "aborted error";
    case WcStatus::kInvEecnErr: return "invalid EE context number";
    case WcStatus::kInvEecStateErr: return "invalid EE context state";
    case WcStatus::kFatalErr: return "fatal error";
    case WcStatus::kRespTimeoutErr: return "response timeout error";
    case WcStatus::kGeneralErr: return "general error";
  }
  return "unknown";
}

const char* to_string(QpState s) {
  switch (s) {
    case QpState::kReset: return "RESET";
    case QpState::kInit: return "INIT";
    case QpState::kRtr: return "RTR";
    case QpState::kRts: return "RTS";
    case QpState::kSqd: return "SQD";
    case QpState::kSqe: return "SQE";
    case QpState::kErr: return "ERR";
  }
  return "unknown";
}

}  // namespace softrdma::core
