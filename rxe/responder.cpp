// The responder: checks PSNs (duplicates, sequence errors), executes SEND, WRITE,
// READ and atomics after rkey/PD/access/bounds checks, answers with ACKs, NAKs,
// read responses and atomic ACKs; UD receives with Q_Key checks and the GRH.
#include <algorithm>
#include <atomic>
#include <cstring>

#include "core/payload.h"
#include "rxe/device.h"
#include "rxe/psn.h"
#include "rxe/qp.h"
#include "rxe/uses_core.h"
#include "wire/net.h"

namespace softrdma::rxe {

namespace {

std::uint8_t nak_for(MrCheck) {
  return wire::syndrome::kNakRemoteAccess;
}

}  // namespace

void Qp::receive(const wire::RocePacket& pkt, const netdev::Packet& raw) {
  ++counters_.rx_packets;
  const QpState st = attr_.qp_state;
  if (st != QpState::kRtr && st != QpState::kRts && st != QpState::kSqd && st != QpState::kSqe) {
    return;  // not receiving (RESET, INIT, ERR)
  }
  const wire::Transport t = pkt.info->transport;
  if (t == wire::Transport::kCnp) {
    on_cnp(Clock::now());
    return;
  }
  const bool match = (type_ == QpType::kRc && t == wire::Transport::kRc) ||
                     (type_ == QpType::kUc && t == wire::Transport::kUc) ||
                     (type_ == QpType::kUd && t == wire::Transport::kUd);
  if (!match) {
    ++counters_.dropped_bad_opcode;
    return;
  }
  // Congestion: a CE mark, or (UC, UD) a datagram dropped for want of a receive WQE, which is
  // where an unpaced sender overruns its receiver.
  const bool ce = ecn_ce(raw.traffic_class);
  const std::uint64_t no_recv = counters_.dropped_no_recv;
  if (type_ == QpType::kUd) {
    ud_request(pkt, raw);
    if (ce || (counters_.dropped_no_recv != no_recv && ecn_capable(raw.traffic_class))) {
      notify_congestion(pkt, raw, Clock::now());
    }
    return;
  }
  if (raw.src != peer_) {
    ++counters_.dropped_wrong_peer;
    return;
  }
  if (pkt.info->request) {
    rc_uc_request(pkt, raw);
    if (ce || (counters_.dropped_no_recv != no_recv && ecn_capable(raw.traffic_class))) {
      notify_congestion(pkt, raw, Clock::now());
    }
  } else if (type_ == QpType::kRc && st != QpState::kRtr) {
    rc_response(pkt);
  }
}

bool Qp::take_recv_wqe() {
  if (have_wqe_) return true;
  if (srq_) {
    auto w = srq_->take();
    if (!w) return false;
    cur_wqe_ = std::move(*w);
  } else {
    if (rq_.empty()) return false;
    cur_wqe_ = std::move(rq_.front());
    rq_.pop();
  }
  have_wqe_ = true;
  return true;
}

void Qp::send_to_peer(netdev::Packet* p) {
  p->dst = peer_;
  p->src = local_;
  p->src_port = src_port_;
  p->dst_port = dev_.netdev().roce_port();
  p->traffic_class = attr_.ah_attr.traffic_class;
  p->hop_limit = attr_.ah_attr.hop_limit ? attr_.ah_attr.hop_limit : 64;
  dev_.tx_commit();
  ++counters_.tx_packets;
}

void Qp::send_ack(std::uint8_t syndrome, std::uint32_t psn) {
  using namespace wire;
  netdev::Packet* p = dev_.tx_packet();
  RoceHeaders h;
  h.bth.opcode = op::kRcAck;
  h.bth.pkey = pkey();
  h.bth.dest_qp = attr_.dest_qp_num;
  h.bth.psn = psn;
  h.aeth = Aeth{syndrome, msn_};
  auto n = build_roce(MutBytes(p->data, p->cap), h, {});
  if (!n) return;
  p->len = static_cast<std::uint32_t>(*n);
  send_to_peer(p);
}

void Qp::send_atomic_ack(std::uint32_t psn, std::uint64_t orig) {
  using namespace wire;
  netdev::Packet* p = dev_.tx_packet();
  RoceHeaders h;
  h.bth.opcode = op::kRcAtomicAck;
  h.bth.pkey = pkey();
  h.bth.dest_qp = attr_.dest_qp_num;
  h.bth.psn = psn;
  h.aeth = Aeth{wire::syndrome::kAckNoCredit, msn_};
  h.atomic_ack_eth = AtomicAckEth{orig};
  auto n = build_roce(MutBytes(p->data, p->cap), h, {});
  if (!n) return;
  p->len = static_cast<std::uint32_t>(*n);
  send_to_peer(p);
}

void Qp::responder_error(std::uint8_t nak_syndrome, std::uint32_t psn, WcStatus recv_status) {
  if (type_ == QpType::kRc) send_ack(nak_syndrome, psn);
  if (have_wqe_ && recv_status != WcStatus::kSuccess) {
    Wc wc;
    wc.wr_id = cur_wqe_.wr_id;
    wc.status = recv_status;
    wc.opcode = WcOpcode::kRecv;
    wc.qp_num = qpn_;
    post_recv_completion(wc, false);
    have_wqe_ = false;
  }
  const AsyncEventType ev = nak_syndrome == wire::syndrome::kNakRemoteAccess
                                ? AsyncEventType::kQpAccessErr
                                : AsyncEventType::kQpReqErr;
  enter_error();
  dev_.async_event({ev, this});
}

void Qp::rc_uc_request(const wire::RocePacket& pkt, const netdev::Packet& raw) {
  using wire::OpKind;
  using wire::Seg;
  const wire::Bth& bth = pkt.hdr.bth;
  const std::uint32_t psn = bth.psn;
  const wire::RoceOpcodeInfo& info = *pkt.info;
  const bool rc = type_ == QpType::kRc;
  const auto n = static_cast<std::uint32_t>(pkt.payload.size());

  if (rc) {
    const int d = psn_cmp(psn, epsn_);
    if (d > 0) {
      ++counters_.out_of_sequence;
      if (!nak_sent_) {
        nak_sent_ = true;
        ++counters_.seq_naks_sent;
        respond(wire::syndrome::kNakPsnSeqErr, epsn_);
      }
      return;
    }
    if (d < 0) {
      ++counters_.duplicate_requests;
      if (info.kind == OpKind::kReadRequest) {
        // Re-execute: answer again from the duplicate's own RETH.
        const wire::Reth& reth = *pkt.hdr.reth;
        std::uint8_t* host = nullptr;
        if (reth.dma_len) {
          MrTable::Guard g(dev_.mrs());
          if (dev_.mrs().resolve(reth.rkey, pd_, reth.va, reth.dma_len, kAccessRemoteRead, &host,
                                 qpn_) != MrCheck::kOk) {
            return;
          }
        }
        RespResource& r = resources_[next_resource_];
        next_resource_ = (next_resource_ + 1) % resources_.size();
        r = RespResource{};
        r.kind = RespResource::Kind::kRead;
        r.first_psn = r.next_psn = psn;
        r.va = reth.va;
        r.rkey = reth.rkey;
        r.length = reth.dma_len;
        r.active = true;
        r.duplicate = true;
      } else if (info.kind == OpKind::kAtomic) {
        for (const RespResource& r : resources_) {
          if (r.kind == RespResource::Kind::kAtomic && r.first_psn == psn) {
            respond(wire::syndrome::kAckNoCredit, psn, true, r.orig);
            break;
          }
        }
      } else {
        respond(wire::syndrome::kAckNoCredit, psn_add(epsn_, kPsnMask));  // re-ACK through epsn - 1
      }
      return;
    }
    nak_sent_ = false;
  } else if (psn != epsn_) {
    // UC: a packet was lost. Drop the damaged message; keep the receive WQE.
    ++counters_.out_of_sequence;
    if (in_message_) {
      in_message_ = false;
      cur_offset_ = 0;
    }
    uc_drop_ = info.seg == Seg::kMiddle || info.seg == Seg::kLast;
    epsn_ = psn;
  }
  if (!rc && uc_drop_) {
    if (info.seg == Seg::kFirst || info.seg == Seg::kOnly) {
      uc_drop_ = false;
    } else {
      epsn_ = psn_add(psn, 1);
      return;
    }
  }

  const bool starts = info.seg == Seg::kFirst || info.seg == Seg::kOnly;
  const bool ends = info.seg == Seg::kLast || info.seg == Seg::kOnly;
  const bool is_send = info.kind == OpKind::kSend;
  if (info.kind == OpKind::kSend || info.kind == OpKind::kWrite) {
    if (starts == in_message_ || (!starts && cur_is_send_ != is_send)) {
      // FIRST inside a message, or MIDDLE/LAST outside one: an opcode sequence error.
      if (rc) {
        responder_error(wire::syndrome::kNakInvalidRequest, psn, WcStatus::kSuccess);
      } else {
        in_message_ = false;
        uc_drop_ = !starts;
        if (!starts) {
          epsn_ = psn_add(psn, 1);
          return;
        }
      }
      if (rc) return;
    }
    if (!ends && n != mtu_) {
      if (rc) {
        responder_error(wire::syndrome::kNakInvalidRequest, psn, WcStatus::kSuccess);
      } else {
        uc_drop_ = true;
        in_message_ = false;
        epsn_ = psn_add(psn, 1);
      }
      return;
    }
    if (ends && n > mtu_) {
      if (rc) responder_error(wire::syndrome::kNakInvalidRequest, psn, WcStatus::kSuccess);
      return;
    }
  }

  switch (info.kind) {
    case OpKind::kSend: {
      if (starts) {
        if (!take_recv_wqe()) {
          if (rc) {
            ++counters_.rnr_naks_sent;
            nak_sent_ = true;  // later packets of this burst are silently dropped
            respond(static_cast<std::uint8_t>(0x20 | (attr_.min_rnr_timer & 0x1F)), psn);
          } else {
            ++counters_.dropped_no_recv;
            uc_drop_ = !ends;
            epsn_ = psn_add(psn, 1);
          }
          return;
        }
        cur_offset_ = 0;
        cur_is_send_ = true;
        in_message_ = !ends;
      }
      if (cur_offset_ + n > cur_wqe_.total) {
        if (rc) {
          responder_error(wire::syndrome::kNakInvalidRequest, psn, WcStatus::kLocLenErr);
        } else {
          Wc wc;
          wc.wr_id = cur_wqe_.wr_id;
          wc.status = WcStatus::kLocLenErr;
          wc.opcode = WcOpcode::kRecv;
          wc.qp_num = qpn_;
          post_recv_completion(wc, false);
          have_wqe_ = false;
          in_message_ = false;
          uc_drop_ = !ends;
          epsn_ = psn_add(psn, 1);
        }
        return;
      }
      WcStatus err = WcStatus::kSuccess;
      if (n && !scatter(dev_.mrs(), pd_, cur_wqe_.sge, cur_offset_, pkt.payload.data(), n, err)) {
        if (rc) {
          responder_error(wire::syndrome::kNakRemoteOp, psn, WcStatus::kLocProtErr);
        } else {
          enter_error();
        }
        return;
      }
      cur_offset_ += n;
      if (ends) {
        Wc wc;
        wc.wr_id = cur_wqe_.wr_id;
        wc.opcode = WcOpcode::kRecv;
        wc.byte_len = static_cast<std::uint32_t>(cur_offset_);
        wc.qp_num = qpn_;
        wc.src_qp = attr_.dest_qp_num;
        if (pkt.hdr.imm) {
          wc.imm_data = *pkt.hdr.imm;
          wc.wc_flags |= kWcWithImm;
        }
        if (pkt.hdr.inv_rkey) {
          wc.invalidated_rkey = *pkt.hdr.inv_rkey;
          wc.wc_flags |= kWcWithInv;
          if (!dev_.mrs().invalidate(*pkt.hdr.inv_rkey, qpn_)) {
            responder_error(wire::syndrome::kNakInvalidRequest, psn, WcStatus::kSuccess);
            return;
          }
        }
        have_wqe_ = false;
        in_message_ = false;
        msn_ = (msn_ + 1) & 0xFFFFFF;
        post_recv_completion(wc, bth.se);
      }
      break;
    }
    case OpKind::kWrite: {
      if (starts) {
        const wire::Reth& reth = *pkt.hdr.reth;
        if (!(attr_.qp_access_flags & kAccessRemoteWrite)) {
          if (rc)
            responder_error(wire::syndrome::kNakInvalidRequest, psn, WcStatus::kSuccess);
          else
            uc_drop_ = !ends, epsn_ = psn_add(psn, 1);
          return;
        }
        std::uint8_t* host = nullptr;
        if (reth.dma_len) {
          MrTable::Guard g(dev_.mrs());
          const MrCheck c = dev_.mrs().resolve(reth.rkey, pd_, reth.va, reth.dma_len,
                                               kAccessRemoteWrite, &host, qpn_);
          if (c != MrCheck::kOk) {
            if (rc) {
              responder_error(nak_for(c), psn, WcStatus::kSuccess);
            } else {
              uc_drop_ = !ends;
              epsn_ = psn_add(psn, 1);
            }
            return;
          }
        }
        write_va_ = reth.va;
        write_rkey_ = reth.rkey;
        write_len_ = reth.dma_len;
        cur_offset_ = 0;
        cur_is_send_ = false;
        in_message_ = !ends;
      }
      if (cur_offset_ + n > write_len_ || (ends && cur_offset_ + n != write_len_)) {
        if (rc) {
          responder_error(wire::syndrome::kNakInvalidRequest, psn, WcStatus::kSuccess);
        } else {
          in_message_ = false;
          uc_drop_ = !ends;
          epsn_ = psn_add(psn, 1);
        }
        return;
      }
      if (ends && pkt.hdr.imm && !take_recv_wqe()) {
        if (rc) {
          ++counters_.rnr_naks_sent;
          nak_sent_ = true;
          respond(static_cast<std::uint8_t>(0x20 | (attr_.min_rnr_timer & 0x1F)), psn);
        } else {
          ++counters_.dropped_no_recv;
          in_message_ = false;
          epsn_ = psn_add(psn, 1);
        }
        return;
      }
      if (n) {
        MrTable::Guard g(dev_.mrs());
        std::uint8_t* host = nullptr;
        const MrCheck c = dev_.mrs().resolve(write_rkey_, pd_, write_va_ + cur_offset_, n,
                                             kAccessRemoteWrite, &host, qpn_);
        if (c != MrCheck::kOk) {
          if (rc)
            responder_error(nak_for(c), psn, WcStatus::kSuccess);
          else
            enter_error();
          return;
        }
        if (raw.placed) {
          ++counters_.placed_received;  // its sender wrote it already (direct placement)
        } else {
          std::memcpy(host, pkt.payload.data(), n);
        }
      }
      cur_offset_ += n;
      if (ends) {
        in_message_ = false;
        msn_ = (msn_ + 1) & 0xFFFFFF;
        if (pkt.hdr.imm) {
          Wc wc;
          wc.wr_id = cur_wqe_.wr_id;
          wc.opcode = WcOpcode::kRecvRdmaWithImm;
          wc.byte_len = static_cast<std::uint32_t>(write_len_);
          wc.qp_num = qpn_;
          wc.src_qp = attr_.dest_qp_num;
          wc.imm_data = *pkt.hdr.imm;
          wc.wc_flags = kWcWithImm;
          have_wqe_ = false;
          post_recv_completion(wc, bth.se);
        }
      }
      break;
    }
    case OpKind::kReadRequest: {
      const wire::Reth& reth = *pkt.hdr.reth;
      if (!(attr_.qp_access_flags & kAccessRemoteRead) || resources_.empty()) {
        responder_error(wire::syndrome::kNakInvalidRequest, psn, WcStatus::kSuccess);
        return;
      }
      if (reth.dma_len) {
        MrTable::Guard g(dev_.mrs());
        std::uint8_t* host = nullptr;
        const MrCheck c = dev_.mrs().resolve(reth.rkey, pd_, reth.va, reth.dma_len,
                                             kAccessRemoteRead, &host, qpn_);
        if (c != MrCheck::kOk) {
          responder_error(nak_for(c), psn, WcStatus::kSuccess);
          return;
        }
      }
      const std::uint32_t npkts =
          reth.dma_len == 0 ? 1 : static_cast<std::uint32_t>((reth.dma_len + mtu_ - 1) / mtu_);
      RespResource& r = resources_[next_resource_];
      next_resource_ = (next_resource_ + 1) % resources_.size();
      r = RespResource{};
      r.kind = RespResource::Kind::kRead;
      r.first_psn = r.next_psn = psn;
      r.last_psn = psn_add(psn, npkts - 1);
      r.va = reth.va;
      r.rkey = reth.rkey;
      r.length = reth.dma_len;
      r.active = true;
      msn_ = (msn_ + 1) & 0xFFFFFF;
      epsn_ = psn_add(psn, npkts);
      return;  // responses are built by run_send
    }
    case OpKind::kAtomic: {
      const wire::AtomicEth& a = *pkt.hdr.atomic_eth;
      if (!(attr_.qp_access_flags & kAccessRemoteAtomic) || resources_.empty() || (a.va & 7)) {
        responder_error(wire::syndrome::kNakInvalidRequest, psn, WcStatus::kSuccess);
        return;
      }
      std::uint64_t orig = 0;
      {
        MrTable::Guard g(dev_.mrs());
        std::uint8_t* host = nullptr;
        const MrCheck c =
            dev_.mrs().resolve(a.rkey, pd_, a.va, 8, kAccessRemoteAtomic, &host, qpn_);
        if (c != MrCheck::kOk) {
          responder_error(nak_for(c), psn, WcStatus::kSuccess);
          return;
        }
        std::atomic_ref<std::uint64_t> target(*reinterpret_cast<std::uint64_t*>(host));
        if (pkt.hdr.bth.opcode == wire::op::kRcCompareSwap) {
          orig = a.compare;
          target.compare_exchange_strong(orig, a.swap_add);
        } else {
          orig = target.fetch_add(a.swap_add);
        }
      }
      RespResource& r = resources_[next_resource_];
      next_resource_ = (next_resource_ + 1) % resources_.size();
      r = RespResource{};
      r.kind = RespResource::Kind::kAtomic;
      r.first_psn = r.last_psn = psn;
      r.orig = orig;
      msn_ = (msn_ + 1) & 0xFFFFFF;
      epsn_ = psn_add(psn, 1);
      respond(wire::syndrome::kAckNoCredit, psn, true, orig);
      return;
    }
    default:
      ++counters_.dropped_bad_opcode;
      return;
  }
  epsn_ = psn_add(psn, 1);
  if (rc && bth.ack_req) respond(wire::syndrome::kAckNoCredit, psn);
}

void Qp::respond(std::uint8_t syndrome, std::uint32_t psn, bool atomic, std::uint64_t orig) {
  // ACKs and NAKs are cumulative: a queued one is replaced by a newer one.
  if (!atomic && !responses_.empty() && !responses_.back().atomic) {
    responses_.back() = Response{syndrome, psn, false, 0};
    return;
  }
  responses_.push_back(Response{syndrome, psn, atomic, orig});
}

bool Qp::respond_in_order() {
  if (type_ != QpType::kRc || attr_.qp_state == QpState::kErr) {
    responses_.clear();
    return false;
  }
  int budget = 64;
  for (;;) {
    // The read whose responses come next: the active one with the lowest PSN.
    RespResource* oldest = nullptr;
    for (RespResource& r : resources_) {
      if (r.active && (!oldest || psn_cmp(r.first_psn, oldest->first_psn) < 0)) oldest = &r;
    }
    // Everything queued before that read goes first.
    while (!responses_.empty() &&
           (!oldest || psn_cmp(responses_.front().psn, oldest->first_psn) < 0)) {
      const Response r = responses_.front();
      responses_.pop_front();
      if (r.atomic) {
        send_atomic_ack(r.psn, r.orig);
      } else {
        send_ack(r.syndrome, r.psn);
      }
    }
    if (!oldest) return false;
    if (budget == 0) return true;
    if (!build_read_responses(*oldest, budget)) return false;  // the QP failed
  }
}

bool Qp::build_read_responses(RespResource& r, int& budget) {
  using namespace wire;
  while (r.active && budget > 0) {
    const std::uint64_t remaining = r.length - r.sent;
    const auto n = static_cast<std::uint32_t>(std::min<std::uint64_t>(mtu_, remaining));
    const bool first = r.sent == 0 && r.next_psn == r.first_psn;
    const bool last = r.sent + n == r.length;
    RoceHeaders h;
    h.bth.pkey = pkey();
    h.bth.dest_qp = attr_.dest_qp_num;
    h.bth.psn = r.next_psn;
    if (first && last)
      h.bth.opcode = op::kRcReadResponseOnly;
    else if (first)
      h.bth.opcode = op::kRcReadResponseFirst;
    else if (last)
      h.bth.opcode = op::kRcReadResponseLast;
    else
      h.bth.opcode = op::kRcReadResponseMiddle;
    if (first || last) h.aeth = Aeth{wire::syndrome::kAckNoCredit, msn_};
    netdev::Packet* p = dev_.tx_packet();
    auto hl = build_roce_header(MutBytes(p->data, p->cap), h, n);
    if (!hl) {
      r.active = false;
      return true;
    }
    if (n) {
      MrTable::Guard g(dev_.mrs());
      std::uint8_t* host = nullptr;
      if (dev_.mrs().resolve(r.rkey, pd_, r.va + r.sent, n, kAccessRemoteRead, &host, qpn_) !=
          MrCheck::kOk) {
        // The region went away under the read: remote access error, as hardware.
        r.active = false;
        responder_error(syndrome::kNakRemoteAccess, r.next_psn, WcStatus::kSuccess);
        return false;
      }
      std::memcpy(p->data + *hl, host, n);
    }
    const std::uint8_t pad = roce_pad(n);
    std::memset(p->data + *hl + n, 0, pad + kIcrcLen);
    p->len = static_cast<std::uint32_t>(*hl + n + pad + kIcrcLen);
    p->retrans = r.duplicate;
    send_to_peer(p);
    r.sent += n;
    r.next_psn = psn_add(r.next_psn, 1);
    --budget;
    if (last) r.active = false;
  }
  return true;
}

void Qp::ud_request(const wire::RocePacket& pkt, const netdev::Packet& raw) {
  const wire::Deth& deth = *pkt.hdr.deth;
  if (deth.qkey != attr_.qkey) {
    ++counters_.dropped_bad_qkey;
    return;
  }
  if (!take_recv_wqe()) {
    ++counters_.dropped_no_recv;
    return;
  }
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
