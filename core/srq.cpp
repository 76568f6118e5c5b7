#include "core/srq.h"

#include <cerrno>

namespace softrdma::core {

int RecvQueue::post(const RecvWr& wr) {
  if (wr.sg_list.size() > max_sge_) return EINVAL;
  if (q_.size() >= max_wr_) return ENOMEM;
  RecvWqe& w = q_.emplace_back();
  w.wr_id = wr.wr_id;
  w.sge.assign(wr.sg_list.begin(), wr.sg_list.end());
  w.total = 0;
  for (const Sge& s : wr.sg_list) w.total += s.length;
  return 0;
}

Srq::Srq(Pd* pd, std::uint32_t max_wr, std::uint32_t max_sge, std::uint32_t limit, Xrcd* xrcd,
         Cq* cq)
    : pd_(pd), xrcd_(xrcd), cq_(cq), max_sge_(max_sge), limit_(limit) {
  q_.init(max_wr, max_sge);
}

int Srq::post(const RecvWr& wr) {
  std::lock_guard lock(mutex_);
  return q_.post(wr);
}

std::optional<RecvWqe> Srq::take() {
  std::optional<RecvWqe> w;
  bool fire = false;
  {
    std::lock_guard lock(mutex_);
    if (q_.empty()) return std::nullopt;
    w = std::move(q_.front());
    q_.pop();
    if (limit_ && q_.size() < limit_) {
      limit_ = 0;  // one event per arming
      fire = true;
    }
  }
  if (fire && limit_event_) limit_event_();
  return w;
}

int Srq::modify(std::optional<std::uint32_t> max_wr, std::optional<std::uint32_t> limit) {
  std::lock_guard lock(mutex_);
  if (max_wr) {
    if (*max_wr < q_.size() || *max_wr == 0) return EINVAL;
    q_.set_max_wr(*max_wr);
  }
  if (limit) {
    if (*limit > q_.max_wr()) return EINVAL;
    limit_ = *limit;
  }
  return 0;
}

std::uint32_t Srq::max_wr() const {
  std::lock_guard lock(mutex_);
  return q_.max_wr();
}

std::size_t Srq::posted() const {
  std::lock_guard lock(mutex_);
  return q_.size();
}

std::uint32_t Srq::limit() const {
  std::lock_guard lock(mutex_);
  return limit_;
}

}  // namespace softrdma::core
