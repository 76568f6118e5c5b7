#include "rxe/device.h"

#include <pthread.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <random>

#include "netdev/pause_frame.h"
#include "wire/roce_headers.h"

namespace softrdma::rxe {

namespace {
constexpr std::size_t kBatch = 64;
constexpr int kRxBatchesPerPass = 16;         // at most 1,024 datagrams received per pass
thread_local bool t_in_step = false;          // this thread is inside Device::step
thread_local bool t_releasing = false;        // ... handing out its held completions
thread_local bool t_progress_thread = false;  // this thread is a device's progress thread
}  // namespace

Mtu mtu_for_ip_mtu(std::uint32_t ip_mtu) {
  Mtu best = Mtu::k256;
  for (Mtu m : {Mtu::k256, Mtu::k512, Mtu::k1024, Mtu::k2048, Mtu::k4096}) {
    if (mtu_bytes(m) + 80 <= ip_mtu) best = m;
  }
  return best;
}

Device::Device(std::unique_ptr<netdev::Netdev> nd, std::string name, const CcConfig& cc)
    : name_(std::move(name)), netdev_(std::move(nd)), cc_(cc) {
  for (const netdev::IpAddr& a : netdev_->addresses()) gids_.push_back(a.bytes);
  std::random_device rd;
  node_guid_ = (std::uint64_t{rd()} << 32) | rd();
  node_guid_ =
      (node_guid_ & 0x00FFFFFFFFFFFFFFull) | (std::uint64_t{0x02} << 56);  // locally administered
  tx_bufs_.assign(kBatch, std::vector<std::uint8_t>(netdev::kMaxDatagram));
  rx_bufs_.assign(kBatch, std::vector<std::uint8_t>(netdev::kMaxDatagram));
  tx_pkts_.resize(kBatch);
  rx_pkts_.resize(kBatch);
  for (std::size_t i = 0; i < kBatch; ++i) {
    tx_pkts_[i].data = tx_bufs_[i].data();
    tx_pkts_[i].cap = static_cast<std::uint32_t>(tx_bufs_[i].size());
    rx_pkts_[i].data = rx_bufs_[i].data();
    rx_pkts_[i].cap = static_cast<std::uint32_t>(rx_bufs_[i].size());
    tx_ptrs_.push_back(&tx_pkts_[i]);
    rx_ptrs_.push_back(&rx_pkts_[i]);
  }
  kick_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = kick_fd_;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, kick_fd_, &ev);
  ev.data.fd = netdev_->wait_fd();
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, netdev_->wait_fd(), &ev);

  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "softrdma-rxe");  // as top -H and perf show it
    progress_loop();
  });
}

Device::~Device() {
  // ACKs waiting for a reply (rxe/ack_hold.h) leave: the peers' last requests are acknowledged.
  {
    std::lock_guard pl(progress_mutex_);
    {
      std::shared_lock ql(qps_mutex_);
      for (const auto& [qpn, qp] : qps_) {
        std::lock_guard l(qp->mutex());
        qp->send_waiting_ack();
      }
    }
    tx_flush();
  }
  stop_ = true;
  signal_kick();
  thread_.join();
  mrs_.set_watcher(nullptr);  // the directory goes before the table
  {
    std::unique_lock lock(qps_mutex_);
    // No sender of this host places into memory of a QP that is gone.
    if (dir_) {
      for (const auto& [qpn, qp] : qps_) dir_->remove_qp(qpn);
    }
    qps_.clear();
  }
  close(epoll_fd_);
  close(kick_fd_);
}

PortAttr Device::port_attr() const {
  PortAttr p;
  p.active_mtu = mtu_for_ip_mtu(netdev_->mtu());
  p.gid_tbl_len = static_cast<std::uint32_t>(gids_.size());
  return p;
}

bool Device::set_pkeys(const std::vector<std::uint16_t>& table) {
  if (table.empty() || table.size() > attr_.max_pkeys) return false;
  for (std::uint16_t k : table) {
    if ((k & 0x7FFF) == 0) return false;  // 0x0000 and 0x8000 are no partition
  }
  pkeys_ = table;
  return true;
}

int Device::pkey_index_of(std::uint16_t pkey) const {
  for (std::size_t i = 0; i < pkeys_.size(); ++i) {
    if (pkey_match(pkey, pkeys_[i])) return static_cast<int>(i);
  }
  return -1;
}

bool Device::qp_uses(const Pd* pd, const Cq* cq, const Srq* srq) const {
  std::shared_lock lock(qps_mutex_);
  for (const auto& [n, qp] : qps_) {
    if ((pd && qp->pd() == pd) || (cq && (qp->send_cq_ == cq || qp->recv_cq_ == cq)) ||
        (srq && qp->srq_ == srq)) {
      return true;
    }
  }
  return false;
}

