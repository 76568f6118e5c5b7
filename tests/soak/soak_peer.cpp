// One side of the soak test (tests/soak/soak.py): a long-lived verbs program that, round after
// round until its deadline, creates QPs of one type (RC, UC, UD in turn), connects them to its
// partner through a socket the driver gave both, moves checked data one way (the roles swap every
// round) and destroys them again. RC must deliver every message and RDMA WRITE intact; UC and UD
// may lose messages to injected drops, but what arrives must be intact. Prints one line per round
// and a summary; exits 1 on a corrupted message, an RC loss or a verbs error.
// usage: soak_peer FD SIDE(0|1) SECONDS
#include <dirent.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

constexpr int kQps = 4;                  // QPs per round
constexpr int kMsgs = 64;                // messages per QP per round
constexpr std::uint32_t kMsg = 2048;     // bytes of a message (UD: at most the MTU)
constexpr std::uint32_t kBlock = 16384;  // RC: bytes of the RDMA WRITE per QP
constexpr std::uint32_t kGrh = 40;
constexpr std::uint32_t kQkey = 0x11111111;
constexpr std::size_t kSlot = kMsg + kGrh;
constexpr std::size_t kRecvArea = std::size_t{kQps} * kMsgs * kSlot;
constexpr std::size_t kBytes = kRecvArea + std::size_t{kQps} * kBlock;

int sock = -1, side = 0;

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "soak_peer %d: %s (errno %d)\n", side, what, errno);
  std::exit(1);
}

void put(const void* p, std::size_t n) {
  const auto* b = static_cast<const std::uint8_t*>(p);
  while (n) {
    const ssize_t k = ::write(sock, b, n);
    if (k <= 0) die("the partner went away");
    b += k;
    n -= static_cast<std::size_t>(k);
  }
}
void get(void* p, std::size_t n) {
  auto* b = static_cast<std::uint8_t*>(p);
  while (n) {
    const ssize_t k = ::read(sock, b, n);
    if (k <= 0) die("the partner went away");
    b += k;
    n -= static_cast<std::size_t>(k);
  }
}

std::uint8_t pattern(std::uint64_t tag, std::size_t i) {
  return static_cast<std::uint8_t>(tag * 131 + i * 7 + (i >> 8));
}
void fill(std::uint8_t* p, std::size_t n, std::uint64_t tag) {
  std::memcpy(p, &tag, 8);
  for (std::size_t i = 8; i < n; ++i) p[i] = pattern(tag, i);
}
bool intact(const std::uint8_t* p, std::size_t n, std::uint64_t& tag) {
  if (n < 8) return false;
  std::memcpy(&tag, p, 8);
  for (std::size_t i = 8; i < n; ++i) {
    if (p[i] != pattern(tag, i)) return false;
  }
  return true;
}

struct PeerInfo {
  std::uint32_t qpn[kQps];
  std::uint32_t psn;
  std::uint32_t rkey;
  std::uint64_t addr;
  ibv_gid gid;
};

struct Side {
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_cq* cq = nullptr;
  ibv_mr* mr = nullptr;
  std::vector<std::uint8_t> buf = std::vector<std::uint8_t>(kBytes);
  std::vector<std::uint8_t> sbuf = std::vector<std::uint8_t>(kMsg + kBlock);
  ibv_mr* smr = nullptr;
  ibv_gid gid{};
};

void modify(ibv_qp* qp, ibv_qp_attr& a, int mask) {
  if (ibv_modify_qp(qp, &a, mask) != 0) die("ibv_modify_qp");
}

void bring_up(ibv_qp* qp, ibv_qp_type t, const PeerInfo& peer, int i, std::uint32_t my_psn) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.pkey_index = 0;
  a.port_num = 1;
  a.qkey = kQkey;
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE;
  modify(qp, a,
         IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
             (t == IBV_QPT_UD ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS));
  a = {};
  a.qp_state = IBV_QPS_RTR;
  int mask = IBV_QP_STATE;
  if (t != IBV_QPT_UD) {
    a.path_mtu = IBV_MTU_1024;
    a.dest_qp_num = peer.qpn[i];
    a.rq_psn = peer.psn;
    a.ah_attr.is_global = 1;
    a.ah_attr.grh.dgid = peer.gid;
    a.ah_attr.grh.sgid_index = 1;
    a.ah_attr.grh.hop_limit = 64;
    a.ah_attr.port_num = 1;
    mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
    if (t == IBV_QPT_RC) {
      a.max_dest_rd_atomic = 1;
      a.min_rnr_timer = 1;
      mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
    }
  }
  modify(qp, a, mask);
  a = {};
  a.qp_state = IBV_QPS_RTS;
  a.sq_psn = my_psn;
  mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
  if (t == IBV_QPT_RC) {
    a.timeout = 16;  // 268 ms: seven of them ride out a stalled scheduler on a shared VM
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.max_rd_atomic = 1;
    mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
  }
  modify(qp, a, mask);
}

