// Objects::object_infos: the copies of core/object_info.h.
#include "core/object_info.h"

#include <algorithm>

#include "core/objects.h"

namespace softrdma::core {

ObjectInfos Objects::object_infos(const std::vector<QpLinks>& qps) const {
  ObjectInfos s;
  mrs_.for_each([&](const Mr& mr) {
    s.mrs.push_back({mr.lkey, mr.rkey, mr.pd ? mr.pd->handle : 0, mr.access, mr.length, mr.iova});
  });
  std::sort(s.mrs.begin(), s.mrs.end(),
            [](const MrInfo& a, const MrInfo& b) { return a.lkey < b.lkey; });
  std::lock_guard lock(objects_mutex_);
  for (const auto& cq : cqs_) {
    CqInfo c{cq->cqn, cq->cqe(), cq->count(), 0};
    cq->latency(c.latency_samples, c.latency_p50_ns, c.latency_p99_ns);
    for (const QpLinks& q : qps)
      c.users += (q.send_cqn == c.cqn) + (q.recv_cqn == c.cqn && q.recv_cqn != q.send_cqn);
    s.cqs.push_back(c);
  }
  for (const auto& srq : srqs_) {
    SrqInfo r{srq->srqn,     srq->pd() ? srq->pd()->handle : 0,
              srq->max_wr(), srq->limit(),
              srq->posted(), {}};
    for (const QpLinks& q : qps) {
      if (q.srqn == r.srqn) r.qpns.push_back(q.qpn);
    }
    s.srqs.push_back(std::move(r));
  }
  for (const auto& pd : pds_) {
    PdInfo p{pd->handle, 0};
    for (const QpLinks& q : qps) p.users += q.pdn == p.pdn;
    for (const MrInfo& m : s.mrs) p.users += m.pdn == p.pdn;
    for (const SrqInfo& r : s.srqs) p.users += r.pdn == p.pdn;
    s.pds.push_back(p);
  }
  return s;
}

}  // namespace softrdma::core