bool Device::qp_uses_xrcd(const Xrcd* xrcd) const {
  std::shared_lock lock(qps_mutex_);
  for (const auto& [n, qp] : qps_) {
    if (qp->xrcd_ == xrcd && !qp->proxy_) return true;  // (proxies go with their SRQs)
  }
  return false;
}

bool Device::ah_reachable(const AhAttr& attr) const {
  netdev::IpAddr ip;
  return gid_to_ip(attr.dgid, ip);
}

void Device::object_event(AsyncEventType type, Cq* cq, Srq* srq) {
  async_event({type, nullptr, cq, srq});
}

Qp* Device::create_qp(Pd* pd, QpType type, Cq* send_cq, Cq* recv_cq, Srq* srq, QpCap& cap,
                      bool sq_sig_all, int* err, std::uint32_t wanted_qpn, Xrcd* xrcd) {
  const bool xrc = type == QpType::kXrcSend || type == QpType::kXrcRecv;
  *err =
      xrc ? admit_xrc_qp(type, pd, send_cq, xrcd, cap) : admit_qp(pd, send_cq, recv_cq, srq, cap);
  if (*err != 0) return nullptr;
  if (xrc) {  // what each kind has not
    recv_cq = nullptr;
    srq = nullptr;
    if (type == QpType::kXrcRecv) {
      pd = nullptr;
      send_cq = nullptr;
    } else {
      xrcd = nullptr;
    }
  }
  std::unique_lock lock(qps_mutex_);
  if (qps_.size() >= attr_.max_qp) {
    *err = ENOMEM;
    return nullptr;
  }
  std::uint32_t qpn = wanted_qpn;
  if (qpn != 0) {
    if (qpn > 0xFFFFFE || qps_.contains(qpn)) {
      *err = qpn > 0xFFFFFE ? EINVAL : EBUSY;
      return nullptr;
    }
  } else {
    while (qps_.contains(next_qpn_) || next_qpn_ < 0x11) {
      next_qpn_ = (next_qpn_ + 1) & 0xFFFFFF;
    }
    qpn = next_qpn_;
    next_qpn_ = (next_qpn_ + 1) & 0xFFFFFF;
  }
  auto qp =
      std::make_unique<Qp>(*this, qpn, type, pd, send_cq, recv_cq, srq, cap, sq_sig_all, xrcd);
  Qp* raw = qp.get();
  raw->serial_ = next_qp_serial_++;
  qps_[qpn] = std::move(qp);
  *err = 0;
  return raw;
}

namespace {
void add(QpCounters& sum, const QpCounters& c) {
  sum.tx_packets += c.tx_packets;
  sum.rx_packets += c.rx_packets;
  sum.retransmits += c.retransmits;
  sum.duplicate_requests += c.duplicate_requests;
  sum.out_of_sequence += c.out_of_sequence;
  sum.seq_naks_sent += c.seq_naks_sent;
  sum.rnr_naks_sent += c.rnr_naks_sent;
  sum.rnr_naks_received += c.rnr_naks_received;
  sum.retry_exceeded += c.retry_exceeded;
  sum.rnr_retry_exceeded += c.rnr_retry_exceeded;
  sum.dropped_wrong_peer += c.dropped_wrong_peer;
  sum.dropped_bad_qkey += c.dropped_bad_qkey;
  sum.dropped_no_recv += c.dropped_no_recv;
  sum.held_no_recv += c.held_no_recv;
  sum.acks_with_request += c.acks_with_request;
  sum.ack_waits_expired += c.ack_waits_expired;
  sum.dropped_bad_opcode += c.dropped_bad_opcode;
  sum.placed_sent += c.placed_sent;
  sum.placed_received += c.placed_received;
  sum.resp_remote_access_errors += c.resp_remote_access_errors;
  sum.xrc_rcvd_requests += c.xrc_rcvd_requests;
  sum.xrc_bad_srqn += c.xrc_bad_srqn;
  sum.xrc_srq_elsewhere += c.xrc_srq_elsewhere;
  sum.xrc_relayed += c.xrc_relayed;
  sum.xrc_proxied += c.xrc_proxied;
  sum.xrc_relay_dropped += c.xrc_relay_dropped;
  sum.np_ecn_marked_roce_packets += c.np_ecn_marked_roce_packets;
  sum.np_cnp_sent += c.np_cnp_sent;
  sum.rp_cnp_handled += c.rp_cnp_handled;
  sum.rp_cnp_ignored += c.rp_cnp_ignored;
  sum.rp_pause_waits += c.rp_pause_waits;
}
}  // namespace

