// core::Objects: making and destroying the verbs objects (core/objects.h).
#include "core/objects.h"

#include <algorithm>
#include <cerrno>

namespace softrdma::core {

namespace {

void set(int* err, int value) {
  if (err) *err = value;
}

template <class T>
int erase_object(std::vector<std::unique_ptr<T>>& v, const T* obj) {
  auto it = std::find_if(v.begin(), v.end(), [&](const auto& p) { return p.get() == obj; });
  if (it == v.end()) return EINVAL;
  v.erase(it);
  return 0;
}

}  // namespace

Objects::Objects() = default;
Objects::~Objects() = default;

std::size_t Objects::unread_xrc_completions(const Xrcd* xrcd, std::uint32_t qpn) const {
  std::lock_guard lock(objects_mutex_);
  std::vector<const Cq*> seen;
  std::size_t n = 0;
  for (const auto& s : srqs_) {
    const Cq* cq = s->cq();
    if (s->xrcd() != xrcd || !cq || std::find(seen.begin(), seen.end(), cq) != seen.end()) continue;
    seen.push_back(cq);
    n += cq->count_qp(qpn);
  }
  return n;
}

Pd* Objects::alloc_pd() {
  std::lock_guard lock(objects_mutex_);
  auto pd = std::make_unique<Pd>();
  pd->handle = next_pd_++;
  pds_.push_back(std::move(pd));
  return pds_.back().get();
}

int Objects::dealloc_pd(Pd* pd) {
  if (qp_uses(pd, nullptr, nullptr) || mrs_.has_windows(pd)) return EBUSY;
  std::lock_guard lock(objects_mutex_);
  for (const auto& s : srqs_) {
    if (s->pd() == pd) return EBUSY;
  }
  for (const auto& [id, ah] : ahs_) {
    if (ah.first == pd) return EBUSY;
  }
  return erase_object(pds_, pd);
}

std::shared_ptr<Mr> Objects::reg_mr(Pd* pd, void* addr, std::uint64_t length, std::uint64_t iova,
                                    std::uint32_t access, int* err) {
  // Remote write or atomic access needs local write (IBTA 10.6.3.1).
  const bool remote_write = (access & (kAccessRemoteWrite | kAccessRemoteAtomic)) != 0;
  // Implicit ODP: the whole address space, at iova 0 (the host address is the iova).
  const bool implicit =
      (access & kAccessOnDemand) && !addr && length == kImplicitOdpLength && iova == 0;
  if ((remote_write && !(access & kAccessLocalWrite)) ||
      (!implicit && (length > attr_.max_mr_size || (!addr && length)))) {
    set(err, EINVAL);
    return nullptr;
  }
  auto mr = mrs_.add(pd, addr, length, iova, access);
  set(err, mr ? 0 : ENOMEM);
  return mr;
}

int Objects::dereg_mr(std::uint32_t lkey) {
  return mrs_.remove(lkey);
}

std::uint32_t Objects::alloc_mw(Pd* pd, MwType type, int* err) {
  if (type != MwType::k1 && type != MwType::k2) {
    set(err, EINVAL);
    return 0;
  }
  if (mws_.fetch_add(1) >= attr_.max_mw) {
    mws_.fetch_sub(1);
    set(err, ENOMEM);
    return 0;
  }
  const std::uint32_t key = mrs_.add_mw(pd, type);
  if (key == 0) mws_.fetch_sub(1);
  set(err, key ? 0 : ENOMEM);
  return key;
}

int Objects::dealloc_mw(std::uint32_t handle) {
  const int rc = mrs_.remove_mw(handle);
  if (rc == 0) mws_.fetch_sub(1);
  return rc;
}

Cq* Objects::create_cq(std::uint32_t cqe, int* err) {
  if (cqe == 0 || cqe > attr_.max_cqe) {
    set(err, EINVAL);
    return nullptr;
  }
  std::lock_guard lock(objects_mutex_);
  cqs_.push_back(std::make_unique<Cq>(cqe));
  Cq* cq = cqs_.back().get();
  cq->cqn = next_cqn_++;
  cq->set_overflow([this, cq] { object_event(AsyncEventType::kCqErr, cq, nullptr); });
  set(err, 0);
  return cq;
}

int Objects::destroy_cq(Cq* cq) {
  if (qp_uses(nullptr, cq, nullptr)) return EBUSY;
  std::lock_guard lock(objects_mutex_);
  for (const auto& s : srqs_) {
    if (s->cq() == cq) return EBUSY;  // an XRC SRQ completes on it
  }
  return erase_object(cqs_, cq);
}

Srq* Objects::create_srq(Pd* pd, std::uint32_t max_wr, std::uint32_t max_sge, std::uint32_t limit,
                         int* err) {
  return make_srq(pd, nullptr, nullptr, max_wr, max_sge, limit, err);
}

Srq* Objects::create_xrc_srq(Pd* pd, Xrcd* xrcd, Cq* cq, std::uint32_t max_wr,
                             std::uint32_t max_sge, std::uint32_t limit, int* err) {
  if (!pd || !xrcd || !cq) {
    set(err, EINVAL);
    return nullptr;
  }
  return make_srq(pd, xrcd, cq, max_wr, max_sge, limit, err);
}

Srq* Objects::make_srq(Pd* pd, Xrcd* xrcd, Cq* cq, std::uint32_t max_wr, std::uint32_t max_sge,
                       std::uint32_t limit, int* err) {
  if (max_wr == 0 || max_wr > attr_.max_srq_wr || max_sge > attr_.max_srq_sge || limit > max_wr) {
    set(err, EINVAL);
    return nullptr;
  }
  std::lock_guard lock(objects_mutex_);
  if (srqs_.size() >= attr_.max_srq) {
    set(err, ENOMEM);
    return nullptr;
  }
  // An XRC SRQ takes a number whose slot in the table is free (the numbers still grow).
  // In a domain the host shares, a number no other device of the domain holds.
  std::uint32_t srqn = next_srqn_;
  if (xrcd && xrcd->shared) {
    srqn = xrcd->shared->claim_srqn(
        next_srqn_, [this](std::uint32_t n) { return xrc_srqs_.free_number(n) == n; });
  } else if (xrcd) {
    srqn = xrc_srqs_.free_number(next_srqn_);
  }
  if (srqn == 0) {
    set(err, ENOMEM);
    return nullptr;
  }
  srqs_.push_back(std::make_unique<Srq>(pd, max_wr, max_sge ? max_sge : 1, limit, xrcd, cq));
  Srq* srq = srqs_.back().get();
  srq->srqn = srqn;
  next_srqn_ = srqn + 1;
  srq->set_limit_event(
      [this, srq] { object_event(AsyncEventType::kSrqLimitReached, nullptr, srq); });
  if (xrcd) xrc_srqs_.publish(srq);
  set(err, 0);
  return srq;
}

int Objects::destroy_srq(Srq* srq) {
  if (qp_uses(nullptr, nullptr, srq)) return EBUSY;
  if (srq->xrcd()) {
    {
      std::lock_guard lock(objects_mutex_);
      const auto listed = [srq](const auto& s) { return s.get() == srq; };
      if (std::none_of(srqs_.begin(), srqs_.end(), listed)) return EINVAL;
    }
    // Not under objects_mutex_: a pass holding the SRQ may want it (monitoring, events).
    xrc_srqs_.unpublish(srq);
    xrc_srq_unpublished(srq);
    if (srq->xrcd()->shared) srq->xrcd()->shared->release_srqn(srq->srqn);
  }
  std::lock_guard lock(objects_mutex_);
  return erase_object(srqs_, srq);
}

std::uint32_t Objects::create_ah(Pd* pd, const AhAttr& attr, int* err) {
  if (!ah_reachable(attr)) {
    set(err, EINVAL);
    return 0;
  }
  std::lock_guard lock(objects_mutex_);
  const std::uint32_t id = next_ah_++;
  ahs_[id] = {pd, attr};
  set(err, 0);
  return id;
}

int Objects::destroy_ah(std::uint32_t ah) {
  std::lock_guard lock(objects_mutex_);
  return ahs_.erase(ah) ? 0 : EINVAL;
}

bool Objects::find_ah(std::uint32_t ah, AhAttr& out) const {
  std::lock_guard lock(objects_mutex_);
  auto it = ahs_.find(ah);
  if (it == ahs_.end()) return false;
  out = it->second.second;
  return true;
}

int Objects::admit_qp(const Pd* pd, const Cq* send_cq, const Cq* recv_cq, const Srq* srq,
                      QpCap& cap) const {
  if (!pd || !send_cq || !recv_cq || cap.max_send_wr > attr_.max_qp_wr ||
      cap.max_recv_wr > attr_.max_qp_wr || cap.max_send_sge > attr_.max_sge ||
      cap.max_recv_sge > attr_.max_sge || cap.max_inline_data > attr_.max_inline_data) {
    return EINVAL;
  }
  cap.max_send_wr = std::max<std::uint32_t>(cap.max_send_wr, 1);
  cap.max_recv_wr = srq ? 0 : std::max<std::uint32_t>(cap.max_recv_wr, 1);
  cap.max_send_sge = std::max<std::uint32_t>(cap.max_send_sge, 1);
  cap.max_recv_sge = srq ? 0 : std::max<std::uint32_t>(cap.max_recv_sge, 1);
  cap.max_inline_data = attr_.max_inline_data;
  return 0;
}

}  // namespace softrdma::core
