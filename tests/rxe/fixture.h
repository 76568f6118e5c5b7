// Test fixture: RoCEv2 devices on one in-memory fabric, helpers to register
// memory, create and connect QPs, and wait for completions.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "netdev/memory.h"
#include "rxe/device.h"
#include "tests/wait_until.h"

namespace softrdma::rxe::test {

using softrdma::test::wait_until;

inline netdev::IpAddr addr(int host) {
  return netdev::IpAddr::v4(0xC0000200u | host);
}  // 192.0.2.x

struct Node {
  std::unique_ptr<Device> dev;
  Pd* pd = nullptr;
  Cq* cq = nullptr;  // send and receive
  Node(std::shared_ptr<netdev::MemoryFabric> fabric, int host, std::uint32_t mtu = 9000,
       netdev::FaultConfig faults = {}) {
    dev = std::make_unique<Device>(
        std::make_unique<netdev::MemoryNetdev>(fabric, addr(host), mtu, faults));
    init();
  }
  explicit Node(std::unique_ptr<netdev::Netdev> nd, const CcConfig& cc = {}) {
    dev = std::make_unique<Device>(std::move(nd), "softroce0", cc);
    init();
  }
  void init() {
    pd = dev->alloc_pd();
    int err = 0;
    cq = dev->create_cq(65536, &err);
  }
  Gid gid() const { return dev->gids()[0]; }
};

// Memory registered with a node's device; deregistered before it is freed (the
// deregistration waits for copies in flight), as a well-behaved application does.
struct Buffer {
  std::vector<std::uint8_t> bytes;
  std::shared_ptr<Mr> mr;
  Device* dev;
  Buffer(Node& n, std::size_t size, std::uint32_t access, std::uint8_t fill = 0)
      : bytes(size, fill), dev(n.dev.get()) {
    int err = 0;
    mr = n.dev->reg_mr(n.pd, bytes.data(), size, reinterpret_cast<std::uint64_t>(bytes.data()),
                       access, &err);
  }
  ~Buffer() {
    if (mr) dev->dereg_mr(mr->lkey);
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  std::uint64_t addr(std::size_t off = 0) const {
    return reinterpret_cast<std::uint64_t>(bytes.data()) + off;
  }
  Sge sge(std::size_t off, std::uint32_t len) const { return Sge{addr(off), len, mr->lkey}; }
};

inline constexpr std::uint32_t kAllAccess =
    kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic;

struct ConnectOptions {
  Mtu mtu = Mtu::k4096;
  std::uint8_t timeout = 12;  // 16.8 ms
  std::uint8_t retry_cnt = 7;
  std::uint8_t rnr_retry = 7;
  std::uint8_t min_rnr_timer = 1;  // 10 us
  std::uint8_t rd_atomic = 16;
  std::uint32_t access = kAllAccess;
  std::uint16_t pkey_index = 0;
  std::uint32_t psn_a = 0x123456, psn_b = 0xFFFFF0;  // B's start wraps soon
};

inline QpCap default_cap() {
  QpCap c;
  c.max_send_wr = 4096;
  c.max_recv_wr = 4096;
  c.max_send_sge = 16;
  c.max_recv_sge = 16;
  c.max_inline_data = 256;
  return c;
}

// An XRC target gets a private XRC domain of its own unless `xrcd` names one.
inline Qp* make_qp(Node& n, QpType type, Srq* srq = nullptr, Xrcd* xrcd = nullptr) {
  QpCap cap = default_cap();
  int err = 0;
  if (type == QpType::kXrcRecv && !xrcd) xrcd = n.dev->open_xrcd(-1, 0, &err);
  Qp* qp = n.dev->create_qp(n.pd, type, n.cq, n.cq, srq, cap, false, &err, 0, xrcd);
  EXPECT_EQ(err, 0);
  return qp;
}

// RESET -> INIT -> RTR -> RTS with the masks a real program uses.
inline void bring_up(Qp* qp, const Gid& dgid, std::uint32_t dest_qpn, std::uint32_t rq_psn,
                     std::uint32_t sq_psn, const ConnectOptions& o) {
  QpAttr a;
  a.qp_state = QpState::kInit;
  a.pkey_index = o.pkey_index;
  a.port_num = 1;
  a.qp_access_flags = o.access;
  a.qkey = 0x11111111;
  const bool ud = qp->type() == QpType::kUd;
  ASSERT_EQ(qp->modify(a, kQpState | kQpPkeyIndex | kQpPort | (ud ? kQpQkey : kQpAccessFlags)), 0);
  a.qp_state = QpState::kRtr;
  a.path_mtu = o.mtu;
  a.dest_qp_num = dest_qpn;
  a.rq_psn = rq_psn;
  a.max_dest_rd_atomic = o.rd_atomic;
  a.min_rnr_timer = o.min_rnr_timer;
  a.ah_attr.dgid = dgid;
  std::uint32_t mask = kQpState;
  if (qp->type() == QpType::kRc) {
    mask |= kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn | kQpMaxDestRdAtomic | kQpMinRnrTimer;
  } else if (qp->type() == QpType::kUc) {
    mask |= kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn;
  }
  ASSERT_EQ(qp->modify(a, mask), 0);
  a.qp_state = QpState::kRts;
  a.sq_psn = sq_psn;
  a.timeout = o.timeout;
  a.retry_cnt = o.retry_cnt;
  a.rnr_retry = o.rnr_retry;
  a.max_rd_atomic = o.rd_atomic;
  mask = kQpState | kQpSqPsn;
  if (qp->type() == QpType::kRc) mask |= kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpMaxQpRdAtomic;
  ASSERT_EQ(qp->modify(a, mask), 0);
}

inline void connect(Node& a, Qp* qa, Node& b, Qp* qb, const ConnectOptions& o = {}) {
  bring_up(qa, b.gid(), qb->qpn(), o.psn_b, o.psn_a, o);
  bring_up(qb, a.gid(), qa->qpn(), o.psn_a, o.psn_b, o);
}

// A QP of `type` on a and one on b, connected to each other: {a's, b's}.
inline std::pair<Qp*, Qp*> connected_qps(Node& a, Node& b, QpType type = QpType::kRc,
                                         const ConnectOptions& o = {}) {
  Qp* qa = make_qp(a, type);
  Qp* qb = make_qp(b, type);
  connect(a, qa, b, qb, o);
  return {qa, qb};
}

// Polls until `n` completions arrived or `timeout` passed.
inline std::vector<Wc> wait_wc(Cq* cq, std::size_t n,
                               std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  std::vector<Wc> out;
  Wc buf[64];
  wait_until(
      [&] {
        while (out.size() < n) {
          const int got = cq->poll(std::span<Wc>(buf, std::min<std::size_t>(64, n - out.size())));
          if (got <= 0) break;
          out.insert(out.end(), buf, buf + got);
        }
        return out.size() >= n;
      },
      timeout, std::chrono::microseconds(50));
  return out;
}

// The next completion of `cq` (waiting as wait_wc does); when none comes, a test failure and a
// completion of status kGeneralErr with wr_id ~0, so that the checks after it fail too.
inline Wc one_wc(Cq* cq, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  const std::vector<Wc> got = wait_wc(cq, 1, timeout);
  if (!got.empty()) return got[0];
  ADD_FAILURE() << "no completion within " << timeout.count() << " ms";
  Wc none;
  none.wr_id = ~0ull;
  none.status = WcStatus::kGeneralErr;
  return none;
}

inline SendWr wr(WrOpcode op, std::uint64_t id, std::span<const Sge> sge,
                 std::uint32_t flags = kSendSignaled) {
  SendWr w;
  w.opcode = op;
  w.wr_id = id;
  w.sg_list = sge;
  w.send_flags = flags;
  return w;
}

// An RDMA WRITE, READ or atomic of `sge` addressed to `remote` at offset `off`.
inline SendWr rdma_wr(WrOpcode op, std::uint64_t id, std::span<const Sge> sge, const Buffer& remote,
                      std::size_t off = 0, std::uint32_t flags = kSendSignaled) {
  SendWr w = wr(op, id, sge, flags);
  w.remote_addr = remote.addr(off);
  w.rkey = remote.mr->rkey;
  return w;
}

inline int post_recv(Qp* qp, std::uint64_t id, std::span<const Sge> sge) {
  RecvWr r;
  r.wr_id = id;
  r.sg_list = sge;
  return qp->post_recv(r);
}

class Pair : public ::testing::Test {
 protected:
  void SetUp() override {
    fabric = std::make_shared<netdev::MemoryFabric>();
    a = std::make_unique<Node>(fabric, 1);
    b = std::make_unique<Node>(fabric, 2);
  }
  std::shared_ptr<netdev::MemoryFabric> fabric;
  std::unique_ptr<Node> a, b;
};

// A Pair with a QP of one type on each node, qa on a and qb on b, still in RESET.
template <QpType kType>
class QpPair : public Pair {
 protected:
  void SetUp() override {
    Pair::SetUp();
    qa = make_qp(*a, kType);
    qb = make_qp(*b, kType);
  }
  Qp *qa = nullptr, *qb = nullptr;
};

// A QpPair connected to each other with connect()'s defaults, in RTS.
template <QpType kType>
class Connected : public QpPair<kType> {
 protected:
  void SetUp() override {
    QpPair<kType>::SetUp();
    connect(*this->a, this->qa, *this->b, this->qb);
  }
};

}  // namespace softrdma::rxe::test