std::vector<std::pair<std::string, std::uint64_t>> Device::hw_counters() const {
  QpCounters q;
  {
    std::shared_lock lock(qps_mutex_);
    q = retired_;
    for (const auto& [n, qp] : qps_) add(q, qp->counters());
  }
  const netdev::Counters nd = netdev_->counters();
  return {
      {"sent_pkts", q.tx_packets},
      {"rcvd_pkts", q.rx_packets},
      {"duplicate_request", q.duplicate_requests},
      {"out_of_seq_request", q.out_of_sequence},
      {"send_seq_err_nak", q.seq_naks_sent},
      {"send_rnr_err", q.rnr_naks_sent},
      {"rcvd_rnr_err", q.rnr_naks_received},
      {"retransmits", q.retransmits},
      {"retry_exceeded_err", q.retry_exceeded},
      {"retry_rnr_exceeded_err", q.rnr_retry_exceeded},
      {"drop_wrong_peer", q.dropped_wrong_peer},
      {"drop_bad_qkey", q.dropped_bad_qkey},
      {"drop_no_recv_wqe", q.dropped_no_recv},
      {"held_no_recv_wqe", q.held_no_recv},
      {"acks_with_request", q.acks_with_request},
      {"ack_waits_expired", q.ack_waits_expired},
      {"drop_bad_opcode", q.dropped_bad_opcode},
      {"drop_unknown_qp", rx_unknown_qp_.load()},
      {"drop_mcast", rx_mcast_dropped_.load()},
      {"drop_malformed", rx_malformed_.load()},
      {"drop_bad_pkey", rx_bad_pkey_.load()},
      {"icrc_err", nd.rx_icrc_errors},
      {"netdev_rx_malformed", nd.rx_malformed},
      {"netdev_tx_errors", nd.tx_errors},
      {"fault_dropped", nd.fault_dropped},
      {"fault_duplicated", nd.fault_duplicated},
      {"fault_reordered", nd.fault_reordered},
      {"fault_corrupted", nd.fault_corrupted},
      {"fault_delayed", nd.fault_delayed},
      {"netdev_tx_packets", nd.tx_packets},
      {"netdev_rx_packets", nd.rx_packets},
      {"netdev_rx_not_ours", nd.rx_not_ours},
      {"netdev_tx_dropped", nd.tx_dropped},
      {"netdev_tx_held", nd.tx_held},
      {"netdev_rx_dropped", nd.rx_dropped},
      {"netdev_rx_gso_frames", nd.rx_gso_frames},
      {"placed_sent", q.placed_sent},
      {"placed_rcvd", q.placed_received},
      {"placed_refused", placement_refused_.load()},
      {"resp_remote_access_errors", q.resp_remote_access_errors},
      {"xrc_rcvd_requests", q.xrc_rcvd_requests},
      {"xrc_bad_srqn", q.xrc_bad_srqn},
      {"xrc_srq_elsewhere", q.xrc_srq_elsewhere},
      {"xrc_relayed", q.xrc_relayed},
      {"xrc_proxied", q.xrc_proxied},
      {"xrc_relay_dropped", q.xrc_relay_dropped},
      {"xrc_relay_malformed", relay() ? relay()->malformed() : 0},
      {"odp_faults", mrs_.odp_faults()},
      {"np_ecn_marked_roce_packets", q.np_ecn_marked_roce_packets},
      {"np_cnp_sent", q.np_cnp_sent},
      {"rp_cnp_handled", q.rp_cnp_handled},
      {"rp_cnp_ignored", q.rp_cnp_ignored},
      {"switch_ce_marked", nd.switch_ce_marked},
      {"switch_dropped", nd.switch_dropped},
      {"switch_queue_peak", nd.switch_queue_peak},
      {"backlog_ce_marked", nd.backlog_ce_marked},
      {"rx_pause", rx_pause_.load()},
      {"rx_pause_bad", rx_pause_bad_.load()},
      {"rp_pause_waits", q.rp_pause_waits},
      {"tx_pause", nd.tx_pause},
      {"switch_held", nd.switch_held},
  };
}

void Device::send_waiting_ack(std::uint32_t qpn) {
  {
    std::shared_lock ql(qps_mutex_);
    auto it = qps_.find(qpn);
    if (it == qps_.end()) return;
    std::lock_guard l(it->second->mutex());
    if (!it->second->answers_owed()) return;  // (destroy_qp waits for no pass then)
  }
  // The TX batch is the pass's: wait for a pass under way to end (microseconds), though not for
  // one stopped for good, which must not stop a destroy (the peer then sends its request again,
  // to a QP that is gone).
  std::unique_lock lock(progress_mutex_, std::defer_lock);
  if (!t_in_step && !t_releasing) {
    const auto until = Clock::now() + std::chrono::milliseconds(2);
    while (!lock.try_lock()) {
      if (Clock::now() >= until) return;
      std::this_thread::yield();
    }
  }
  bool sent = false;
  {
    std::shared_lock ql(qps_mutex_);
    auto it = qps_.find(qpn);
    if (it == qps_.end()) return;
    std::lock_guard l(it->second->mutex());
    sent = it->second->send_waiting_ack();
  }
  if (sent) tx_flush();
}

