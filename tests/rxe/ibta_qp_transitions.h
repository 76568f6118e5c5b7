// The QP state transitions a Modify QP may make, written from IBTA vol. 1 (10.3.1, the QP
// state diagram; 11.2.4.2, Modify QP, with its per-transition attribute lists; annex A14 for
// XRC, whose initiators have only a send side and targets only a receive side, as the
// kernel's ib_modify_qp_is_ok lists them), and kept apart from rxe/qp_state.*, which the tests
// check against it.
#pragma once

#include <cstdint>

#include "core/types.h"

namespace softrdma::rxe::test::ibta {

// What IBTA says of one Modify QP from `from` to `to` on a QP of one type.
struct Transition {
  bool allowed = false;
  std::uint32_t required = 0;  // attribute-mask bits beyond kQpState that must be given
};

// Reset -> Init: the QP's port, P_Key and either its access rights or (UD) its Q_Key.
inline std::uint32_t reset_to_init(QpType t) {
  if (t == QpType::kXrcSend) return kQpPkeyIndex | kQpPort;  // no remote access to grant
  return kQpPkeyIndex | kQpPort | (t == QpType::kUd ? kQpQkey : kQpAccessFlags);
}

// Init -> RTR: the receive side of a connection; a UD QP needs nothing.
inline std::uint32_t init_to_rtr(QpType t) {
  switch (t) {
    case QpType::kRc:
    case QpType::kXrcRecv:
      return kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn | kQpMaxDestRdAtomic | kQpMinRnrTimer;
    case QpType::kUc:
    case QpType::kXrcSend:  // no responder resources
      return kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn;
    case QpType::kUd:
      return 0;
  }
  return 0;
}

// RTR -> RTS: the send side; RC adds its timers, retry counts and RDMA Read depth.
inline std::uint32_t rtr_to_rts(QpType t) {
  if (t == QpType::kRc || t == QpType::kXrcSend) {
    return kQpSqPsn | kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpMaxQpRdAtomic;
  }
  if (t == QpType::kXrcRecv) return kQpSqPsn | kQpTimeout;  // its ACK timing, no requests
  return kQpSqPsn;
}

// The table itself. SQE is a state of UC and UD QPs only (a send error takes an RC QP to
// Error), and no Modify QP may enter it: only the channel interface does.
inline Transition transition(QpType t, QpState from, QpState to) {
  using S = QpState;
  if (to == S::kReset || to == S::kErr) return {true, 0};  // from any state
  const bool reliable = t == QpType::kRc || t == QpType::kXrcSend || t == QpType::kXrcRecv;
  if (from == S::kSqe && reliable) return {};
  switch (from) {
    case S::kReset:
      if (to == S::kInit) return {true, reset_to_init(t)};
      break;
    case S::kInit:
      if (to == S::kInit) return {true, 0};
      if (to == S::kRtr) return {true, init_to_rtr(t)};
      break;
    case S::kRtr:
      if (to == S::kRts) return {true, rtr_to_rts(t)};
      break;
    case S::kRts:
      if (to == S::kRts || to == S::kSqd) return {true, 0};
      break;
    case S::kSqd:
      if (to == S::kSqd || to == S::kRts) return {true, 0};
      break;
    case S::kSqe:
      if (to == S::kRts) return {true, 0};
      break;
    case S::kErr:
      break;
  }
  return {};
}

// The attributes that take a QP into `to` along the normal path, whatever the start: what
// an invalid transition is tried with, so that it fails for the transition, not the mask.
inline std::uint32_t path_attributes(QpType t, QpState to) {
  switch (to) {
    case QpState::kInit:
      return reset_to_init(t);
    case QpState::kRtr:
      return init_to_rtr(t);
    case QpState::kRts:
      return rtr_to_rts(t);
    default:
      return 0;
  }
}

}  // namespace softrdma::rxe::test::ibta
