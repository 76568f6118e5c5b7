// Fuzz target: the rxe responder and completer fed packet sequences. One device whose netdev
// receives only what the target queues; an RC, a UC and a UD QP "connected" to a peer that the
// input plays. The input picks a QP, then is a sequence of records, each a packet (built from a
// few fields around what the QP expects, so that most of them reach deep into the state machine,
// or raw bytes), a receive posted, or an RDMA READ / atomic / SEND posted (so that responses have
// something to complete). Both memory regions sit between guard bytes; after every input the
// guards must be untouched and every completion must stay within what was posted.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#include "rxe/device.h"
#include "tests/inject_netdev.h"
#include "tests/fuzz/reader.h"
#include "wire/roce_headers.h"
#include "wire/roce_opcode.h"

namespace {
using namespace softrdma;
using namespace softrdma::rxe;

constexpr std::size_t kGuard = 4096, kRemote = 64 * 1024, kLocal = 8192, kSlot = 1024;
constexpr std::uint8_t kGuardByte = 0xA5;
constexpr std::uint32_t kRqPsn = 0xFFFFF0, kSqPsn = 0x100;  // both near a wrap
constexpr std::uint32_t kPeerQpn = 0x77, kQkey = 0x11111111;

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "fuzz_rxe_qp: %s\n", what);
  std::abort();
}

using fuzz::Reader;

// Memory between guards: [guard | body | guard].
struct Guarded {
  std::vector<std::uint8_t> mem;
  explicit Guarded(std::size_t body) : mem(kGuard + body + kGuard, kGuardByte) {}
  std::uint8_t* body() { return mem.data() + kGuard; }
  std::uint64_t va(std::size_t off = 0) { return reinterpret_cast<std::uint64_t>(body()) + off; }
  bool guards_intact() const {
    const auto ok = [](std::uint8_t b) { return b == kGuardByte; };
    return std::all_of(mem.begin(), mem.begin() + kGuard, ok) &&
           std::all_of(mem.end() - kGuard, mem.end(), ok);
  }
};

struct World {
  const netdev::IpAddr self = netdev::IpAddr::v4(0xC0000202u),
                       peer = netdev::IpAddr::v4(0xC0000201u);
  test::InjectNetdev* inj;
  std::unique_ptr<Device> dev;
  Pd* pd = nullptr;
  Cq* cq = nullptr;
  Guarded remote{kRemote}, local{kLocal};
  std::shared_ptr<Mr> mr_remote, mr_local;
  Qp* qps[3] = {};
  std::uint32_t ah = 0;

  World() {
    auto nd = std::make_unique<test::InjectNetdev>(self, test::InjectNetdev::Options{4096 + 128, false, false});
    inj = nd.get();
    dev = std::make_unique<Device>(std::move(nd));
    int err = 0;
    pd = dev->alloc_pd();
    cq = dev->create_cq(1 << 14, &err);
    constexpr std::uint32_t all =
        kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic;
    mr_remote = dev->reg_mr(pd, remote.body(), kRemote, remote.va(), all, &err);
    mr_local = dev->reg_mr(pd, local.body(), kLocal, local.va(), kAccessLocalWrite, &err);
    if (!pd || !cq || !mr_remote || !mr_local) fail("set-up failed");
    const QpType types[3] = {QpType::kRc, QpType::kUc, QpType::kUd};
    for (int i = 0; i < 3; ++i) {
      QpCap cap;
      cap.max_send_wr = 256;
      cap.max_recv_wr = 256;
      cap.max_send_sge = 4;
      cap.max_recv_sge = 4;
      cap.max_inline_data = 64;
      qps[i] = dev->create_qp(pd, types[i], cq, cq, nullptr, cap, false, &err);
      if (!qps[i]) fail("create_qp failed");
    }
    AhAttr a;
    a.dgid = peer.bytes;
    a.sgid_index = 1;
    ah = dev->create_ah(pd, a, &err);
  }