int Device::destroy_qp(Qp* qp) {
  send_waiting_ack(qp->qpn());
  std::uint64_t serial = 0;
  {
    // Passes reach a QP through qps_ under a shared lock only: once it is out of the map no
    // pass touches it or makes completions for it.
    std::unique_lock lock(qps_mutex_);
    auto it = qps_.find(qp->qpn());
    if (it == qps_.end() || it->second.get() != qp) return EINVAL;
    detach_all_mcast(qp->qpn());
    if (dir_) dir_->remove_qp(qp->qpn());
    add(retired_, qp->counters());
    serial = qp->serial_;
    if (qp->timer_armed_) --timed_qps_;  // its heap entries find no QP of that serial
    qps_.erase(it);
  }
  // Completions a pass made for it and still holds are dropped, and a hand-out under way is
  // waited for (not when a CQ callback of that very hand-out destroys the QP).
  drop_held_wcs(serial);
  return 0;
}

std::size_t Device::unread_completions(std::uint32_t qpn) {
  const Xrcd* xrcd = nullptr;
  std::size_t n = 0;
  {
    std::shared_lock lock(qps_mutex_);
    auto it = qps_.find(qpn);
    if (it == qps_.end()) return 0;
    const Qp& qp = *it->second;
    // A QP's CQs outlive it (destroying a CQ in use is EBUSY), and the QP stays while
    // qps_mutex_ is held.
    if (qp.send_cq_) n += qp.send_cq_->count_qp(qpn);
    if (qp.recv_cq_ && qp.recv_cq_ != qp.send_cq_) n += qp.recv_cq_->count_qp(qpn);
    if (qp.type() == QpType::kXrcRecv) xrcd = qp.xrcd();
    std::lock_guard held(held_mutex_);
    for (const HeldWc& h : held_wcs_) n += h.qp_serial == qp.serial_;
  }
  // An XRC target's receives complete on the CQ of the SRQ each packet named; objects_mutex_ is
  // taken without qps_mutex_, as destroy_cq takes them.
  if (xrcd) n += unread_xrc_completions(xrcd, qpn);
  return n;
}

void Device::set_async_handler(std::function<void(const AsyncEvent&)> fn) {
  std::lock_guard lock(async_mutex_);
  async_handler_ = std::move(fn);
}

void Device::async_event(const AsyncEvent& ev) {
  if (ev.qp && ev.qp->proxy_) return;  // the application never made it: its target reports
  std::lock_guard lock(async_mutex_);
  if (async_handler_) async_handler_(ev);
}

DeviceCounters Device::counters() const {
  return {rx_unknown_qp_.load(), rx_malformed_.load(), rx_packets_.load(), tx_packets_.load()};
}

netdev::IpAddr Device::source_address(std::uint8_t sgid_index) const {
  auto addrs = netdev_->addresses();
  if (sgid_index < addrs.size()) return addrs[sgid_index];
  return addrs.empty() ? netdev::IpAddr{} : addrs[0];
}

bool Device::gid_to_ip(const Gid& gid, netdev::IpAddr& out) const {
  out.bytes = gid;
  // Link-local (fe80::) GIDs of RoCE v1 are not routable over UDP.
  return !(gid[0] == 0xfe && (gid[1] & 0xC0) == 0x80);
}

netdev::Packet* Device::tx_packet() {
  if (tx_count_ == tx_pkts_.size()) tx_flush();
  netdev::Packet* p = tx_ptrs_[tx_count_];
  p->len = 0;
  p->retrans = false;
  p->placed = false;
  return p;
}

void Device::tx_commit() {
  ++tx_count_;
}

void Device::tx_flush() {
  if (tx_count_ == 0) return;
  const std::size_t n = netdev_->send_batch(std::span(tx_ptrs_.data(), tx_count_));
  tx_packets_.fetch_add(n, std::memory_order_relaxed);
  tx_count_ = 0;
}

void Device::queue_kick(const Qp* qp) {
  std::lock_guard lock(kick_mutex_);
  kicked_.push_back(qp->qpn());
}

void Device::kick(Qp* qp) {
  queue_kick(qp);
  // Send at once from this thread when nobody else is in a progress pass; only
  // when somebody is (and may already have looked at the kicks) wake the thread.
  std::unique_lock lock(progress_mutex_, std::try_to_lock);
  if (lock.owns_lock()) {
    step();
    if (active_.empty()) return;
  }
  signal_kick();
}

void Device::receives_posted(Qp* qp) {
  // Not a whole pass for each receive (a program reposts them one by one): the QP only.
  std::unique_lock lock(progress_mutex_, std::try_to_lock);
  if (!lock.owns_lock()) {
    queue_kick(qp);
    signal_kick();
    return;
  }
  t_in_step = true;
  {
    std::lock_guard ql(qp->mutex());
    qp->drain_ud_hold(Clock::now());
    list_timers(*qp);
  }
  t_in_step = false;
  release_held_wcs();
}

