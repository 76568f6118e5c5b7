// Every transition of the QP state machine, valid and invalid, SQE included, with the
// attribute masks checked (wrong masks -> EINVAL); what is expected comes from the tests'
// own reading of IBTA (ibta_qp_transitions.h), not from the engine's table.
#include <string>
#include <vector>

#include "rxe/qp_state.h"
#include "tests/rxe/fixture.h"
#include "tests/rxe/ibta_qp_transitions.h"

namespace softrdma::rxe::test {
namespace {

constexpr QpState kStates[] = {QpState::kReset, QpState::kInit, QpState::kRtr, QpState::kRts,
                               QpState::kSqd,   QpState::kSqe,  QpState::kErr};
constexpr QpType kTypes[] = {QpType::kRc, QpType::kUc, QpType::kUd, QpType::kXrcSend,
                             QpType::kXrcRecv};

std::string name(QpType t, QpState from, QpState to) {
  const char* type = t == QpType::kRc        ? "RC"
                     : t == QpType::kUc      ? "UC"
                     : t == QpType::kUd      ? "UD"
                     : t == QpType::kXrcSend ? "XRC INI"
                                             : "XRC TGT";
  return std::string(type) + " " + to_string(from) + " -> " + to_string(to);
}

// Attribute values that are valid for every transition, whichever of them a mask names.
QpAttr valid_attributes(QpState to, const Gid& dgid) {
  QpAttr a;
  a.qp_state = to;
  a.port_num = 1;
  a.qkey = 1;
  a.path_mtu = Mtu::k1024;
  a.ah_attr.dgid = dgid;
  a.dest_qp_num = 0x11;
  a.max_dest_rd_atomic = 1;
  a.max_rd_atomic = 1;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  return a;
}

// UC and UD (IBTA 10.3.1): a send that fails locally takes the send queue to SQE.
void send_error(Node& n, Qp* qp, const Gid& dgid) {
  Buffer s(n, 64, kAllAccess);
  Sge bad = s.sge(0, 16);
  bad.lkey ^= 0x40;
  SendWr w = wr(WrOpcode::kSend, 1, std::span(&bad, 1));
  if (qp->type() == QpType::kUd) {
    AhAttr ah;
    ah.dgid = dgid;
    int err = 0;
    w.ah = n.dev->create_ah(n.pd, ah, &err);
    ASSERT_EQ(err, 0);
    w.remote_qpn = 0x11;
    w.remote_qkey = 1;
  }
  ASSERT_EQ(qp->post_send(w), 0);
  const Wc wc = one_wc(n.cq);
  EXPECT_EQ(wc.status, WcStatus::kLocProtErr);
}

// Drives a QP forward to `s` along the normal path, with the attributes IBTA requires.
void drive(Node& n, Qp* qp, QpState s, const Gid& gid) {
  const QpType t = qp->type();
  QpAttr a = valid_attributes(s, gid);
  if (s == QpState::kErr) {
    ASSERT_EQ(qp->modify(a, kQpState), 0);
    return;
  }
  const QpState path[] = {QpState::kInit, QpState::kRtr, QpState::kRts, QpState::kSqd};
  const QpState last = s == QpState::kSqe ? QpState::kRts : s;
  for (QpState step : path) {
    if (static_cast<int>(step) > static_cast<int>(last)) break;
    const QpState from = qp->state();
    if (static_cast<int>(step) <= static_cast<int>(from)) continue;  // already past it
    a.qp_state = step;
    ASSERT_EQ(qp->modify(a, kQpState | ibta::transition(t, from, step).required), 0)
        << name(t, from, step);
  }
  if (s == QpState::kSqe) send_error(n, qp, gid);
}

// The engine's own table says what IBTA says, transition by transition.
TEST(QpStateTable, MatchesIbtaForEveryTransition) {
  for (QpType t : kTypes) {
    for (QpState from : kStates) {
      for (QpState to : kStates) {
        const ibta::Transition want = ibta::transition(t, from, to);
        const TransitionRule& rule = transition_rule(t, from, to);
        EXPECT_EQ(rule.valid, want.allowed) << name(t, from, to);
        if (want.allowed) {
          EXPECT_EQ(rule.required, want.required) << name(t, from, to);
        }
      }
    }
  }
}

class QpStates : public Pair {};

// Every (from, to) through the engine's Modify QP: an allowed transition with exactly the
// attributes IBTA requires succeeds; any other fails with EINVAL and leaves the state.
TEST_F(QpStates, ModifySucceedsExactlyWhereIbtaAllowsIt) {
  for (QpType t : kTypes) {
    for (QpState from : kStates) {
      if (from == QpState::kSqe && !ibta::transition(t, QpState::kSqe, QpState::kRts).allowed) {
        continue;  // no such state for RC and XRC
      }
      for (QpState to : kStates) {
        SCOPED_TRACE(name(t, from, to));
        const ibta::Transition want = ibta::transition(t, from, to);
        // An invalid transition is tried bare and with the attributes of the normal way in.
        std::vector<std::uint32_t> masks = {want.required};
        if (!want.allowed) masks.push_back(ibta::path_attributes(t, to));
        for (std::uint32_t mask : masks) {
          Qp* qp = make_qp(*a, t);
          drive(*a, qp, from, b->gid());
          ASSERT_EQ(qp->state(), from);
          const QpAttr attr = valid_attributes(to, b->gid());
          const int rc = qp->modify(attr, kQpState | mask);
          if (want.allowed) {
            EXPECT_EQ(rc, 0);
            EXPECT_EQ(qp->state(), to);
          } else {
            EXPECT_EQ(rc, EINVAL);
            EXPECT_EQ(qp->state(), from);
          }
          ASSERT_EQ(a->dev->destroy_qp(qp), 0);
        }
      }
    }
  }
}

// An RC QP has no SQE: a send error takes all of it to Error.
TEST_F(QpStates, RcSendErrorGoesToErrorNotSqe) {
  Qp* qp = make_qp(*a, QpType::kRc);
  drive(*a, qp, QpState::kRts, b->gid());
  send_error(*a, qp, b->gid());
  EXPECT_EQ(qp->state(), QpState::kErr);
}

TEST_F(QpStates, MissingRequiredOrExtraAttributesAreEinval) {
  for (QpType t : kTypes) {
    for (QpState from : {QpState::kReset, QpState::kInit, QpState::kRtr}) {
      const QpState to = static_cast<QpState>(static_cast<int>(from) + 1);
      const std::uint32_t required = ibta::transition(t, from, to).required;
      // Each required bit left out in turn.
      for (std::uint32_t bit = 1; bit; bit <<= 1) {
        if (!(required & bit)) continue;
        Qp* qp = make_qp(*a, t);
        drive(*a, qp, from, b->gid());
        QpAttr attr;
        attr.qp_state = to;
        attr.ah_attr.dgid = b->gid();
        EXPECT_EQ(qp->modify(attr, kQpState | (required & ~bit)), EINVAL);
        EXPECT_EQ(qp->state(), from);
        ASSERT_EQ(a->dev->destroy_qp(qp), 0);
      }
      // An attribute that is neither required nor optional.
      Qp* qp = make_qp(*a, t);
      drive(*a, qp, from, b->gid());
      QpAttr attr;
      attr.qp_state = to;
      attr.port_num = 1;
      attr.ah_attr.dgid = b->gid();
      attr.path_mtu = Mtu::k1024;
      const std::uint32_t extra = kQpCap;
      EXPECT_EQ(qp->modify(attr, kQpState | required | extra), EINVAL);
      ASSERT_EQ(a->dev->destroy_qp(qp), 0);
    }
  }
}

TEST_F(QpStates, BadValuesAndCurrentStateMismatchAreEinval) {
  Qp* qp = make_qp(*a, QpType::kRc);
  QpAttr attr;
  attr.qp_state = QpState::kInit;
  attr.port_num = 2;  // there is one port
  EXPECT_EQ(qp->modify(attr, kQpState | kQpPkeyIndex | kQpPort | kQpAccessFlags), EINVAL);
  attr.port_num = 1;
  attr.pkey_index = 3;  // one P_Key
  EXPECT_EQ(qp->modify(attr, kQpState | kQpPkeyIndex | kQpPort | kQpAccessFlags), EINVAL);
  attr.pkey_index = 0;
  ASSERT_EQ(qp->modify(attr, kQpState | kQpPkeyIndex | kQpPort | kQpAccessFlags), 0);
  attr.qp_state = QpState::kRtr;
  attr.cur_qp_state = QpState::kRts;  // wrong current state
  EXPECT_EQ(qp->modify(attr, kQpState | kQpCurState), EINVAL);
  attr.max_dest_rd_atomic = 200;  // above the device limit
  attr.ah_attr.dgid = b->gid();
  EXPECT_EQ(qp->modify(attr, kQpState | kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn |
                                 kQpMaxDestRdAtomic | kQpMinRnrTimer),
            EINVAL);
}

TEST_F(QpStates, PostingBeforeRtsIsEinvalAndQueryReportsAttributes) {
  Qp* qp = make_qp(*a, QpType::kRc);
  Buffer s(*a, 64, kAllAccess);
  const Sge sg = s.sge(0, 8);
  EXPECT_EQ(qp->post_send(wr(WrOpcode::kSend, 1, std::span(&sg, 1))), EINVAL);
  EXPECT_EQ(post_recv(qp, 1, std::span(&sg, 1)), EINVAL);  // RESET
  drive(*a, qp, QpState::kRtr, b->gid());
  EXPECT_EQ(qp->post_send(wr(WrOpcode::kSend, 1, std::span(&sg, 1))), EINVAL);
  EXPECT_EQ(post_recv(qp, 1, std::span(&sg, 1)), 0);  // receives are fine from INIT on
  QpAttr q;
  QpCap cap;
  ASSERT_EQ(qp->query(q, cap), 0);
  EXPECT_EQ(q.qp_state, QpState::kRtr);
  EXPECT_EQ(q.path_mtu, Mtu::k1024);
  EXPECT_EQ(q.dest_qp_num, 0x11u);
  EXPECT_EQ(cap.max_send_wr, default_cap().max_send_wr);
  // Unsupported operations on this transport.
  drive(*a, qp, QpState::kRts, b->gid());
  Qp* ud = make_qp(*a, QpType::kUd);
  drive(*a, ud, QpState::kRts, b->gid());
  SendWr w = wr(WrOpcode::kRdmaWrite, 2, std::span(&sg, 1));
  EXPECT_EQ(ud->post_send(w), EINVAL);
  w.opcode = WrOpcode::kBindMw;  // memory windows are for connected QPs
  EXPECT_EQ(ud->post_send(w), EINVAL);
  w.opcode = WrOpcode::kTso;
  EXPECT_EQ(qp->post_send(w), EOPNOTSUPP);
}

}  // namespace
}  // namespace softrdma::rxe::test