  // RESET, then INIT, RTR, RTS toward the peer.
  void bring_up(Qp* qp) {
    QpAttr a;
    a.qp_state = QpState::kReset;
    if (qp->modify(a, kQpState) != 0) fail("modify to RESET failed");
    const bool ud = qp->type() == QpType::kUd, rc = qp->type() == QpType::kRc;
    a.qp_state = QpState::kInit;
    a.port_num = 1;
    a.qkey = kQkey;
    a.qp_access_flags = mr_remote->access;
    if (qp->modify(a, kQpState | kQpPkeyIndex | kQpPort | (ud ? kQpQkey : kQpAccessFlags)) != 0) {
      fail("modify to INIT failed");
    }
    a.qp_state = QpState::kRtr;
    a.path_mtu = Mtu::k1024;
    a.dest_qp_num = kPeerQpn;
    a.rq_psn = kRqPsn;
    a.max_dest_rd_atomic = 4;
    a.min_rnr_timer = 1;
    a.ah_attr.dgid = peer.bytes;
    a.ah_attr.sgid_index = 1;
    std::uint32_t mask = kQpState;
    if (rc)
      mask |= kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn | kQpMaxDestRdAtomic | kQpMinRnrTimer;
    if (qp->type() == QpType::kUc) mask |= kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn;
    if (qp->modify(a, mask) != 0) fail("modify to RTR failed");
    a.qp_state = QpState::kRts;
    a.sq_psn = kSqPsn;
    a.timeout = 14;
    a.retry_cnt = 1;
    a.rnr_retry = 1;
    a.max_rd_atomic = 4;
    mask = kQpState | kQpSqPsn;
    if (rc) mask |= kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpMaxQpRdAtomic;
    if (qp->modify(a, mask) != 0) fail("modify to RTS failed");
  }

  // Passes until every queued packet was taken and a whole pass ran on this thread after that.
  void drain() {
    for (int spins = 0; spins < 1000000; ++spins) {
      const bool empty = inj->pending() == 0;
      if (dev->poll_progress() && empty) return;
    }
    fail("the device stopped taking packets");
  }
};

World& world() {
  static World* w = new World();  // never destroyed: the progress thread outlives the input
  return *w;
}

std::uint32_t recv_slots = 0;  // receives posted for this input, each kSlot bytes

void post_recv(World& w, Qp* qp) {
  const std::uint32_t slot = recv_slots % (kRemote / kSlot);
  const Sge s{w.remote.va(slot * kSlot), kSlot, w.mr_remote->lkey};
  RecvWr r;
  r.wr_id = 0x1000 + recv_slots;
  r.sg_list = std::span(&s, 1);
  if (qp->post_recv(r) == 0) ++recv_slots;
}

// A send WR of kind k (READ, atomic, SEND, WRITE) whose local buffers lie in the local MR.
void post_send(World& w, Qp* qp, std::uint8_t k, std::uint16_t len) {
  SendWr wr;
  wr.wr_id = 0x2000 + k;
  wr.send_flags = kSendSignaled;
  const Sge s{w.local.va(), std::min<std::uint32_t>(len, kLocal), w.mr_local->lkey};
  const Sge atomic{w.local.va(8 * (k % 16)), 8, w.mr_local->lkey};
  wr.sg_list = std::span(&s, 1);
  wr.remote_addr = 0x10000;
  wr.rkey = 0x1234;
  switch (k % 4) {
    case 0:
      wr.opcode = WrOpcode::kRdmaRead;
      break;
    case 1:
      wr.opcode = k & 4 ? WrOpcode::kAtomicCmpAndSwp : WrOpcode::kAtomicFetchAndAdd;
      wr.sg_list = std::span(&atomic, 1);
      break;
    case 2:
      wr.opcode = WrOpcode::kSend;
      break;
    default:
      wr.opcode = WrOpcode::kRdmaWrite;
  }
  if (qp->type() == QpType::kUd) {
    wr.opcode = WrOpcode::kSend;
    wr.ah = w.ah;
    wr.remote_qpn = kPeerQpn;
    wr.remote_qkey = kQkey;
  }
  (void)qp->post_send(wr);
}

