#include "rxe/qp_state.h"

#include <array>

namespace softrdma::rxe {

namespace {

constexpr std::size_t kStates = 7;
constexpr std::size_t kTypes = 5;  // RC, UC, UD, XRC initiator, XRC target

std::size_t type_index(QpType t) {
  switch (t) {
    case QpType::kRc: return 0;
    case QpType::kUc: return 1;
    case QpType::kUd: return 2;
    case QpType::kXrcSend:
      return 3;
    case QpType::kXrcRecv:
      return 4;
  }
  return 0;
}

using Table = std::array<std::array<std::array<TransitionRule, kTypes>, kStates>, kStates>;

constexpr std::size_t S(QpState s) { return static_cast<std::size_t>(s); }

// IBTA vol. 1 §11.2.4.2 (Table 91 and the per-transition attribute lists), as the
// kernel's ib_modify_qp_is_ok also encodes them. Index [from][to][type].
Table make_table() {
  Table t{};
  constexpr std::uint32_t kRcAlt = kQpAltPath | kQpAccessFlags | kQpPathMigState;
  for (std::size_t from = 0; from < kStates; ++from) {
    for (std::size_t ty = 0; ty < kTypes; ++ty) {
      t[from][S(QpState::kReset)][ty] = {true, 0, 0};
      t[from][S(QpState::kErr)][ty] = {true, 0, 0};
    }
  }
  // RESET -> INIT (the XRC columns are filled below)
  t[S(QpState::kReset)][S(QpState::kInit)] = {{
      {true, kQpPkeyIndex | kQpPort | kQpAccessFlags, 0},
      {true, kQpPkeyIndex | kQpPort | kQpAccessFlags, 0},
      {true, kQpPkeyIndex | kQpPort | kQpQkey, 0},
  }};
  // INIT -> INIT
  t[S(QpState::kInit)][S(QpState::kInit)] = {{
      {true, 0, kQpPkeyIndex | kQpPort | kQpAccessFlags},
      {true, 0, kQpPkeyIndex | kQpPort | kQpAccessFlags},
      {true, 0, kQpPkeyIndex | kQpPort | kQpQkey},
  }};
  // INIT -> RTR
  t[S(QpState::kInit)][S(QpState::kRtr)] = {{
      {true,
       kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn | kQpMaxDestRdAtomic | kQpMinRnrTimer,
       kQpAltPath | kQpAccessFlags | kQpPkeyIndex},
      {true, kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn,
       kQpAltPath | kQpAccessFlags | kQpPkeyIndex},
      {true, 0, kQpPkeyIndex | kQpQkey},
  }};
  // RTR -> RTS
  t[S(QpState::kRtr)][S(QpState::kRts)] = {{
      {true, kQpSqPsn | kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpMaxQpRdAtomic,
       kQpCurState | kRcAlt | kQpMinRnrTimer},
      {true, kQpSqPsn, kQpCurState | kRcAlt},
      {true, kQpSqPsn, kQpCurState | kQpQkey},
  }};
  // RTS -> RTS
  t[S(QpState::kRts)][S(QpState::kRts)] = {{
      {true, 0, kQpCurState | kRcAlt | kQpMinRnrTimer},
      {true, 0, kQpCurState | kRcAlt},
      {true, 0, kQpCurState | kQpQkey},
  }};
  // RTS -> SQD
  t[S(QpState::kRts)][S(QpState::kSqd)] = {{
      {true, 0, kQpEnSqdAsyncNotify},
      {true, 0, kQpEnSqdAsyncNotify},
      {true, 0, kQpEnSqdAsyncNotify},
  }};
  // SQD -> RTS
  t[S(QpState::kSqd)][S(QpState::kRts)] = {{
      {true, 0, kQpCurState | kRcAlt | kQpMinRnrTimer},
      {true, 0, kQpCurState | kRcAlt},
      {true, 0, kQpCurState | kQpQkey},
  }};
  // SQD -> SQD
  t[S(QpState::kSqd)][S(QpState::kSqd)] = {{
      {true, 0,
       kQpPort | kQpAv | kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpMaxQpRdAtomic |
           kQpMaxDestRdAtomic | kRcAlt | kQpPkeyIndex | kQpMinRnrTimer},
      {true, 0, kQpAv | kRcAlt | kQpPkeyIndex},
      {true, 0, kQpPkeyIndex | kQpQkey},
  }};
  // SQE -> RTS (not for RC)
  t[S(QpState::kSqe)][S(QpState::kRts)] = {{
      {false, 0, 0},
      {true, 0, kQpCurState | kQpAccessFlags},
      {true, 0, kQpCurState | kQpQkey},
  }};
  // XRC (IBTA annex A14, the kernel's ib_modify_qp_is_ok): RC's rules, but an initiator has no
  // receive side (no access flags or responder resources required) and a target no send side
  // (its RTS needs only the timeout and SQ PSN). What a side does not use is still accepted, as
  // programs written for RC pass it (ibv_xsrq_pingpong sets access flags on its initiators).
  constexpr std::uint32_t kRecvSide = kQpAccessFlags | kQpMaxDestRdAtomic | kQpMinRnrTimer;
  constexpr std::uint32_t kSendSide = kQpRetryCnt | kQpRnrRetry | kQpMaxQpRdAtomic;
  for (auto& row : t) {
    for (auto& rule : row) {
      rule[3] = rule[4] = rule[0];
    }
  }
  auto& ini_init = t[S(QpState::kReset)][S(QpState::kInit)][3];
  ini_init.required &= ~kRecvSide;
  ini_init.optional |= kRecvSide;
  auto& ini_rtr = t[S(QpState::kInit)][S(QpState::kRtr)][3];
  ini_rtr.required &= ~kRecvSide;
  ini_rtr.optional |= kRecvSide;
  auto& tgt_rts = t[S(QpState::kRtr)][S(QpState::kRts)][4];
  tgt_rts.required &= ~kSendSide;
  tgt_rts.optional |= kSendSide;
  return t;
}

const Table& table() {
  static const Table t = make_table();
  return t;
}

}  // namespace

const TransitionRule& transition_rule(QpType type, QpState from, QpState to) {
  return table()[S(from)][S(to)][type_index(type)];
}

bool transition_ok(QpType type, QpState from, QpState to, std::uint32_t mask) {
  const TransitionRule& r = transition_rule(type, from, to);
  if (!r.valid) return false;
  const std::uint32_t attrs = mask & ~static_cast<std::uint32_t>(kQpState);
  if ((attrs & r.required) != r.required) return false;
  return (attrs & ~(r.required | r.optional)) == 0;
}

}  // namespace softrdma::rxe
