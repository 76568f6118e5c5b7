// The verbs objects of one device whatever its transport (PDs, MRs and memory windows, CQs,
// SRQs, XRC domains, AHs) and the one copy of the rules for making and destroying them: the limits
// of DeviceAttr, IBTA 10.6.3.1's access rule, EBUSY while something still uses an object. Both
// transports' devices derive from it and answer what only they know: whether one of their QPs
// uses an object, whether an address is reachable, and where CQ/SRQ events go. Thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "core/cq.h"
#include "core/mr.h"
#include "core/object_info.h"
#include "core/srq.h"
#include "core/types.h"
#include "core/xrc_srq_table.h"
#include "core/xrcd.h"

namespace softrdma::core {

class Objects {
 public:
  Objects(const Objects&) = delete;
  Objects& operator=(const Objects&) = delete;

  const DeviceAttr& attr() const { return attr_; }
  MrTable& mrs() { return mrs_; }

  Pd* alloc_pd();
  int dealloc_pd(Pd* pd);  // EBUSY while a QP, SRQ, AH or memory window uses it; EINVAL: unknown
  // EINVAL: remote write/atomic without local write, longer than max_mr_size, or no address for
  // a nonzero length (but implicit ODP: kAccessOnDemand, addr 0, kImplicitOdpLength, iova 0);
  // ENOMEM: out of keys. `err` may be null.
  std::shared_ptr<Mr> reg_mr(Pd* pd, void* addr, std::uint64_t length, std::uint64_t iova,
                             std::uint32_t access, int* err);
  int dereg_mr(std::uint32_t lkey);  // EBUSY while memory windows are bound to it
  // A memory window's key (its handle is key >> 8), 0 with *err set (EINVAL: bad type, ENOMEM:
  // max_mw reached or out of keys).
  std::uint32_t alloc_mw(Pd* pd, MwType type, int* err);
  int dealloc_mw(std::uint32_t handle);
  Cq* create_cq(std::uint32_t cqe, int* err);  // EINVAL: 0 or beyond max_cqe
  int destroy_cq(Cq* cq);                      // EBUSY while a QP uses it
  // EINVAL: max_wr 0 or beyond max_srq_wr, max_sge beyond max_srq_sge, limit above max_wr.
  Srq* create_srq(Pd* pd, std::uint32_t max_wr, std::uint32_t max_sge, std::uint32_t limit,
                  int* err);
  // EBUSY while a QP uses it. An XRC SRQ is first taken out of the table the receive path
  // finds it in, and destroy_srq waits for the holds on it (a packet each, see find_xrc_srq);
  // then the transport deals with the completions it made for it (xrc_srq_unpublished).
  int destroy_srq(Srq* srq);
  // XRC domains (core/xrcd.h), as the kernel's ib_uverbs_open_xrcd: fd -1 opens a private one;
  // else the file's inode names it, found if open (EINVAL when oflags has O_CREAT and O_EXCL)
  // and made only with O_CREAT (else EINVAL); EBADF: fd is not open. Domains are per process.
  Xrcd* open_xrcd(int fd, int oflags, int* err);
  int close_xrcd(Xrcd* xrcd);  // its last close: EBUSY while an XRC SRQ or target QP uses it
  // An XRC SRQ of `xrcd` that completes on `cq`; its receive WQEs' lkeys are `pd`'s. EINVAL:
  // no PD, domain or CQ, or create_srq's limits.
  Srq* create_xrc_srq(Pd* pd, Xrcd* xrcd, Cq* cq, std::uint32_t max_wr, std::uint32_t max_sge,
                      std::uint32_t limit, int* err);
  // The XRC SRQ numbered `srqn` (where an XRCETH points), held: destroy_srq waits until the
  // hold is dropped. Empty when there is none. Lock-free, for the receive path.
  XrcSrqTable::Hold find_xrc_srq(std::uint32_t srqn) const { return xrc_srqs_.find(srqn); }
  // Address handles are small ids; 0 with *err = EINVAL when the transport cannot reach the
  // address (a transport without address handles reaches none).
  std::uint32_t create_ah(Pd* pd, const AhAttr& attr, int* err);
  int destroy_ah(std::uint32_t ah);
  bool find_ah(std::uint32_t ah, AhAttr& out) const;
  // The checks of a new QP common to both transports (a PD and both CQs, capabilities within
  // the limits), and the capabilities it really gets, written back: at least one of each, and
  // no receive queue of its own when it takes from an SRQ. 0 or EINVAL.
  int admit_qp(const Pd* pd, const Cq* send_cq, const Cq* recv_cq, const Srq* srq,
               QpCap& cap) const;
  // The same for XRC QPs: an initiator (kXrcSend) has a PD and a send CQ and no receive queue;
  // a target (kXrcRecv) has a domain and neither queue. 0 or EINVAL.
  int admit_xrc_qp(QpType type, const Pd* pd, const Cq* send_cq, const Xrcd* xrcd,
                   QpCap& cap) const;
  // The completions of QP `qpn` not polled yet from the CQs of `xrcd`'s XRC SRQs, where an XRC
  // target's receives complete (`xrcd` is only compared, never read).
  std::size_t unread_xrc_completions(const Xrcd* xrcd, std::uint32_t qpn) const;