// Completions of QPs destroyed in an earlier round, seen later: none may come once
// ibv_destroy_qp returned (soak.py fails the run on any); counted and skipped.
long late_completions = 0;

// Polls until `want` completions of the QPs `qps` came or `deadline` passed.
int poll_until(ibv_cq* cq, ibv_qp* const (&qps)[kQps], int want, Clock::time_point deadline,
               std::vector<ibv_wc>& out) {
  ibv_wc wc[32];
  int got = 0;
  while (got < want && Clock::now() < deadline) {
    const int n = ibv_poll_cq(cq, std::min(32, want - got), wc);
    if (n < 0) die("ibv_poll_cq");
    for (int i = 0; i < n; ++i) {
      bool ours = false;
      for (const ibv_qp* qp : qps) ours = ours || wc[i].qp_num == qp->qp_num;
      if (!ours) {
        ++late_completions;
        continue;
      }
      out.push_back(wc[i]);
      ++got;
    }
    if (n == 0) usleep(100);
  }
  return got;
}

// This process's resident set (KiB) and open file descriptors, for the driver to watch.
long rss_kb() {
  long pages = 0, resident = 0;
  if (std::FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}
int open_fds() {
  int n = 0;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (readdir(d)) ++n;
    closedir(d);
    n -= 3;  // ".", ".." and the directory's own fd
  }
  return n;
}

struct Totals {
  long rounds = 0, sent = 0, received = 0, lost = 0, repeated = 0, qps = 0;
};

