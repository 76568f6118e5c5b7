// Device::snapshot and Qp::info: copies of the objects for monitoring (rxe/snapshot.h).
#include "rxe/snapshot.h"

#include <algorithm>

#include "rxe/device.h"

namespace softrdma::rxe {

void Qp::info(QpInfo& out) const {
  std::lock_guard lock(mutex_);
  out.qpn = qpn_;
  out.type = type_;
  out.state = attr_.qp_state;
  out.dest_qpn = attr_.dest_qp_num;
  out.pdn = pd_ ? pd_->handle : 0;
  out.send_cqn = send_cq_ ? send_cq_->cqn : 0;
  out.recv_cqn = recv_cq_ ? recv_cq_->cqn : 0;
  out.srqn = srq_ ? srq_->srqn : 0;
  out.sq_psn = req_psn_;
  out.rq_psn = epsn_;
  const bool connected =
      type_ != QpType::kUd && attr_.qp_state >= QpState::kRtr && attr_.qp_state <= QpState::kSqe;
  out.peer = connected ? peer_.str() : std::string();
  out.send_outstanding = sq_.size();
  if (cc_on_) {
    out.cc_rate_bps = dcqcn_.rate_bps();
    out.cc_target_bps = dcqcn_.target_bps();
  }
  out.recv_outstanding = rq_.size();
  out.counters = counters_;
}

DeviceSnapshot Device::snapshot() const {
  DeviceSnapshot s;
  {
    std::shared_lock lock(qps_mutex_);
    s.qps.resize(qps_.size());
    std::size_t i = 0;
    for (const auto& [n, qp] : qps_) qp->info(s.qps[i++]);
  }
  std::sort(s.qps.begin(), s.qps.end(),
            [](const QpInfo& a, const QpInfo& b) { return a.qpn < b.qpn; });
  mrs_.for_each([&](const Mr& mr) {
    s.mrs.push_back({mr.lkey, mr.rkey, mr.pd ? mr.pd->handle : 0, mr.access, mr.length, mr.iova});
  });
  std::sort(s.mrs.begin(), s.mrs.end(),
            [](const MrInfo& a, const MrInfo& b) { return a.lkey < b.lkey; });
  std::lock_guard lock(objects_mutex_);
  for (const auto& cq : cqs_) {
    CqInfo c{cq->cqn, cq->cqe(), cq->count(), 0};
    cq->latency(c.latency_samples, c.latency_p50_ns, c.latency_p99_ns);
    for (const QpInfo& q : s.qps)
      c.users += (q.send_cqn == c.cqn) + (q.recv_cqn == c.cqn && q.recv_cqn != q.send_cqn);
    s.cqs.push_back(c);
  }
  for (const auto& srq : srqs_) {
    SrqInfo r{srq->srqn,     srq->pd() ? srq->pd()->handle : 0,
              srq->max_wr(), srq->limit(),
              srq->posted(), {}};
    for (const QpInfo& q : s.qps) {
      if (q.srqn == r.srqn) r.qpns.push_back(q.qpn);
    }
    s.srqs.push_back(std::move(r));
  }
  for (const auto& pd : pds_) {
    PdInfo p{pd->handle, 0};
    for (const QpInfo& q : s.qps) p.users += q.pdn == p.pdn;
    for (const MrInfo& m : s.mrs) p.users += m.pdn == p.pdn;
    for (const SrqInfo& r : s.srqs) p.users += r.pdn == p.pdn;
    s.pds.push_back(p);
  }
  return s;
}

}  // namespace softrdma::rxe