void Device::rx_step() {
  // A pass that sends for many QPs takes long: with one batch read per pass, ACKs for 1,000 QPs
  // waited in the ring past their retransmission timeout. What is there is read, up to a bound.
  for (int b = 0; b < kRxBatchesPerPass; ++b) {
    if (rx_batch() < kBatch) return;
  }
}

std::size_t Device::rx_batch() {
  const std::size_t n = netdev_->recv_batch(rx_ptrs_);
  if (n == 0) return 0;
  rx_packets_.fetch_add(n, std::memory_order_relaxed);
  std::shared_lock lock(qps_mutex_);
  for (std::size_t i = 0; i < n; ++i) {
    const netdev::Packet& raw = *rx_ptrs_[i];
    if (netdev::is_pause(raw)) {
      rx_pause(raw);
      continue;
    }
    auto pkt = wire::parse_roce(wire::Bytes(raw.data, raw.len));
    if (!pkt) {
      rx_malformed_.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    // A packet's P_Key must match an entry of the port's table (IBTA 10.9.3: low 15 bits equal,
    // one side a full member), and below the QP's own; others are dropped and counted as a
    // P_Key violation, as rxe's check_keys does.
    if (pkey_index_of(pkt->hdr.bth.pkey) < 0) {
      rx_bad_pkey_.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    if (pkt->hdr.bth.dest_qp == kMulticastQpn || netdev::is_multicast(raw.dst)) {
      rx_multicast(*pkt, raw);
      continue;
    }
    auto it = qps_.find(pkt->hdr.bth.dest_qp);
    if (it == qps_.end()) {
      rx_unknown_qp_.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    Qp& qp = *it->second;
    // The GSI QP takes every partition of the table; the others their own only.
    if (qp.qpn() != 1 && !pkey_match(pkt->hdr.bth.pkey, qp.pkey())) {
      rx_bad_pkey_.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    {
      std::lock_guard ql(qp.mutex());
      qp.receive(*pkt, raw);
      list_timers(qp);
    }
    activate(qp);
  }
  return n;
}

void Device::rx_multicast(const wire::RocePacket& pkt, const netdev::Packet& raw) {
  // Only QPN 0xFFFFFF to a group address is multicast; either alone is a malformed datagram.
  std::shared_lock ml(mcast_mutex_);
  auto g = pkt.hdr.bth.dest_qp == kMulticastQpn && netdev::is_multicast(raw.dst)
               ? mcast_.find(raw.dst.bytes)
               : mcast_.end();
  if (g == mcast_.end()) {
    rx_mcast_dropped_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  for (std::uint32_t qpn : g->second) {
    auto it = qps_.find(qpn);
    if (it == qps_.end()) continue;
    Qp& qp = *it->second;
    {
      std::lock_guard ql(qp.mutex());
      qp.receive(pkt, raw);
      list_timers(qp);
    }
    activate(qp);
  }
}

int Device::attach_mcast(Qp* qp, const Gid& gid) {
  if (!qp || !is_multicast_gid(gid)) return EINVAL;
  std::shared_lock ql(qps_mutex_);
  auto it = qps_.find(qp->qpn());
  if (it == qps_.end() || it->second.get() != qp || qp->type() != QpType::kUd) return EINVAL;
  std::unique_lock ml(mcast_mutex_);
  std::size_t total = 0;
  for (const auto& [group, qpns] : mcast_) total += qpns.size();
  auto g = mcast_.find(gid);
  if (g != mcast_.end() &&
      std::find(g->second.begin(), g->second.end(), qp->qpn()) != g->second.end()) {
    return 0;
  }
  if (total >= attr_.max_total_mcast_qp_attach) return ENOMEM;
  if (g != mcast_.end()) {
    if (g->second.size() >= attr_.max_mcast_qp_attach) return ENOMEM;
    g->second.push_back(qp->qpn());
    return 0;
  }
  if (mcast_.size() >= attr_.max_mcast_grp) return ENOMEM;
  netdev::IpAddr group;
  group.bytes = gid;
  if (const int err = netdev_->join_group(group)) return err;
  mcast_[gid].push_back(qp->qpn());
  return 0;
}

int Device::detach_mcast(Qp* qp, const Gid& gid) {
  if (!qp || !is_multicast_gid(gid)) return EINVAL;
  std::shared_lock ql(qps_mutex_);
  auto it = qps_.find(qp->qpn());
  if (it == qps_.end() || it->second.get() != qp) return EINVAL;
  std::unique_lock ml(mcast_mutex_);
  auto g = mcast_.find(gid);
  if (g == mcast_.end() || std::erase(g->second, qp->qpn()) == 0) return EINVAL;
  if (g->second.empty()) {
    mcast_.erase(g);
    netdev::IpAddr group;
    group.bytes = gid;
    netdev_->leave_group(group);
  }
  return 0;
}

void Device::detach_all_mcast(std::uint32_t qpn) {
  std::unique_lock ml(mcast_mutex_);
  for (auto g = mcast_.begin(); g != mcast_.end();) {
    if (std::erase(g->second, qpn) == 0 || !g->second.empty()) {
      ++g;
      continue;
    }
    netdev::IpAddr group;
    group.bytes = g->first;
    netdev_->leave_group(group);
    g = mcast_.erase(g);
  }
}

std::size_t Device::mcast_attached(const Gid& gid) const {
  std::shared_lock ml(mcast_mutex_);
  auto g = mcast_.find(gid);
  return g == mcast_.end() ? 0 : g->second.size();
}

void Device::signal_kick() {
  // Write, then flag: a pass that sees the flag finds the count to drain. (A write
  // not yet flagged wakes the thread once more, and the next pass drains it.)
  const std::uint64_t one = 1;
  (void)!write(kick_fd_, &one, sizeof one);
  kick_signaled_.store(true, std::memory_order_release);
}

void Device::complete_recv(const Qp& qp, Cq* cq, const Wc& wc, bool solicited) {
  if (t_in_step) {
    std::lock_guard lock(held_mutex_);
    held_wcs_.push_back({qp.serial_, qp.xrc_srq_, cq, wc, solicited});
    return;
  }
  if (!cq->push(wc, solicited)) async_event({AsyncEventType::kCqErr, nullptr, cq});
}

void Device::release_held_wcs() {
  {
    std::lock_guard lock(held_mutex_);
    if (held_wcs_.empty()) return;
  }
  // One at a time, the push outside held_mutex_: a CQ's callbacks may destroy a QP.
  std::lock_guard release(release_mutex_);
  t_releasing = true;
  for (;;) {
    HeldWc h{};
    {
      std::lock_guard lock(held_mutex_);
      if (held_wcs_.empty()) break;
      h = held_wcs_.front();
      held_wcs_.pop_front();
    }
    if (!h.cq->push(h.wc, h.solicited)) async_event({AsyncEventType::kCqErr, nullptr, h.cq});
  }
  t_releasing = false;
}

void Device::xrc_srq_unpublished(const Srq* srq) {
  // The messages these complete were received before ibv_destroy_srq (the sender may have
  // seen them acknowledged): they are the application's, and its CQ still exists. They appear
  // before the end of the pass that made them, so possibly before its ACKs have left.
  std::unique_lock release(release_mutex_, std::defer_lock);
  if (!t_releasing) release.lock();
  std::vector<HeldWc> mine;
  {
    std::lock_guard lock(held_mutex_);
    std::erase_if(held_wcs_, [&](const HeldWc& h) {
      if (h.xrc_srq != srq) return false;
      mine.push_back(h);
      return true;
    });
  }
  for (const HeldWc& h : mine) {
    if (!h.cq->push(h.wc, h.solicited)) async_event({AsyncEventType::kCqErr, nullptr, h.cq});
  }
  if (release.owns_lock()) release.unlock();
  // Its proxies: a request for it finds no SRQ now, and the proxies go before its domain can.
  std::vector<std::uint32_t> gone;
  {
    std::lock_guard lock(proxies_mutex_);
    std::erase_if(proxies_, [&](const auto& e) {
      if (std::get<3>(e.first) != srq->srqn) return false;
      gone.push_back(e.second);
      return true;
    });
  }
  for (std::uint32_t qpn : gone) {
    Qp* qp = nullptr;
    {
      std::shared_lock lock(qps_mutex_);
      auto it = qps_.find(qpn);
      if (it != qps_.end() && it->second->proxy_) qp = it->second.get();
    }
    if (qp) destroy_qp(qp);
  }
}

void Device::drop_held_wcs(std::uint64_t qp_serial) {
  std::unique_lock release(release_mutex_, std::defer_lock);
  if (!t_releasing) release.lock();
  std::lock_guard lock(held_mutex_);
  std::erase_if(held_wcs_, [qp_serial](const HeldWc& h) { return h.qp_serial == qp_serial; });
}

Clock::time_point Device::step() {
  t_in_step = true;
  // Drain the wake-up first, then take the kicks: a kick that lands in
  // between writes the eventfd again, so none is lost.
  if (kick_signaled_.exchange(false, std::memory_order_acq_rel)) {
    std::uint64_t drain = 0;
    (void)!read(kick_fd_, &drain, sizeof drain);
  }
  rx_step();
  // The relay's channel costs a system call: every pass of the progress thread reads it, an
  // application's pass only while messages came lately (ib_send_lat -c XRC, which never relays:
  // 2.1 µs typical, 2.8-3.2 with a read in every pass).
  if (XrcRelay* relay = this->relay();
      relay && (t_progress_thread || Clock::now().time_since_epoch().count() <
                                         relay_busy_until_ns_.load(std::memory_order_relaxed))) {
    relay_step(*relay);
  }
  const auto now = Clock::now();
  auto deadline = Clock::time_point::max();
  ++pass_;
  {
    std::shared_lock lock(qps_mutex_);
    {
      std::lock_guard kl(kick_mutex_);
      for (std::uint32_t q : kicked_) {
        auto it = qps_.find(q);
        if (it != qps_.end()) activate(*it->second);
      }
      kicked_.clear();
    }
    // The QPs with packets out share the budget too: a QP its window stops leaves active_ but
    // keeps its retransmission timer armed, and counting only active_ let the others' windows
    // grow until 1000 QPs had far more than the budget out (go-back-N storms).
    senders_ = static_cast<std::uint32_t>(
        std::max<std::size_t>({active_.size(), timed_qps_, std::size_t{1}}));
    std::vector<std::uint32_t> still;
    for (std::uint32_t q : active_) {
      auto it = qps_.find(q);
      if (it == qps_.end()) continue;  // destroyed
      Qp& qp = *it->second;
      // Once a pass: an entry left by a destroyed QP whose number a new one took may repeat it.
      if (qp.sent_in_pass_ == pass_) continue;
      qp.sent_in_pass_ = pass_;
      std::lock_guard ql(qp.mutex());
      qp.in_active_ = qp.run_send(now);
      if (qp.in_active_) still.push_back(q);
      list_timers(qp);
    }
    active_.swap(still);
    // Only the timers that are due: the heap's top is the earliest deadline listed.
    while (!timers_.empty() && timers_.front().when <= now) {
      std::pop_heap(timers_.begin(), timers_.end(), std::greater<>());
      const TimerEntry e = timers_.back();
      timers_.pop_back();
      auto it = qps_.find(e.qpn);
      if (it == qps_.end() || it->second->serial_ != e.serial) continue;  // destroyed
      Qp& qp = *it->second;
      std::lock_guard ql(qp.mutex());
      // A timer that rewound the send queue makes the QP active for the next pass
      // (not a kick: this thread already holds the progress mutex).
      if (qp.run_timers(now)) activate(qp);
      // Its earliest entry is used up; a later one (the deadline moved) may still wait.
      if (e.when == qp.timer_listed_at_) qp.timer_listed_at_ = Clock::time_point::max();
      list_timers(qp);
    }
    if (!timers_.empty()) deadline = timers_.front().when;
  }
  tx_flush();
  t_in_step = false;
  release_held_wcs();
  netdev_->service();
  // The backend may need service sooner (datagrams held for a full host-local ring, sent from
  // an application's pass while the progress thread sleeps).
  auto wake = deadline;
  if (const int nt = netdev_->next_timeout_ms(); nt >= 0) {
    wake = std::min(wake, Clock::now() + std::chrono::milliseconds(nt));
  }
  // (epoll sleeps in whole milliseconds, rounded up: allow for that.)
  if (wake != Clock::time_point::max() &&
      (wake + std::chrono::milliseconds(2)).time_since_epoch().count() <
          planned_wake_ns_.load(std::memory_order_relaxed)) {
    signal_kick();
  }
  return deadline;
}

namespace {
// A program polling its CQ calls poll_progress at least this often...
constexpr std::int64_t kPollGapNs = 5'000;
// ... and once it has done so for this long, the progress thread leaves the work to it,
constexpr std::int64_t kPollRunNs = 200'000;
// looking again after this nap.
constexpr auto kProgressNap = std::chrono::microseconds(50);
// After a datagram came, keep passing (yielding the core between passes) this long before
// sleeping: the next one of a ping-pong is then taken without a wake-up, which on a busy core
// waits for the scheduler (ib_write_lat 2 B across a veth pair: 100-200 µs average without,
// 36-72 µs with; docs/threading.md).
constexpr std::int64_t kKeepPassingNs = 100'000;
// With nothing to wake it sooner, the progress thread still looks once a second.
constexpr std::int64_t kSafetyTickNs = 1'000'000'000;

std::int64_t now_ns() {
  return Clock::now().time_since_epoch().count();
}
}  // namespace

void Device::activate(Qp& qp) {
  if (qp.in_active_) return;
  qp.in_active_ = true;
  active_.push_back(qp.qpn());
}

void Device::list_timers(Qp& qp) {
  const auto d = qp.next_deadline();
  const bool armed = d != Clock::time_point::max();
  if (armed != qp.timer_armed_) {
    qp.timer_armed_ = armed;
    timed_qps_ += armed ? 1 : -1;
  }
  // Earlier than its earliest entry: list it. A deadline that moved later keeps its entry, which
  // finds nothing due when it comes and lists the QP again for the new deadline.
  if (d >= qp.timer_listed_at_) return;
  qp.timer_listed_at_ = d;
  timers_.push_back({d, qp.qpn(), qp.serial_});
  std::push_heap(timers_.begin(), timers_.end(), std::greater<>());
}

std::uint32_t Device::window_for(std::uint32_t mtu) const {
  const std::uint64_t w = kSendBudgetBytes / senders_ / std::max<std::uint32_t>(mtu, 256);
  return static_cast<std::uint32_t>(std::clamp<std::uint64_t>(w, 2, 2048));
}

bool Device::poll_progress() {
  const std::int64_t now = now_ns();
  if (now - app_poll_last_ns_.load(std::memory_order_relaxed) > kPollGapNs) {
    app_poll_run_ns_.store(now, std::memory_order_relaxed);
  }
  app_poll_last_ns_.store(now, std::memory_order_relaxed);
  std::unique_lock lock(progress_mutex_, std::try_to_lock);
  if (!lock.owns_lock()) return false;
  step();
  if (!active_.empty()) {
    // Work left over: make sure the progress thread picks it up.
    signal_kick();
  }
  return true;
}

void Device::progress_loop() {
  t_progress_thread = true;
  std::vector<epoll_event> events(4);
  // Naps are short: let the kernel end them on time rather than up to 50 µs late.
  prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
  // Sleeps in epoll for at most `max`: a kick, a datagram or a ring's bell ends it sooner.
  bool have_pwait2 = true;
  auto wait = [&](std::chrono::nanoseconds max) {
    const timespec ts{static_cast<time_t>(max.count() / 1'000'000'000),
                      static_cast<long>(max.count() % 1'000'000'000)};
    planned_wake_ns_.store((Clock::now() + max).time_since_epoch().count(),
                           std::memory_order_relaxed);
    if (have_pwait2 &&
        epoll_pwait2(epoll_fd_, events.data(), static_cast<int>(events.size()), &ts, nullptr) < 0 &&
        errno == ENOSYS) {
      have_pwait2 = false;  // before Linux 5.11: whole milliseconds, rounded up
    }
    if (!have_pwait2) {
      const auto ms = std::chrono::ceil<std::chrono::milliseconds>(max).count();
      epoll_wait(epoll_fd_, events.data(), static_cast<int>(events.size()), static_cast<int>(ms));
    }
    planned_wake_ns_.store(0, std::memory_order_relaxed);
  };
  std::uint64_t last_rx = rx_packets_.load(std::memory_order_relaxed);
  std::int64_t last_rx_ns = 0;
  while (!stop_) {
    // An application that has polled without pause for a while sends, receives and fires
    // timers in its own passes: contending with it would only take a core from it. Then
    // this thread naps (still woken by kicks, datagrams and bells) instead of spinning.
    const std::int64_t now = now_ns();
    const bool app_drives = now - app_poll_last_ns_.load(std::memory_order_relaxed) < kPollGapNs &&
                            now - app_poll_run_ns_.load(std::memory_order_relaxed) > kPollRunNs;
    std::int64_t timeout_ns = -1;
    {
      // An application thread in a pass is making progress for us: don't queue behind it
      // (a blocked lock costs a futex wake-up and a context switch per pass).
      std::unique_lock lock(progress_mutex_, std::try_to_lock);
      if (!lock.owns_lock()) {
        if (app_drives) {
          wait(kProgressNap);
        } else {
          sched_yield();
        }
        continue;
      }
      const auto deadline = step();
      if (!active_.empty()) {
        timeout_ns = 0;
      } else if (deadline != Clock::time_point::max()) {
        // To the nanosecond where epoll_pwait2 is there (a paced QP's next packet), else `wait`
        // rounds up to the millisecond; at least a microsecond, so that a deadline the pass left
        // due never turns this loop into a spin.
        timeout_ns = std::clamp<std::int64_t>(
            std::chrono::duration_cast<std::chrono::nanoseconds>(deadline - Clock::now()).count(),
            1'000, kSafetyTickNs);
      }
      const int nt = netdev_->next_timeout_ms();
      if (nt >= 0 && (timeout_ns < 0 || std::int64_t{nt} * 1'000'000 < timeout_ns)) {
        timeout_ns = std::int64_t{nt} * 1'000'000;
      }
      if (timeout_ns < 0) timeout_ns = kSafetyTickNs;  // a slow safety tick; no busy loop
      // Shared-memory peers write no fd unless asked to, just before we block; not for a nap
      // (their bells would cost both sides a system call per datagram).
      if (app_drives) {
        netdev_->prepare_sleep(false);
      } else if (timeout_ns > 0 && !netdev_->prepare_sleep()) {
        timeout_ns = 0;
      }
    }
    if (app_drives) {  // (timers are at least a millisecond away, or the application's)
      wait(kProgressNap);
      continue;
    }
    if (timeout_ns > 0) {
      const std::uint64_t rx = rx_packets_.load(std::memory_order_relaxed);
      const std::int64_t t = now_ns();
      if (rx != last_rx) {
        last_rx = rx;
        last_rx_ns = t;
      }
      if (t - last_rx_ns < kKeepPassingNs) {
        sched_yield();
        continue;
      }
      wait(std::chrono::nanoseconds(timeout_ns));
    }
  }
}

}  // namespace softrdma::rxe