void round_trip(Side& s, ibv_qp_type t, bool sender, long round, Totals& tot) {
  ibv_qp* qps[kQps];
  for (auto& qp : qps) {
    ibv_qp_init_attr ia{};
    ia.send_cq = s.cq;
    ia.recv_cq = s.cq;
    ia.qp_type = t;
    ia.cap.max_send_wr = kMsgs + 4;
    ia.cap.max_recv_wr = kMsgs + 4;
    ia.cap.max_send_sge = 1;
    ia.cap.max_recv_sge = 1;
    qp = ibv_create_qp(s.pd, &ia);
    if (!qp) die("ibv_create_qp");
  }
  tot.qps += kQps;
  PeerInfo mine{}, peer{};
  for (int i = 0; i < kQps; ++i) mine.qpn[i] = qps[i]->qp_num;
  mine.psn = static_cast<std::uint32_t>(round * 7919) & 0xFFFFFF;
  mine.rkey = s.mr->rkey;
  mine.addr = reinterpret_cast<std::uintptr_t>(s.buf.data());
  mine.gid = s.gid;
  put(&mine, sizeof mine);
  get(&peer, sizeof peer);
  for (int i = 0; i < kQps; ++i) bring_up(qps[i], t, peer, i, mine.psn);
  const std::uint32_t len = t == IBV_QPT_UD ? 1024 : kMsg;  // UD: within the path MTU
  const auto tag_of = [&](int q, int m) {
    return (static_cast<std::uint64_t>(round) << 32) | static_cast<std::uint64_t>(q * kMsgs + m);
  };
  std::vector<ibv_wc> wcs;
  if (!sender) {
    for (int q = 0; q < kQps; ++q) {
      for (int m = 0; m < kMsgs; ++m) {
        const std::size_t slot = static_cast<std::size_t>(q * kMsgs + m);
        ibv_sge sge{reinterpret_cast<std::uintptr_t>(s.buf.data() + slot * kSlot),
                    static_cast<std::uint32_t>(kSlot), s.mr->lkey};
        ibv_recv_wr wr{}, *bad = nullptr;
        wr.wr_id = slot;
        wr.sg_list = &sge;
        wr.num_sge = 1;
        if (ibv_post_recv(qps[q], &wr, &bad) != 0) die("ibv_post_recv");
      }
    }
    std::memset(s.buf.data() + kRecvArea, 0, std::size_t{kQps} * kBlock);
    const char ready = 'r';
    put(&ready, 1);
    long sent_by_peer = 0;
    // RC: everything arrives; UC/UD: what arrived by the time the sender is done, and a little.
    const auto limit = Clock::now() + std::chrono::seconds(30);
    if (t == IBV_QPT_RC) {
      poll_until(s.cq, qps, kQps * kMsgs, limit, wcs);
      get(&sent_by_peer, sizeof sent_by_peer);
    } else {
      get(&sent_by_peer, sizeof sent_by_peer);
      poll_until(s.cq, qps, kQps * kMsgs, Clock::now() + std::chrono::milliseconds(200), wcs);
    }
    std::set<std::uint64_t> seen;
    for (const auto& wc : wcs) {
      if (wc.status != IBV_WC_SUCCESS) {
        std::fprintf(stderr, "soak_peer %d: round %ld: receive failed: %s\n", side, round,
                     ibv_wc_status_str(wc.status));
        std::exit(1);
      }
      const std::uint8_t* p = s.buf.data() + wc.wr_id * kSlot + (t == IBV_QPT_UD ? kGrh : 0);
      const std::uint32_t n = wc.byte_len - (t == IBV_QPT_UD ? kGrh : 0);
      std::uint64_t tag = 0;
      if (n != len || !intact(p, n, tag) || (tag >> 32) != static_cast<std::uint64_t>(round)) {
        std::fprintf(stderr,
                     "soak_peer %d: round %ld: a corrupted message (QP %u, slot %llu, %u bytes, "
                     "tag %llx)\n",
                     side, round, wc.qp_num, static_cast<unsigned long long>(wc.wr_id), n,
                     static_cast<unsigned long long>(tag));
        std::exit(1);
      }
      // UD has no sequence numbers: an injected duplicate arrives twice. RC and UC drop them.
      if (!seen.insert(tag).second) {
        if (t != IBV_QPT_UD) {
          std::fprintf(stderr, "soak_peer %d: round %ld: a message delivered twice\n", side, round);
          std::exit(1);
        }
        ++tot.repeated;
      }
    }
    const long got = static_cast<long>(seen.size());
    if (t == IBV_QPT_RC) {
      if (got != sent_by_peer) {
        std::fprintf(stderr, "soak_peer %d: round %ld: RC delivered %ld of %ld\n", side, round, got,
                     sent_by_peer);
        std::exit(1);
      }
      for (int q = 0; q < kQps; ++q) {
        std::uint64_t tag = 0;
        if (!intact(s.buf.data() + kRecvArea + std::size_t(q) * kBlock, kBlock, tag) ||
            tag != tag_of(q, 0xFFFF)) {
          std::fprintf(stderr, "soak_peer %d: round %ld: RDMA WRITE block %d wrong\n", side, round,
                       q);
          std::exit(1);
        }
      }
    }
    tot.received += got;
    tot.lost += sent_by_peer - got;
    std::printf("round %ld %s recv %ld of %ld\n", round,
                t == IBV_QPT_RC   ? "RC"
                : t == IBV_QPT_UC ? "UC"
                                  : "UD",
                got, sent_by_peer);
  } else {
    char ready = 0;
    get(&ready, 1);
    ibv_ah* ah = nullptr;
    if (t == IBV_QPT_UD) {
      ibv_ah_attr aa{};
      aa.is_global = 1;
      aa.grh.dgid = peer.gid;
      aa.grh.sgid_index = 1;
      aa.grh.hop_limit = 64;
      aa.port_num = 1;
      ah = ibv_create_ah(s.pd, &aa);
      if (!ah) die("ibv_create_ah");
    }
    int posted = 0;
    for (int q = 0; q < kQps; ++q) {
      if (t == IBV_QPT_RC) {  // the block first: it is in place when the SENDs arrive
        std::uint8_t* b = s.sbuf.data() + kMsg;
        fill(b, kBlock, tag_of(q, 0xFFFF));
        ibv_sge sge{reinterpret_cast<std::uintptr_t>(b), kBlock, s.smr->lkey};
        ibv_send_wr wr{}, *bad = nullptr;
        wr.wr_id = 1000000;
        wr.opcode = IBV_WR_RDMA_WRITE;
        wr.sg_list = &sge;
        wr.num_sge = 1;
        wr.send_flags = IBV_SEND_SIGNALED;
        wr.wr.rdma.remote_addr = peer.addr + kRecvArea + std::uint64_t(q) * kBlock;
        wr.wr.rdma.rkey = peer.rkey;
        if (ibv_post_send(qps[q], &wr, &bad) != 0) die("ibv_post_send (WRITE)");
        ++posted;
        // The block is copied at post time only for inline data: wait for it before reusing sbuf.
        std::vector<ibv_wc> w;
        poll_until(s.cq, qps, 1, Clock::now() + std::chrono::seconds(30), w);
        if (w.size() != 1 || w[0].status != IBV_WC_SUCCESS || w[0].wr_id != 1000000) {
          std::fprintf(stderr,
                       "soak_peer %d: round %ld: RDMA WRITE on QP %u: %s (wr_id %llu, qp_num %u)\n",
                       side, round, qps[q]->qp_num,
                       w.empty() ? "no completion in 30 s" : ibv_wc_status_str(w[0].status),
                       w.empty() ? 0ull : static_cast<unsigned long long>(w[0].wr_id),
                       w.empty() ? 0u : w[0].qp_num);
          std::exit(1);
        }
        wcs.push_back(w[0]);
      }
      for (int m = 0; m < kMsgs; ++m) {
        fill(s.sbuf.data(), len, tag_of(q, m));
        ibv_sge sge{reinterpret_cast<std::uintptr_t>(s.sbuf.data()), len, s.smr->lkey};
        ibv_send_wr wr{}, *bad = nullptr;
        wr.wr_id = static_cast<std::uint64_t>(q * kMsgs + m);
        wr.opcode = IBV_WR_SEND;
        wr.sg_list = &sge;
        wr.num_sge = 1;
        wr.send_flags = IBV_SEND_SIGNALED;
        if (ah) {
          wr.wr.ud.ah = ah;
          wr.wr.ud.remote_qpn = peer.qpn[q];
          wr.wr.ud.remote_qkey = kQkey;
        }
        if (ibv_post_send(qps[q], &wr, &bad) != 0) die("ibv_post_send");
        ++posted;
        // One message in flight from sbuf at a time: its completion before the next fill.
        std::vector<ibv_wc> w;
        poll_until(s.cq, qps, 1, Clock::now() + std::chrono::seconds(30), w);
        if (w.size() != 1 || w[0].status != IBV_WC_SUCCESS) {
          std::fprintf(stderr, "soak_peer %d: round %ld: send on QP %u failed: %s (qp_num %u)\n",
                       side, round, qps[q]->qp_num,
                       w.empty() ? "no completion in 30 s" : ibv_wc_status_str(w[0].status),
                       w.empty() ? 0u : w[0].qp_num);
          std::exit(1);
        }
      }
    }
    const long sent = kQps * kMsgs;
    put(&sent, sizeof sent);
    tot.sent += sent;
    if (ah) ibv_destroy_ah(ah);
  }
  const char done = 'd';  // neither side destroys its QPs while the other still uses them
  put(&done, 1);
  char other = 0;
  get(&other, 1);
  for (auto* qp : qps) {
    if (ibv_destroy_qp(qp) != 0) die("ibv_destroy_qp");
  }
  ibv_wc wc[32];
  while (ibv_poll_cq(s.cq, 32, wc) > 0) {
  }
  ++tot.rounds;
  if (round % 10 == 0)
    std::printf("sample round %ld rss_kb %ld fds %d\n", round, rss_kb(), open_fds());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s FD SIDE SECONDS\n", argv[0]);
    return 2;
  }
  sock = std::atoi(argv[1]);
  side = std::atoi(argv[2]);
  const auto end = Clock::now() + std::chrono::seconds(std::atol(argv[3]));
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (!list || n == 0) die("no device");
  Side s;
  s.ctx = ibv_open_device(list[0]);
  ibv_free_device_list(list);
  if (!s.ctx) die("ibv_open_device");
  s.pd = ibv_alloc_pd(s.ctx);
  s.cq = ibv_create_cq(s.ctx, 4096, nullptr, nullptr, 0);
  s.mr = ibv_reg_mr(s.pd, s.buf.data(), s.buf.size(),
                    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  s.smr = ibv_reg_mr(s.pd, s.sbuf.data(), s.sbuf.size(), IBV_ACCESS_LOCAL_WRITE);
  if (!s.pd || !s.cq || !s.mr || !s.smr || ibv_query_gid(s.ctx, 1, 1, &s.gid) != 0) {
    die("set-up");
  }
  Totals tot;
  const ibv_qp_type types[3] = {IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD};
  for (long round = 0;; ++round) {
    // Both sides agree to go on: the one that sees its deadline first ends the run.
    char go = Clock::now() < end ? 'g' : 's', other = 0;
    put(&go, 1);
    get(&other, 1);
    if (go != 'g' || other != 'g') break;
    round_trip(s, types[round % 3], (round / 3 + side) % 2 == 0, round, tot);
  }
  std::printf(
      "summary rounds %ld qps %ld sent %ld received %ld lost %ld ud_repeated %ld "
      "late_completions %ld\n",
      tot.rounds, tot.qps, tot.sent, tot.received, tot.lost, tot.repeated, late_completions);
  ibv_dereg_mr(s.smr);
  ibv_dereg_mr(s.mr);
  ibv_destroy_cq(s.cq);
  ibv_dealloc_pd(s.pd);
  ibv_close_device(s.ctx);
  return 0;
}
