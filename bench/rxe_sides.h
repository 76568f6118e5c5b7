// Shared set-up of the rxe engine benchmarks: a device with a PD, a CQ, an RC QP and a
// registered buffer; connecting RC QPs; polling a CQ; this process's resident memory.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>
#include <vector>

#include "rxe/device.h"

namespace softrdma::bench {

using namespace softrdma::rxe;

constexpr std::uint32_t kAccess =
    kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic;

struct Side {
  std::vector<std::uint8_t> buf;  // first: it outlives the device, which may still write to it
  std::unique_ptr<Device> dev;
  Pd* pd;
  Cq* cq;
  Qp* qp;
  std::shared_ptr<Mr> mr;
};

inline Side make_side(std::unique_ptr<netdev::Netdev> nd, std::size_t bytes) {
  Side s;
  s.dev = std::make_unique<Device>(std::move(nd));
  s.pd = s.dev->alloc_pd();
  int err = 0;
  s.cq = s.dev->create_cq(65536, &err);
  QpCap cap{4096, 4096, 4, 4, 64};
  s.qp = s.dev->create_qp(s.pd, QpType::kRc, s.cq, s.cq, nullptr, cap, false, &err);
  s.buf.assign(bytes, 1);
  s.mr = s.dev->reg_mr(s.pd, s.buf.data(), bytes, reinterpret_cast<std::uint64_t>(s.buf.data()),
                       kAccess, &err);
  return s;
}

// Takes `q` to RTS toward QP `dest_qpn` at `dgid`.
inline void connect_qp(Qp* q, std::uint32_t dest_qpn, const Gid& dgid, std::uint32_t psn) {
  QpAttr x;
  x.qp_state = QpState::kInit;
  x.port_num = 1;
  x.qp_access_flags = kAccess;
  q->modify(x, kQpState | kQpPkeyIndex | kQpPort | kQpAccessFlags);
  x.qp_state = QpState::kRtr;
  x.path_mtu = Mtu::k4096;
  x.dest_qp_num = dest_qpn;
  x.rq_psn = psn;
  x.max_dest_rd_atomic = 16;
  x.min_rnr_timer = 1;
  x.ah_attr.dgid = dgid;
  q->modify(x, kQpState | kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn | kQpMaxDestRdAtomic |
                   kQpMinRnrTimer);
  x.qp_state = QpState::kRts;
  x.sq_psn = psn;
  x.timeout = 14;
  x.retry_cnt = 7;
  x.rnr_retry = 7;
  x.max_rd_atomic = 16;
  q->modify(x, kQpState | kQpSqPsn | kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpMaxQpRdAtomic);
}

inline void connect(Side& a, Side& b) {
  connect_qp(a.qp, b.qp->qpn(), b.dev->gids()[0], 100);
  connect_qp(b.qp, a.qp->qpn(), a.dev->gids()[0], 100);
}

// Waits for n successful completions on s's CQ, driving progress; -1 on an error (printed).
inline int poll(Side& s, std::size_t n) {
  Wc wc[64];
  std::size_t got = 0;
  while (got < n) {
    s.dev->poll_progress();
    const int r = s.cq->poll(std::span(wc, std::min<std::size_t>(64, n - got)));
    if (r < 0) return -1;
    for (int i = 0; i < r; ++i) {
      if (wc[i].status != WcStatus::kSuccess) {
        std::printf("  QP %#x: completion status %d\n", wc[i].qp_num,
                    static_cast<int>(wc[i].status));
        return -1;
      }
    }
    got += static_cast<std::size_t>(r);
  }
  return 0;
}

// A signaled RDMA WRITE of the first `size` bytes of a's buffer to the start of b's.
struct WriteWr {
  Sge sge;
  SendWr wr;
  WriteWr(const Side& a, const Side& b, std::uint32_t size)
      : sge{reinterpret_cast<std::uint64_t>(a.buf.data()), size, a.mr->lkey} {
    wr.opcode = WrOpcode::kRdmaWrite;
    wr.sg_list = std::span(&sge, 1);
    wr.remote_addr = reinterpret_cast<std::uint64_t>(b.buf.data());
    wr.rkey = b.mr->rkey;
    wr.send_flags = kSendSignaled;
  }
  WriteWr(const WriteWr&) = delete;  // wr points at sge
  WriteWr& operator=(const WriteWr&) = delete;
};

// Resident memory of this process in bytes (/proc/self/statm).
inline std::size_t rss_bytes() {
  std::ifstream f("/proc/self/statm");
  std::size_t pages = 0, resident = 0;
  f >> pages >> resident;
  return resident * static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
}

}  // namespace softrdma::bench
