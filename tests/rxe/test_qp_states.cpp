// Every transition of the QP state machine, valid and invalid, with the
// attribute masks checked (wrong masks -> EINVAL).
#include "rxe/qp_state.h"
#include "tests/rxe/fixture.h"

namespace softrdma::rxe::test {
namespace {

constexpr QpState kStates[] = {QpState::kReset, QpState::kInit, QpState::kRtr, QpState::kRts,
                               QpState::kSqd,   QpState::kSqe,  QpState::kErr};
constexpr QpType kTypes[] = {QpType::kRc, QpType::kUc, QpType::kUd};

// Drives a QP forward to `s` along the normal path.
void drive(Qp* qp, QpState s, const Gid& gid) {
  QpAttr a;
  a.port_num = 1;
  a.qkey = 1;
  a.path_mtu = Mtu::k1024;
  a.ah_attr.dgid = gid;
  a.dest_qp_num = 0x11;
  a.max_dest_rd_atomic = 1;
  a.max_rd_atomic = 1;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  const QpType t = qp->type();
  const QpState path[] = {QpState::kInit, QpState::kRtr, QpState::kRts, QpState::kSqd};
  if (s == QpState::kErr) {
    a.qp_state = QpState::kErr;
    ASSERT_EQ(qp->modify(a, kQpState), 0);
    return;
  }
  if (s == QpState::kSqe) GTEST_SKIP();
  for (QpState step : path) {
    if (static_cast<int>(step) > static_cast<int>(s)) break;
    const QpState from = qp->state();
    if (static_cast<int>(step) <= static_cast<int>(from)) continue;  // already past it
    a.qp_state = step;
    ASSERT_EQ(qp->modify(a, kQpState | transition_rule(t, from, step).required), 0)
        << to_string(from) << " -> " << to_string(step);
  }
}

TEST(QpStateTable, MatchesTheSpecForKeyTransitions) {
  EXPECT_EQ(transition_rule(QpType::kRc, QpState::kInit, QpState::kRtr).required,
            kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn | kQpMaxDestRdAtomic | kQpMinRnrTimer);
  EXPECT_EQ(transition_rule(QpType::kUc, QpState::kInit, QpState::kRtr).required,
            kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn);
  EXPECT_EQ(transition_rule(QpType::kUd, QpState::kInit, QpState::kRtr).required, 0u);
  EXPECT_EQ(transition_rule(QpType::kRc, QpState::kRtr, QpState::kRts).required,
            kQpSqPsn | kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpMaxQpRdAtomic);
  EXPECT_EQ(transition_rule(QpType::kUd, QpState::kReset, QpState::kInit).required,
            kQpPkeyIndex | kQpPort | kQpQkey);
  EXPECT_FALSE(transition_rule(QpType::kRc, QpState::kSqe, QpState::kRts).valid);
  EXPECT_TRUE(transition_rule(QpType::kUc, QpState::kSqe, QpState::kRts).valid);
  EXPECT_FALSE(transition_rule(QpType::kRc, QpState::kReset, QpState::kRtr).valid);
  EXPECT_FALSE(transition_rule(QpType::kRc, QpState::kInit, QpState::kRts).valid);
  for (QpType t : kTypes) {
    for (QpState s : kStates) {
      EXPECT_TRUE(transition_rule(t, s, QpState::kReset).valid);
      EXPECT_TRUE(transition_rule(t, s, QpState::kErr).valid);
    }
  }
}

class QpStates : public Pair {};

TEST_F(QpStates, EveryValidTransitionWithExactlyTheRequiredMaskSucceeds) {
  for (QpType t : kTypes) {
    for (QpState from : kStates) {
      if (from == QpState::kSqe) continue;  // reached only through a send error
      for (QpState to : kStates) {
        const TransitionRule& r = transition_rule(t, from, to);
        Qp* qp = make_qp(*a, t);
        drive(qp, from, b->gid());
        ASSERT_EQ(qp->state(), from);
        QpAttr attr;
        attr.qp_state = to;
        attr.port_num = 1;
        attr.qkey = 5;
        attr.path_mtu = Mtu::k1024;
        attr.ah_attr.dgid = b->gid();
        attr.dest_qp_num = 0x12;
        attr.max_dest_rd_atomic = 1;
        attr.max_rd_atomic = 1;
        attr.timeout = 14;
        attr.retry_cnt = 7;
        attr.rnr_retry = 7;
        const int rc = qp->modify(attr, kQpState | r.required);
        SCOPED_TRACE(std::string(to_string(from)) + " -> " + to_string(to) + " type " +
                     std::to_string(static_cast<int>(t)));
        if (r.valid) {
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

TEST_F(QpStates, MissingRequiredOrExtraAttributesAreEinval) {
  for (QpType t : kTypes) {
    for (QpState from : {QpState::kReset, QpState::kInit, QpState::kRtr}) {
      const QpState to = static_cast<QpState>(static_cast<int>(from) + 1);
      const TransitionRule& r = transition_rule(t, from, to);
      // Each required bit left out in turn.
      for (std::uint32_t bit = 1; bit; bit <<= 1) {
        if (!(r.required & bit)) continue;
        Qp* qp = make_qp(*a, t);
        drive(qp, from, b->gid());
        QpAttr attr;
        attr.qp_state = to;
        attr.ah_attr.dgid = b->gid();
        EXPECT_EQ(qp->modify(attr, kQpState | (r.required & ~bit)), EINVAL);
        EXPECT_EQ(qp->state(), from);
        ASSERT_EQ(a->dev->destroy_qp(qp), 0);
      }
      // An attribute that is neither required nor optional.
      Qp* qp = make_qp(*a, t);
      drive(qp, from, b->gid());
      QpAttr attr;
      attr.qp_state = to;
      attr.port_num = 1;
      attr.ah_attr.dgid = b->gid();
      attr.path_mtu = Mtu::k1024;
      const std::uint32_t extra = kQpCap;
      EXPECT_EQ(qp->modify(attr, kQpState | r.required | extra), EINVAL);
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
  drive(qp, QpState::kRtr, b->gid());
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
  drive(qp, QpState::kRts, b->gid());
  Qp* ud = make_qp(*a, QpType::kUd);
  drive(ud, QpState::kRts, b->gid());
  SendWr w = wr(WrOpcode::kRdmaWrite, 2, std::span(&sg, 1));
  EXPECT_EQ(ud->post_send(w), EINVAL);
  w.opcode = WrOpcode::kBindMw;  // memory windows are for connected QPs
  EXPECT_EQ(ud->post_send(w), EINVAL);
  w.opcode = WrOpcode::kTso;
  EXPECT_EQ(qp->post_send(w), EOPNOTSUPP);
}

}  // namespace
}  // namespace softrdma::rxe::test
