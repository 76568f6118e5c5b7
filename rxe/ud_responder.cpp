// The UD responder: Q_Key check, a receive WQE per datagram (or a wait for one, rxe/ud_hold.h),
// and the 40-byte GRH in front of its payload, as real devices place it.
#include <algorithm>

#include "core/payload.h"
#include "rxe/device.h"
#include "rxe/qp.h"
#include "rxe/uses_core.h"
#include "wire/net.h"

namespace softrdma::rxe {

void Qp::ud_request(const wire::RocePacket& pkt, const netdev::Packet& raw) {
  const wire::Deth& deth = *pkt.hdr.deth;
  if (deth.qkey != attr_.qkey) {
    ++counters_.dropped_bad_qkey;
    return;
  }
  // In order: behind the datagrams that still wait for a WQE, if any.
  if (!ud_hold_.empty()) drain_ud_hold(Clock::now());
  if (ud_hold_.empty() && take_recv_wqe()) {
    ud_deliver(pkt, raw);
    return;
  }
  // Not with an SRQ: receives posted to it do not pass through this QP to take what it holds.
  const auto hold_for = srq_ ? std::chrono::microseconds{} : dev_.cc().ud_hold;
  if (hold_for.count() && ud_hold_.hold(raw, Clock::now() + hold_for)) {
    ++counters_.held_no_recv;
    return;
  }
  ++counters_.dropped_no_recv;
}

void Qp::drain_ud_hold(Clock::time_point now) {
  while (!ud_hold_.empty()) {
    if (take_recv_wqe()) {
      const netdev::Packet& raw = ud_hold_.front();
      // It parsed when it came; the WQE stays for the next one if it did not.
      if (auto pkt = wire::parse_roce(wire::Bytes(raw.data, raw.len))) ud_deliver(*pkt, raw);
    } else if (ud_hold_.front_deadline() <= now) {
      ++counters_.dropped_no_recv;
    } else {
      return;
    }
    ud_hold_.pop();
  }
}

void Qp::ud_deliver(const wire::RocePacket& pkt, const netdev::Packet& raw) {
  const wire::Deth& deth = *pkt.hdr.deth;
  // The 40-byte GRH real devices put in front of a UD payload: for IPv4 the
  // IPv4 header sits at offset 20 after 20 zero bytes.
  std::uint8_t grh[40] = {};
  const auto n = static_cast<std::uint32_t>(pkt.payload.size());
  const auto udp_len = static_cast<std::uint16_t>(wire::kUdpLen + raw.len);
  if (raw.src.is_v4()) {
    wire::Ipv4 ip;
    ip.tos = raw.traffic_class;
    ip.total_len = static_cast<std::uint16_t>(wire::kIpv4MinLen + udp_len);
    ip.ttl = raw.hop_limit;
    ip.protocol = wire::kIpProtoUdp;
    ip.src = raw.src.v4_host();
    ip.dst = raw.dst.v4_host();
    wire::build_ipv4(wire::MutBytes(grh + 20, 20), ip);
  } else {
    wire::Ipv6 ip;
    ip.traffic_class = raw.traffic_class;
    ip.payload_len = udp_len;
    ip.next_header = wire::kIpProtoUdp;
    ip.hop_limit = raw.hop_limit;
    ip.src = raw.src.bytes;
    ip.dst = raw.dst.bytes;
    wire::build_ipv6(wire::MutBytes(grh, 40), ip);
  }
  Wc wc;
  wc.wr_id = cur_wqe_.wr_id;
  wc.opcode = WcOpcode::kRecv;
  wc.qp_num = qpn_;
  wc.src_qp = deth.src_qp;
  wc.sl = raw.src.is_v4() ? kWcSlRoceV2Ipv4 : kWcSlRoceV2Ipv6;
  // The table entry the datagram's P_Key matched (the GSI QP takes any of them).
  wc.pkey_index = static_cast<std::uint16_t>(std::max(dev_.pkey_index_of(pkt.hdr.bth.pkey), 0));
  have_wqe_ = false;
  if (40 + std::uint64_t{n} > cur_wqe_.total) {
    wc.status = WcStatus::kLocLenErr;
    post_recv_completion(wc, false);
    return;
  }
  WcStatus err = WcStatus::kSuccess;
  if (!scatter(dev_.mrs(), pd_, cur_wqe_.sge, 0, grh, 40, err) ||
      (n && !scatter(dev_.mrs(), pd_, cur_wqe_.sge, 40, pkt.payload.data(), n, err))) {
    wc.status = err;
    post_recv_completion(wc, false);
    return;
  }
  wc.byte_len = 40 + n;
  wc.wc_flags = kWcGrh;
  if (pkt.hdr.imm) {
    wc.imm_data = *pkt.hdr.imm;
    wc.wc_flags |= kWcWithImm;
  }
  post_recv_completion(wc, pkt.hdr.bth.se);
}

}  // namespace softrdma::rxe
