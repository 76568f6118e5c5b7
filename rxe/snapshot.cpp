// Device::snapshot and Qp::info: copies of the objects for monitoring (rxe/snapshot.h).
#include "rxe/snapshot.h"

#include <algorithm>
#include <utility>

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
  out.pkey_index = attr_.pkey_index;
  out.pkey = pkey();
  const bool connected =
      type_ != QpType::kUd && attr_.qp_state >= QpState::kRtr && attr_.qp_state <= QpState::kSqe;
  out.peer = connected ? peer_.str() : std::string();
  out.send_outstanding = sq_.size();
  if (cc_on_) {
    out.cc_rate_bps = dcqcn_.rate_bps();
    out.cc_target_bps = dcqcn_.target_bps();
  }
  if (reliable()) out.loss_window = loss_window_.limit();
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
  std::vector<QpLinks> links;
  for (const QpInfo& q : s.qps) links.push_back({q.qpn, q.pdn, q.send_cqn, q.recv_cqn, q.srqn});
  ObjectInfos o = object_infos(links);
  s.cqs = std::move(o.cqs);
  s.mrs = std::move(o.mrs);
  s.pds = std::move(o.pds);
  s.srqs = std::move(o.srqs);
  return s;
}

}  // namespace softrdma::rxe