 protected:
  Objects();
  virtual ~Objects();
  // Whether one of the transport's QPs uses the object given (exactly one is not null).
  virtual bool qp_uses(const Pd* pd, const Cq* cq, const Srq* srq) const = 0;
  virtual bool ah_reachable(const AhAttr& attr) const = 0;
  // Whether one of the transport's XRC target QPs belongs to `xrcd` (none: no XRC).
  virtual bool qp_uses_xrcd(const Xrcd*) const { return false; }
  // The channel other devices of a host-wide XRC domain reach this one by (rxe/xrc_relay.h),
  // made on first use; 0 for a transport with none. Under objects_mutex_.
  virtual std::uint64_t xrc_channel() { return 0; }
  // An XRC SRQ being destroyed is out of reach of the receive path (no hold is left on it):
  // the transport hands out or drops whatever completions for it it still keeps, as long as
  // its CQ exists (the SRQ is still listed, so destroy_cq answers EBUSY).
  virtual void xrc_srq_unpublished(const Srq*) {}
  // A CQ overflowed (kCqErr) or an SRQ fell below its limit (kSrqLimitReached).
  virtual void object_event(AsyncEventType type, Cq* cq, Srq* srq) = 0;
  // Copies of the CQs, MRs, PDs and SRQs for the transport's monitoring snapshot, their users
  // counted from the transport's QPs `qps` (core/object_info.h).
  ObjectInfos object_infos(const std::vector<QpLinks>& qps) const;

  DeviceAttr attr_;  // the transport sets its limits in its constructor
  MrTable mrs_;

  // For the transport's monitoring snapshot: the objects, under objects_mutex_.
  mutable std::mutex objects_mutex_;
  std::vector<std::unique_ptr<Pd>> pds_;
  std::vector<std::unique_ptr<Cq>> cqs_;
  std::vector<std::unique_ptr<Srq>> srqs_;
  std::vector<std::unique_ptr<Xrcd>> xrcds_;

 private:
  Srq* make_srq(Pd* pd, Xrcd* xrcd, Cq* cq, std::uint32_t max_wr, std::uint32_t max_sge,
                std::uint32_t limit, int* err);

  // XRC SRQs by number, as many as max_srq's default (a transport only lowers max_srq).
  XrcSrqTable xrc_srqs_{DeviceAttr{}.max_srq};
  std::unordered_map<std::uint32_t, std::pair<Pd*, AhAttr>> ahs_;
  std::atomic<std::uint32_t> mws_{0};  // memory windows allocated
  std::uint32_t next_pd_ = 1, next_cqn_ = 1, next_srqn_ = 1, next_ah_ = 1, next_xrcd_ = 1;
};

}  // namespace softrdma::core