// One packet from a record's fields: opcode, flags, PSN near what is expected, an address and
// length around the remote region, and a payload of the pattern.
std::vector<std::uint8_t> build_packet(World& w, Qp* qp, Reader& r) {
  const std::uint8_t opcode = r.u8(), flags = r.u8();
  const auto psn_delta = static_cast<std::int8_t>(r.u8());
  const std::uint32_t va_off = r.u16() * 4u, len = r.u16();
  const std::uint16_t plen = r.u16() & 0x7FF;
  const std::uint8_t syndrome = r.u8(), msn = r.u8();
  const auto& info = wire::roce_opcode_info(opcode);
  wire::RoceHeaders h;
  h.bth.opcode = opcode;
  h.bth.dest_qp = flags & 0x80 ? (kPeerQpn + 1) : qp->qpn();
  h.bth.ack_req = flags & 1;
  h.bth.se = flags & 2;
  const std::uint32_t base = info.request ? kRqPsn : kSqPsn;
  h.bth.psn = (base + static_cast<std::uint32_t>(psn_delta)) & 0xFFFFFF;
  const std::uint32_t rkey = flags & 4 ? w.mr_local->lkey : w.mr_remote->rkey;
  std::uint64_t va = w.remote.va() + va_off - 1024;  // up to 1 KiB before the region, past its end
  if (flags & 8) va = ~std::uint64_t{0} - va_off;    // wrapping addresses
  h.reth = wire::Reth{va, rkey, flags & 0x10 ? 0xFFFFFFFFu - len : len};
  h.atomic_eth = wire::AtomicEth{va, rkey, 1, 2};
  h.aeth = wire::Aeth{syndrome, (kSqPsn + msn) & 0xFFFFFF};
  h.atomic_ack_eth = wire::AtomicAckEth{0x0102030405060708ull};
  h.deth = wire::Deth{flags & 0x20 ? kQkey + 1 : kQkey, 0, kPeerQpn};
  h.imm = 0xABCD;
  h.inv_rkey = flags & 0x40 ? w.mr_remote->rkey : 0x4242;
  std::vector<std::uint8_t> payload(info.payload ? plen : 0);
  for (std::size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<std::uint8_t>(i * 7);
  std::vector<std::uint8_t> pkt(payload.size() + 128);
  auto n = wire::build_roce(pkt, h, wire::Bytes(payload));
  if (!n) return {};
  pkt.resize(*n);
  return pkt;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  World& w = world();
  Reader r{data, size};
  Qp* qp = w.qps[r.u8() % 3];
  w.bring_up(qp);
  recv_slots = 0;
  for (int i = 0; i < 4; ++i) post_recv(w, qp);
  int records = 0;
  while (!r.empty() && records++ < 64) {
    const std::uint8_t kind = r.u8();
    if (kind < 0xE0) {
      w.inj->inject(w.peer, build_packet(w, qp, r));
    } else if (kind < 0xF0) {  // raw bytes, as they come
      std::vector<std::uint8_t> raw(std::min<std::size_t>(r.u8() * 8u + 12u, r.n));
      for (auto& b : raw) b = r.u8();
      w.inj->inject(w.peer, std::move(raw));
    } else if (kind < 0xF8) {
      post_recv(w, qp);
    } else {
      post_send(w, qp, r.u8(), r.u16());
    }
    if (kind & 1) w.drain();  // process now: the next packets meet the state this one left
  }
  w.drain();
  // Completions stay within what was posted.
  Wc wc[64];
  for (int got; (got = w.cq->poll(wc)) > 0;) {
    for (int i = 0; i < got; ++i) {
      // (A WRITE with immediate consumes a receive but reports the WRITE's length.)
      if (wc[i].status == WcStatus::kSuccess && wc[i].opcode == WcOpcode::kRecv &&
          wc[i].byte_len > kSlot) {
        fail("a receive completed with more bytes than its buffer holds");
      }
    }
  }
  QpAttr a;
  a.qp_state = QpState::kReset;  // flushes what is left: the next input starts afresh
  qp->modify(a, kQpState);
  w.drain();
  while (w.cq->poll(wc) > 0) {
  }
  if (!w.remote.guards_intact()) fail("a write landed outside the remote-access region");
  if (!w.local.guards_intact()) fail("a write landed outside the local region");
  return 0;
}
