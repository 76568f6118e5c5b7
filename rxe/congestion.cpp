// DCQCN in the QP: the notification point (CE-marked packets in, CNPs out) and the reaction
// point (CNPs in, the requester paced at the rate DCQCN sets).
#include "rxe/device.h"
#include "rxe/qp.h"

namespace softrdma::rxe {

namespace {
// A paced QP whose next packet is due sooner than this stays in the pass (a wake-up costs about
// as much); a later one waits on its pacing deadline like a timer, and the progress thread sleeps
// to the microsecond for it. Spinning for every gap under a millisecond, as this once did, took
// the cores from the receiving side: four senders paced at 200 Mb/s into one switch port kept
// 1.8 of the 2 cores busy, the receiver got 3 % of one and its notification point one pass per
// few milliseconds (docs/congestion.md).
constexpr auto kPaceSpin = std::chrono::microseconds(20);
}  // namespace

void Qp::notify_congestion(const wire::RocePacket& pkt, const netdev::Packet& raw,
                           Clock::time_point now) {
  ++counters_.np_ecn_marked_roce_packets;
  if (!cc_on_ || netdev::is_multicast(raw.dst)) return;
  if (cnp_sent_ && now - last_cnp_sent_ < dev_.cc().cnp_interval) return;
  // The sending QP: the connected one (RC, UC), or the datagram's source QP (UD).
  std::uint32_t dest_qpn = attr_.dest_qp_num;
  if (type_ == QpType::kUd) {
    if (!pkt.hdr.deth) return;
    dest_qpn = pkt.hdr.deth->src_qp;
  }
  using namespace wire;
  netdev::Packet* p = dev_.tx_packet();
  RoceHeaders h;
  h.bth.opcode = op::kCnp;
  h.bth.pkey = pkey();  // the QP's partition, as the packets that were marked
  h.bth.dest_qp = dest_qpn;
  auto n = build_roce(MutBytes(p->data, p->cap), h, {});
  if (!n) return;
  p->len = static_cast<std::uint32_t>(*n);
  send_to(p, raw.src, raw.dst, kCnpTrafficClass, 64);
  ++counters_.np_cnp_sent;
  cnp_sent_ = true;
  last_cnp_sent_ = now;
}

void Qp::on_cnp(Clock::time_point now) {
  if (cc_on_ && dcqcn_.on_cnp(now)) {
    ++counters_.rp_cnp_handled;
  } else {
    ++counters_.rp_cnp_ignored;
  }
}

bool Qp::pace_allows(Clock::time_point now, bool& stay_active) {
  dcqcn_.advance(now);  // the timers may have raised it back to line rate
  if (!paced() || pacer_.may_send(now, dcqcn_.rate_bps())) return true;
  const Clock::time_point next = pacer_.next_send(dcqcn_.rate_bps());
  if (next - now < kPaceSpin) {
    stay_active = true;
  } else {
    pace_deadline_ = next;
  }
  return false;
}

void Qp::paced_sent(std::uint32_t bytes, Clock::time_point now) {
  if (!paced()) return;
  pacer_.sent(bytes, dcqcn_.rate_bps(), now);
  dcqcn_.on_sent(bytes, now);
}

}  // namespace softrdma::rxe
