// Device::snapshot and Qp::info: copies of softiwarp0's objects for monitoring (iwarp/snapshot.h).
#include "iwarp/snapshot.h"

#include <algorithm>
#include <utility>

#include "iwarp/device.h"

namespace softrdma::iwarp {
namespace {

std::string text(const TcpEndpoint& e) {
  return std::to_string(e.addr >> 24) + "." + std::to_string((e.addr >> 16) & 0xFF) + "." +
         std::to_string((e.addr >> 8) & 0xFF) + "." + std::to_string(e.addr & 0xFF) + ":" +
         std::to_string(e.port);
}

}  // namespace

void Qp::info(QpInfo& out) const {
  AppLock lock(*this);
  out.qpn = qpn_;
  out.pdn = pd_ ? pd_->handle : 0;
  out.send_cqn = send_cq_ ? send_cq_->cqn : 0;
  out.recv_cqn = recv_cq_ ? recv_cq_->cqn : 0;
  out.srqn = srq_ ? srq_->srqn : 0;
  out.state = state_;
  TcpEndpoint local, remote;
  if (stream_ && stream_->endpoints(local, remote)) {
    out.local = text(local);
    out.peer = text(remote);
  }
  out.send_outstanding = sq_.size();
  out.recv_outstanding = rq_.size();
  if (phase_ == Phase::kRunning || phase_ == Phase::kClosing) {  // negotiated
    out.mpa_revision = revision_;
    out.mpa_crc = crc_;
    out.mpa_markers = markers_tx_ || markers_rx_;
    out.ird = ird_;
    out.ord = ord_;
  }
  out.counters = counters_;
}

DeviceSnapshot Device::snapshot() const {
  DeviceSnapshot s;
  {
    std::lock_guard lock(progress_mu_);
    s.qps.resize(qps_.size());
    std::size_t i = 0;
    for (const auto& [n, qp] : qps_) qp->info(s.qps[i++]);
  }
  std::sort(s.qps.begin(), s.qps.end(),
            [](const QpInfo& a, const QpInfo& b) { return a.qpn < b.qpn; });
  std::vector<core::QpLinks> links;
  for (const QpInfo& q : s.qps) links.push_back({q.qpn, q.pdn, q.send_cqn, q.recv_cqn, q.srqn});
  core::ObjectInfos o = object_infos(links);
  s.cqs = std::move(o.cqs);
  s.mrs = std::move(o.mrs);
  s.pds = std::move(o.pds);
  s.srqs = std::move(o.srqs);
  return s;
}

}  // namespace softrdma::iwarp
