// The device's part of XRC across processes (rxe/xrc_relay.h): its channel, the answers to its
// targets' passed requests, and the proxies that run other devices' requests for its SRQs.
#include <sys/epoll.h>

#include <algorithm>

#include "rxe/device.h"
#include "wire/roce_headers.h"

namespace softrdma::rxe {

std::uint64_t Device::xrc_channel() {
  std::lock_guard lock(relay_mutex_);
  if (!relay_) {
    int err = 0;
    relay_ = XrcRelay::open(&err);
    if (!relay_) return 0;  // other devices then cannot reach this one's SRQs: their NAK
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = relay_->fd();
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, relay_->fd(), &ev);
    relay_ptr_.store(relay_.get(), std::memory_order_release);
  }
  return relay_->channel();
}

void Device::relay_step(XrcRelay& relay) {
  // A bounded number a pass, so that a flood of requests does not starve the rest.
  for (int i = 0; i < 64; ++i) {
    const XrcRelay::Message m = relay.receive();
    if (m.kind == XrcRelay::Message::Kind::kNone) return;
    relay_busy_until_ns_.store(
        (Clock::now() + std::chrono::milliseconds(1)).time_since_epoch().count(),
        std::memory_order_relaxed);
    if (m.kind == XrcRelay::Message::Kind::kAnswer) {
      relay_answered(m.answer);
    } else {
      relay_request(relay, m.request, m.packet, m.len);
    }
  }
  signal_kick();  // more may wait: the next pass takes them
}

void Device::relay_answered(const RelayAnswer& a) {
  std::shared_lock lock(qps_mutex_);
  auto it = qps_.find(a.target_qpn);
  if (it == qps_.end()) return;  // destroyed meanwhile
  Qp& qp = *it->second;
  {
    std::lock_guard ql(qp.mutex());
    qp.forward_answered(a);
    qp.run_parked();
    list_timers(qp);
  }
  activate(qp);  // its responses leave with its send pass
}

void Device::relay_request(XrcRelay& relay, const RelayRequest& r, const std::uint8_t* packet,
                           std::size_t len) {
  RelayAnswer a;
  a.target_qpn = r.target_qpn;
  a.psn = r.psn;
  a.failed = true;  // unless a proxy runs it
  a.add(RelayResponse{wire::syndrome::kNakInvalidRequest, false, false, r.psn, 0});
  const auto pkt = wire::parse_roce(wire::Bytes(packet, len));
  Xrcd* xrcd = nullptr;
  // Its SRQ, of the same domain as the target (a file's domain: the same inode), held until the
  // proxy ran: destroy_srq, which destroys the SRQ's proxies, waits for the hold.
  core::XrcSrqTable::Hold h;
  if (pkt && pkt->hdr.xrceth && pkt->hdr.xrceth->srqn == r.srqn && pkt->hdr.bth.psn == r.psn &&
      pkt->info->request) {
    h = find_xrc_srq(r.srqn);
    Xrcd* x = h.get() ? h.get()->xrcd() : nullptr;
    if (x && x->keyed && x->dev == r.xrcd_dev && x->ino == r.xrcd_ino) xrcd = x;
  }
  const std::uint32_t qpn = xrcd ? proxy_for(r, xrcd) : 0;
  if (qpn != 0) {
    std::shared_lock lock(qps_mutex_);
    auto it = qps_.find(qpn);
    if (it != qps_.end() && it->second->proxy_) {
      Qp& proxy = *it->second;
      netdev::Packet raw;
      raw.data = const_cast<std::uint8_t*>(packet);
      raw.len = raw.cap = static_cast<std::uint32_t>(len);
      std::lock_guard ql(proxy.mutex());
      a = proxy.run_proxied(r, *pkt, raw);
    }
  }
  relay.send_answer(r.from_pid, r.from_channel, a);  // lost: the target forgets it in time
}

std::uint32_t Device::proxy_for(const RelayRequest& r, Xrcd* xrcd) {
  const auto key = std::make_tuple(r.from_pid, r.from_channel, r.target_qpn, r.srqn);
  std::uint32_t qpn = 0;
  {
    std::lock_guard lock(proxies_mutex_);
    if (auto it = proxies_.find(key); it != proxies_.end()) qpn = it->second;
  }
  Qp* qp = nullptr;
  if (qpn != 0) {
    std::shared_lock lock(qps_mutex_);
    auto it = qps_.find(qpn);
    if (it != qps_.end() && it->second->proxy_) qp = it->second.get();
  }
  if (!qp) {
    QpCap cap;
    int err = 0;
    qp = create_qp(nullptr, QpType::kXrcRecv, nullptr, nullptr, nullptr, cap, false, &err, 0, xrcd);
    if (!qp) return 0;
    qp->proxy_ = true;
    std::lock_guard lock(proxies_mutex_);
    proxies_[key] = qp->qpn();
  }
  // Up (again, after a request it failed): attributes as the target's, addressed to this
  // device itself (it never sends: what it answers goes back to the target).
  if (qp->state() != QpState::kRts) {
    QpAttr at;
    at.qp_state = QpState::kReset;
    qp->modify(at, kQpState);
    at.qp_state = QpState::kInit;
    at.port_num = 1;
    at.qp_access_flags = r.access;
    qp->modify(at, kQpState | kQpPkeyIndex | kQpPort | kQpAccessFlags);
    at.qp_state = QpState::kRtr;
    at.path_mtu = Mtu::k1024;
    at.dest_qp_num = r.initiator_qpn;
    at.rq_psn = r.psn;
    at.min_rnr_timer = r.min_rnr_timer;
    at.max_dest_rd_atomic = std::max<std::uint8_t>(r.max_dest_rd_atomic, 1);
    at.ah_attr.dgid = gids_.front();
    qp->modify(at, kQpState | kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn | kQpMinRnrTimer |
                       kQpMaxDestRdAtomic);
    at.qp_state = QpState::kRts;
    at.sq_psn = 0;
    at.timeout = 0;
    qp->modify(at, kQpState | kQpTimeout | kQpSqPsn);
    if (qp->state() != QpState::kRts) return 0;
  }
  return qp->qpn();
}

}  // namespace softrdma::rxe
