#include "lint/roce_flow.h"

#include <optional>
#include <string>
#include <vector>

#include "lint/flow.h"
#include "wire/roce_frame.h"

namespace softrdma::lint {

namespace {

using wire::OpKind;
using wire::Seg;

constexpr std::uint32_t kHalf = 0x800000;  // half the 24-bit PSN space
// Answered reads and atomics are forgotten this many PSNs after an answer passed them.
constexpr std::uint32_t kForget = 4096;
constexpr std::size_t kMaxOutstanding = 65536;

std::uint32_t psn_add(std::uint32_t a, std::uint32_t n) {
  return (a + n) & wire::kPsnMask;
}
std::uint32_t psn_diff(std::uint32_t a, std::uint32_t b) {
  return (a - b) & wire::kPsnMask;
}
// a comes after b (24-bit serial arithmetic).
bool ahead(std::uint32_t a, std::uint32_t b) {
  const std::uint32_t d = psn_diff(a, b);
  return d != 0 && d < kHalf;
}
bool behind(std::uint32_t a, std::uint32_t b) {
  return ahead(b, a);
}

std::string psn_str(std::uint32_t psn) {
  return "PSN " + hex(psn, 6);
}
std::string bytes_str(std::uint64_t n) {
  return std::to_string(n) + " bytes";
}
std::string frame_ref(std::uint64_t frame) {
  return "frame " + std::to_string(frame);
}

bool valid_mtu(std::size_t n) {
  return n == 256 || n == 512 || n == 1024 || n == 2048 || n == 4096;
}

// Response packets a read of `len` bytes takes at this path MTU (0: unknown yet).
std::uint32_t read_packets(std::uint32_t len, std::uint32_t mtu) {
  if (len == 0) return 1;
  if (mtu != 0) return static_cast<std::uint32_t>((std::uint64_t{len} + mtu - 1) / mtu);
  return len <= 256 ? 1 : 0;
}

RoceFlowChecker::Ip ip_of(const wire::FrameView& f, bool source) {
  RoceFlowChecker::Ip ip{};
  if (f.is_ipv6) return source ? f.ipv6.src : f.ipv6.dst;
  const std::uint32_t a = source ? f.ipv4.src : f.ipv4.dst;
  ip[10] = ip[11] = 0xFF;  // IPv4-mapped
  wire::store32(ip.data() + 12, a);
  return ip;
}

}  // namespace

struct RoceFlowChecker::Flow {
  enum class Msg : std::uint8_t { kUnknown, kIdle, kSend, kWrite };
  struct Read {
    std::uint32_t len = 0;
    std::uint64_t frame = 0;
    bool answered = false;  // kept a while, to recognise second copies of its responses
    bool reported = false;  // already named in a violation: kept to match late responses
    bool resent = false;    // a retransmission: the responder may answer it after later PSNs
  };
  struct Atomic {
    std::uint64_t frame = 0;
    bool answered = false;
    bool reported = false;
    bool resent = false;
  };

  wire::Transport transport = wire::Transport::kNone;
  bool bound = false;  // a response key maps to this flow

  // Request side.
  bool have_first = false;  // `first`: the earliest PSN the capture shows sent
  std::uint32_t first = 0;
  bool have_next = false;  // `next`: the PSN the next new request must carry
  std::uint32_t next = 0;
  bool replay = false;  // inside a go-back-N retransmission, expecting `replay_next`
  std::uint32_t replay_next = 0;
  Msg msg = Msg::kUnknown;
  std::uint64_t msg_frame = 0;
  bool write_len_known = false;
  std::uint64_t write_len = 0, write_got = 0;
  std::uint32_t mtu = 0;  // path MTU payload, inferred; 0 until known
  std::uint64_t mtu_frame = 0;
  std::map<std::uint32_t, Read> reads;      // outstanding, by request PSN
  std::map<std::uint32_t, Atomic> atomics;  // outstanding, by request PSN

  bool overflow = false;  // too many outstanding: some were forgotten

  // A jump forward in PSNs. Reported only if the missing PSN never shows up: on a
  // lossy wire the requester resends it (go-back-N), which is not a violation.
  struct Gap {
    std::uint64_t frame = 0;
    std::string where, expected, found;
    std::uint32_t missing = 0;
  };
  std::optional<Gap> gap;
  // Likewise a read response that skips PSNs: excused when the requester asks again for
  // the read from the first missing PSN (what a requester does when responses are lost).
  std::vector<Gap> resp_gaps;  // oldest first, at most kMaxPendingGaps
  // The last PSN-sequence-error NAK's PSN: a missing PSN that arrives after the
  // responder asked for it again is a resend, and the gap was a loss.
  bool have_seq_nak = false;
  std::uint32_t seq_nak = 0;

  // Response side.
  bool have_resp_high = false;  // `resp_high`: the latest PSN a read response began at
  std::uint32_t resp_high = 0;
  bool have_atomic_high = false;  // `atomic_high`: the latest PSN of an atomic acknowledge
  std::uint32_t atomic_high = 0;
  bool have_msn = false;
  std::uint32_t msn = 0, msn_psn = 0;
  std::uint64_t msn_frame = 0;
  bool in_resp = false;  // a multi-packet read response in progress
  std::uint32_t resp_start = 0, resp_next = 0, resp_packets = 0, resp_len = 0;
  std::uint64_t resp_bytes = 0, resp_frame = 0;
  bool resp_doubt = false;  // a packet of it was corrupted: its length cannot be judged

  // `psn` lies between the first PSN seen sent and the last one.
  bool sent(std::uint32_t psn) const {
    return have_first && have_next && psn_diff(psn, first) < psn_diff(next, first);
  }
  std::uint32_t last_sent() const { return psn_add(next, wire::kPsnMask); }
};

namespace {

// A response that will be discarded (bad ICRC): the read it belongs to is no longer judged,
// and a response in progress moves past its PSN.
void lost_response(RoceFlowChecker::Flow& f, const wire::RocePacket& pkt) {
  const std::uint32_t psn = pkt.hdr.bth.psn;
  if (pkt.info->kind != OpKind::kReadResponse) return;
  if (f.in_resp && psn == f.resp_next) {
    f.resp_next = psn_add(psn, 1);
    f.resp_doubt = true;
  } else if (pkt.info->seg == Seg::kFirst || pkt.info->seg == Seg::kOnly) {
    if (auto it = f.reads.find(psn); it != f.reads.end()) it->second.reported = true;
  }
}

// The response in progress ended: answered, or cut short and already reported.
void finish_read(RoceFlowChecker::Flow& f, bool reported) {
  auto it = f.reads.find(f.resp_start);
  if (it == f.reads.end()) return;
  if (reported) {
    it->second.reported = true;
  } else {
    it->second.answered = true;
  }
}

// A read response that skips PSNs waits: a requester that lost responses asks for
// the read again from the first missing PSN, and then it was a loss, not a violation.
// A pending gap not excused that way is reported when the next one comes, or at the end.
constexpr std::size_t kMaxPendingGaps = 64;

void defer_read_gap(Report& report, RoceFlowChecker::Flow& f, std::uint64_t frame,
                    const std::string& where, std::string expected, std::string found,
                    std::uint32_t missing) {
  if (f.resp_gaps.size() == kMaxPendingGaps) {
    const auto& g = f.resp_gaps.front();
    report.add(g.frame, g.where, "roce.read_response", g.expected, g.found);
    f.resp_gaps.erase(f.resp_gaps.begin());
  }
  f.resp_gaps.push_back(
      RoceFlowChecker::Flow::Gap{frame, where, std::move(expected), std::move(found), missing});
}

}  // namespace

RoceFlowChecker::RoceFlowChecker(Report& report) : report_(report) {}
RoceFlowChecker::~RoceFlowChecker() = default;

void RoceFlowChecker::finish() {
  for (auto& [key, f] : flows_) {
    if (f->gap) {
      report_.add(f->gap->frame, f->gap->where, "roce.psn_gap", f->gap->expected, f->gap->found);
      f->gap.reset();
    }
    for (const Flow::Gap& g : f->resp_gaps) {
      report_.add(g.frame, g.where, "roce.read_response", g.expected, g.found);
    }
    f->resp_gaps.clear();
  }
}

void RoceFlowChecker::on_packet(std::uint64_t frame_no, const wire::FrameView& frame,
                                const wire::RocePacket& pkt) {
  const wire::RoceOpcodeInfo& info = *pkt.info;
  const wire::Bth& bth = pkt.hdr.bth;
  const Key key{ip_of(frame, true), ip_of(frame, false), bth.dest_qp};
  // A packet whose ICRC fails is discarded by its receiver and its headers prove nothing. When
  // it carries the PSN its request flow expects, that PSN counts as taken (with the message
  // state unknown), so that the loss is reported once, as roce.icrc.
  auto icrc = wire::expected_icrc(frame);
  if (!icrc || *icrc != pkt.icrc) {
    if (!info.request) {
      auto r = responses_.find(key);
      if (r != responses_.end()) lost_response(*r->second, pkt);
      return;
    }
    auto it = flows_.find(key);
    if (it == flows_.end() || !it->second->have_next) return;
    Flow& f = *it->second;
    std::uint32_t consumed = 1;
    if (info.kind == OpKind::kReadRequest && pkt.hdr.reth)
      consumed = read_packets(pkt.hdr.reth->dma_len, f.mtu);
    if (f.replay ? bth.psn != f.replay_next : bth.psn != f.next) return;
    f.msg = Flow::Msg::kUnknown;
    if (info.kind == OpKind::kReadRequest && pkt.hdr.reth) {
      // Responses may still come (to a resend); they are matched but not judged.
      Flow::Read& r = f.reads[bth.psn];
      r = Flow::Read{pkt.hdr.reth->dma_len, frame_no};
      r.reported = true;
    }
    if (consumed == 0) {
      f.have_next = f.replay;
      f.replay = false;
    } else if (f.replay) {
      f.replay_next = psn_add(bth.psn, consumed);
      if (f.replay_next == f.next) f.replay = false;
    } else {
      f.next = psn_add(bth.psn, consumed);
    }
    return;
  }
  const std::string where = flow_string(frame) + " qp " + hex(bth.dest_qp, 6);
  if (info.request && info.transport != wire::Transport::kCnp) {
    const std::uint8_t ecn = (frame.is_ipv6 ? frame.ipv6.traffic_class : frame.ipv4.tos) & 3;
    const std::uint32_t src_qp =
        info.transport == wire::Transport::kUd && pkt.hdr.deth ? pkt.hdr.deth->src_qp : kAnyQp;
    ecn_in_use_ = ecn_in_use_ || ecn != 0;
    EcnSeen& e = ecn_[Key{std::get<0>(key), std::get<1>(key), src_qp}];
    e.capable = e.capable || ecn != 0;
    e.ce = e.ce || ecn == 3;
  }
  switch (info.transport) {
    case wire::Transport::kCnp:
      on_cnp(frame_no, where, key);
      return;
    case wire::Transport::kUd:
      if (pkt.hdr.deth) on_ud(frame_no, where, key, pkt);
      return;
    case wire::Transport::kRc:
    case wire::Transport::kUc:
      break;
    default:
      return;  // CNPs carry no flow state
  }
  if (info.request) {
    auto& slot = flows_[key];
    if (!slot) {
      slot = std::make_unique<Flow>();
      slot->transport = info.transport;
    }
    on_request(frame_no, where, *slot, pkt);
    return;
  }
  auto it = responses_.find(key);
  Flow* f = it != responses_.end() ? it->second : match_response(key, bth.psn);
  if (f) on_response(frame_no, where, *f, pkt);
}

void RoceFlowChecker::on_cnp(std::uint64_t frame_no, const std::string& where, const Key& key) {
  // A CNP from R to S's QP answers S's CE-marked packets to R: RC and UC ones (their QPN is not
  // on the wire: any flow of S to R) or UD ones from that QP. A capture taken at the sender shows
  // them before any switch marked them, ECN-capable; one that shows none of them (it may have
  // started later) proves nothing, and neither does a capture without ECN at all (CNPs from a
  // test generator, or a fabric whose ECN the capture does not show).
  if (!ecn_in_use_) return;
  // (Named copies, not a structured binding: clang 14 cannot capture one in the lambda.)
  const auto r = std::get<0>(key), s = std::get<1>(key);
  const auto qpn = std::get<2>(key);
  const EcnSeen none;
  auto seen = [&](std::uint32_t q) -> const EcnSeen* {
    auto it = ecn_.find(Key{s, r, q});
    return it == ecn_.end() ? nullptr : &it->second;
  };
  const EcnSeen* any = seen(kAnyQp);
  const EcnSeen* ud = seen(qpn);
  if (!any && !ud) return;
  const EcnSeen& a = any ? *any : none;
  const EcnSeen& u = ud ? *ud : none;
  if (a.capable || u.capable) return;
  report_.add(frame_no, where, "roce.cnp_target",
              "a CNP to a QP whose packets to the CNP's sender were ECN-capable (CE-marked)",
              "its packets were all Not-ECT");
}

RoceFlowChecker::Flow* RoceFlowChecker::match_response(const Key& resp_key, std::uint32_t psn) {
  std::vector<Flow*> all, plausible;
  for (auto& [k, f] : flows_) {
    if (std::get<0>(k) != std::get<1>(resp_key) || std::get<1>(k) != std::get<0>(resp_key))
      continue;
    if (f->transport != wire::Transport::kRc || f->bound) continue;
    all.push_back(f.get());
    if (f->sent(psn)) plausible.push_back(f.get());
  }
  Flow* f = nullptr;
  if (all.size() == 1) {
    f = all[0];
  } else if (plausible.size() == 1) {
    f = plausible[0];
  }
  if (f) {
    f->bound = true;
    responses_[resp_key] = f;
  }
  return f;
}

void RoceFlowChecker::on_request(std::uint64_t frame_no, const std::string& where, Flow& f,
                                 const wire::RocePacket& pkt) {
  const wire::RoceOpcodeInfo& info = *pkt.info;
  const std::uint32_t psn = pkt.hdr.bth.psn;
  const std::string name(info.name);
  const auto add = [&](Rule rule, std::string expected, std::string found) {
    report_.add(frame_no, where, rule, std::move(expected), std::move(found));
  };

  // PSNs this request takes: a read request one per response packet.
  std::uint32_t consumed = 1;
  if (info.kind == OpKind::kReadRequest && pkt.hdr.reth)
    consumed = read_packets(pkt.hdr.reth->dma_len, f.mtu);

  // The missing PSN arrived after the responder NAKed it: lost and resent, no violation.
  // (Arriving without a NAK it was reordered, and the gap stands.)
  if (f.gap && psn == f.gap->missing && f.have_seq_nak && f.seq_nak == psn) f.gap.reset();
  if (!f.resp_gaps.empty() && info.kind == OpKind::kReadRequest && pkt.hdr.reth) {
    // A read asked again covers missing responses: those were losses.
    const std::uint32_t n = read_packets(pkt.hdr.reth->dma_len, f.mtu);
    std::erase_if(f.resp_gaps, [&](const Flow::Gap& g) { return psn_diff(g.missing, psn) < n; });
  }

  // PSN continuity. A PSN behind the next new one is a retransmission (go-back-N on RC).
  bool retransmission = false;
  if (!f.have_next) {
    if (!f.have_first) {
      f.have_first = true;
      f.first = psn;
    }
  } else if (psn == (f.replay ? f.replay_next : f.next)) {
    retransmission = f.replay;
  } else if (f.replay && psn == f.next) {
    f.replay = false;  // the retransmission stopped early: the rest was acknowledged
    f.msg = Flow::Msg::kUnknown;
  } else if (behind(psn, f.next)) {
    retransmission = true;
    f.replay = true;
    f.msg = Flow::Msg::kUnknown;  // it may restart in the middle of a message
  } else {
    if (f.gap) {
      report_.add(f.gap->frame, f.gap->where, "roce.psn_gap", f.gap->expected, f.gap->found);
    }
    f.gap = Flow::Gap{frame_no, where, psn_str(f.next), psn_str(psn), f.next};
    f.replay = false;
    f.msg = Flow::Msg::kUnknown;  // packets are missing: the message state is lost
  }
  if (retransmission && f.in_resp) {
    // A responder may abandon a read response in progress when requests are resent: stop
    // judging that one.
    f.in_resp = false;
    finish_read(f, true);
  }
  if (retransmission) {
    if (consumed == 0) {
      f.replay = false;  // cannot follow it: the next packet behind `next` restarts it
    } else {
      f.replay_next = psn_add(psn, consumed);
      if (f.replay_next == f.next) f.replay = false;
    }
  } else if (consumed == 0) {
    f.have_next = false;  // the next request re-establishes the PSN
  } else {
    f.have_next = true;
    f.next = psn_add(psn, consumed);
    if (psn_diff(f.next, f.first) > kHalf / 2) f.first = psn_diff(f.next, kHalf / 2);
  }

  // Message sequencing: FIRST (MIDDLE)* LAST or ONLY, one message at a time.
  const bool in_msg = f.msg == Flow::Msg::kSend || f.msg == Flow::Msg::kWrite;
  const char* cur = f.msg == Flow::Msg::kSend ? "SEND" : "RDMA WRITE";
  const std::string in_progress =
      std::string("a MIDDLE or LAST packet of the ") + cur + " begun in " + frame_ref(f.msg_frame);
  const std::size_t plen = pkt.payload.size();
  const bool segmented = info.kind == OpKind::kSend || info.kind == OpKind::kWrite;
  if (!segmented) {
    if (in_msg) add("roce.sequence", in_progress, name);
    f.msg = Flow::Msg::kIdle;
  } else {
    const Flow::Msg kind = info.kind == OpKind::kSend ? Flow::Msg::kSend : Flow::Msg::kWrite;
    switch (info.seg) {
      case Seg::kFirst:
        if (in_msg) add("roce.sequence", in_progress, name);
        f.msg = kind;
        f.msg_frame = frame_no;
        f.write_len_known = pkt.hdr.reth.has_value();
        f.write_len = pkt.hdr.reth ? pkt.hdr.reth->dma_len : 0;
        f.write_got = plen;
        break;
      case Seg::kMiddle:
      case Seg::kLast:
        if (f.msg == Flow::Msg::kIdle) {
          add("roce.sequence", "a FIRST or ONLY packet to begin a message", name);
        } else if (in_msg && f.msg != kind) {
          add("roce.sequence", in_progress, name);  // counted into the message in progress
        }
        if (!in_msg) {
          f.msg = kind;
          f.msg_frame = frame_no;
          f.write_len_known = false;
        }
        f.write_got += plen;
        if (info.seg == Seg::kLast) {
          if (f.msg == Flow::Msg::kWrite && f.write_len_known && f.write_got != f.write_len) {
            add("roce.write_length",
                bytes_str(f.write_len) + " (RETH DMA length in " + frame_ref(f.msg_frame) + ")",
                bytes_str(f.write_got));
          }
          f.msg = Flow::Msg::kIdle;
        }
        break;
      case Seg::kOnly:
        if (in_msg) add("roce.sequence", in_progress, name);
        if (pkt.hdr.reth && plen != pkt.hdr.reth->dma_len) {
          add("roce.write_length", bytes_str(pkt.hdr.reth->dma_len) + " (RETH DMA length)",
              bytes_str(plen));
        }
        f.msg = Flow::Msg::kIdle;
        break;
      default:
        break;
    }

    // Segment sizes: FIRST and MIDDLE carry exactly the path MTU, LAST 1 to MTU, ONLY up to MTU.
    if (info.seg == Seg::kFirst || info.seg == Seg::kMiddle) {
      if (f.mtu == 0) {
        if (valid_mtu(plen)) {
          f.mtu = static_cast<std::uint32_t>(plen);
          f.mtu_frame = frame_no;
        } else {
          add("roce.segment_size", "a path MTU payload (256, 512, 1024, 2048 or 4096 bytes)",
              bytes_str(plen));
        }
      } else if (plen != f.mtu) {
        add("roce.segment_size",
            bytes_str(f.mtu) + " (the path MTU, from " + frame_ref(f.mtu_frame) + ")",
            bytes_str(plen));
      }
    } else if (info.seg == Seg::kLast && plen == 0) {
      add("roce.segment_size", "1 to path MTU bytes in a LAST packet", bytes_str(0));
    } else if (f.mtu != 0 && plen > f.mtu) {
      add("roce.segment_size",
          "at most " + bytes_str(f.mtu) + " (the path MTU, from " + frame_ref(f.mtu_frame) + ")",
          bytes_str(plen));
    } else if (f.mtu == 0 && plen > 4096) {
      add("roce.segment_size", "at most 4096 bytes (the largest path MTU)", bytes_str(plen));
    }
  }

  // Outstanding reads and atomics, answered by responses. ATOMIC WRITE and FLUSH (IBTA 1.5
  // A19) are answered as a read of no bytes is: one RDMA READ response ONLY, without payload.
  const bool empty_read = info.kind == OpKind::kAtomicWrite || info.kind == OpKind::kFlush;
  if ((info.kind == OpKind::kReadRequest || empty_read) && pkt.hdr.reth) {
    const std::uint32_t len = empty_read ? 0 : pkt.hdr.reth->dma_len;
    if (f.reads.size() > kMaxOutstanding) {
      f.reads.clear();  // lost track: responses without a read are no longer judged
      f.overflow = true;
    }
    auto [it, fresh] = f.reads.try_emplace(psn);
    // A resent read (or a second copy of one, or a resend of one the capture did not show)
    // may be answered after later PSNs: a responder may abandon responses when requests are
    // resent, so only reads sent once are held to PSN order.
    if (fresh || it->second.answered || it->second.len != len) {
      it->second = Flow::Read{len, frame_no};
    }
    it->second.resent |= retransmission;
  } else if (info.kind == OpKind::kAtomic) {
    if (f.atomics.size() > kMaxOutstanding) {
      f.atomics.clear();
      f.overflow = true;
    }
    auto [it, fresh] = f.atomics.try_emplace(psn);
    if (fresh || it->second.answered) it->second = Flow::Atomic{frame_no};
    it->second.resent |= retransmission;
  }
}

void RoceFlowChecker::on_response(std::uint64_t frame_no, const std::string& where, Flow& f,
                                  const wire::RocePacket& pkt) {
  const wire::RoceOpcodeInfo& info = *pkt.info;
  const std::uint32_t psn = pkt.hdr.bth.psn;
  const std::string name(info.name);
  const auto add = [&](Rule rule, std::string expected, std::string found) {
    report_.add(frame_no, where, rule, std::move(expected), std::move(found));
  };
  const std::optional<wire::Aeth>& aeth = pkt.hdr.aeth;
  const bool ack_syndrome = aeth && wire::aeth_kind(aeth->syndrome) == wire::AethKind::kAck;
  if (aeth && aeth->syndrome == wire::syndrome::kNakPsnSeqErr) {
    f.have_seq_nak = true;
    f.seq_nak = pkt.hdr.bth.psn;
  }

  // MSN never decreases, except in answers to duplicate requests (PSN behind an earlier answer).
  if (aeth) {
    const std::uint32_t msn = aeth->msn & 0xFFFFFF;
    if (!f.have_msn || !behind(psn, f.msn_psn)) {
      if (f.have_msn && behind(msn, f.msn)) {
        add("roce.msn", "MSN " + hex(f.msn, 6) + " or later (" + frame_ref(f.msn_frame) + ")",
            "MSN " + hex(msn, 6));
      } else {
        f.msn = msn;
        f.msn_frame = frame_no;
      }
      f.have_msn = true;
      f.msn_psn = psn;
    }
  }

  // Every request up to `done` has been answered or acknowledged: reads and atomics before
  // it must have had their own responses.
  std::optional<std::uint32_t> done;
  if (info.kind == OpKind::kAck && aeth) {
    done = ack_syndrome ? psn : psn_add(psn, wire::kPsnMask);
  } else if (info.kind == OpKind::kAtomicAck ||
             (info.kind == OpKind::kReadResponse &&
              (info.seg == Seg::kFirst || info.seg == Seg::kOnly))) {
    done = psn_add(psn, wire::kPsnMask);
  }
  if (done) {
    // One violation per answer that passes unanswered reads or atomics, naming the first; they
    // stay outstanding (marked) so that responses arriving late still match them.
    const auto covered = [&](std::uint32_t p) { return !ahead(p, *done); };
    const auto passed = [&](std::uint32_t start, std::uint32_t end) {
      return psn_diff(*done, start) < kHalf && covered(end);
    };
    if (f.in_resp && covered(psn_add(f.resp_start, f.resp_packets - 1))) {
      defer_read_gap(report_, f, frame_no, where,
                     std::to_string(f.resp_packets) + " response packets for the read at " +
                         psn_str(f.resp_start),
                     name + " for " + psn_str(psn) + " after " +
                         std::to_string(psn_diff(f.resp_next, f.resp_start)),
                     f.resp_next);
      f.in_resp = false;
      if (auto it = f.reads.find(f.resp_start); it != f.reads.end()) it->second.reported = true;
    }
    // Requests in `pending` (PSN -> request) whose last packet `done` passed and that had no
    // answer: one `rule` violation naming the first of them.
    const auto sweep = [&](auto& pending, auto last_psn, Rule rule, const char* first,
                           const char* later) {
      std::uint32_t missed = 0;
      std::string first_missed;
      for (auto it = pending.begin(); it != pending.end();) {
        const std::uint32_t end = last_psn(*it);
        if (!passed(it->first, end)) {
          ++it;
        } else if (it->second.answered || it->second.reported || it->second.resent) {
          // Long since passed: forget it.
          it = psn_diff(*done, end) > kForget ? pending.erase(it) : std::next(it);
        } else {
          if (missed++ == 0)
            first_missed = psn_str(it->first) + " (" + frame_ref(it->second.frame) + ")";
          it->second.reported = true;
          ++it;
        }
      }
      if (missed > 0) {
        add(rule,
            first + first_missed +
                (missed > 1 ? " and " + std::to_string(missed - 1) + later : std::string()),
            name + " for " + psn_str(psn) + " first");
      }
    };
    sweep(
        f.reads,
        [&](const auto& r) {
          const std::uint32_t n = std::max<std::uint32_t>(1, read_packets(r.second.len, f.mtu));
          return psn_add(r.first, n - 1);
        },
        "roce.read_response", "a response to the read at ", " later reads");
    sweep(
        f.atomics, [](const auto& a) { return a.first; }, "roce.atomic_ack",
        "an atomic acknowledge for ", " later atomics");
  }

  switch (info.kind) {
    case OpKind::kAck:
      if (f.have_next && ahead(psn, f.last_sent())) {
        add("roce.ack_psn", "a PSN already sent (up to " + psn_str(f.last_sent()) + ")",
            psn_str(psn));
      }
      break;
    case OpKind::kAtomicAck: {
      if (aeth && !ack_syndrome) add("roce.atomic_ack", "an ACK syndrome", hex(aeth->syndrome, 2));
      auto it = f.atomics.find(psn);
      if (!f.have_atomic_high || ahead(psn, f.atomic_high)) {
        f.have_atomic_high = true;
        f.atomic_high = psn;
      }
      if (it != f.atomics.end()) {
        it->second.answered = true;
      } else if (f.sent(psn) && !f.overflow && !behind(psn, f.atomic_high)) {
        add("roce.atomic_ack", "an outstanding atomic request at " + psn_str(psn),
            "none outstanding");
      }
      break;
    }
    case OpKind::kReadResponse: {
      if (aeth && !ack_syndrome) {
        add("roce.read_response", "an ACK syndrome in the AETH", hex(aeth->syndrome, 2));
      }
      const std::size_t plen = pkt.payload.size();
      if (info.seg == Seg::kFirst || info.seg == Seg::kOnly) {
        // A second copy of a response (a merged trace holds both ends' records of each
        // packet), or of an older read's: not a new response.
        if (f.in_resp && !ahead(psn, f.resp_start)) break;
        auto it = f.reads.find(psn);
        if (it != f.reads.end() && it->second.answered) break;
        const bool newest = !f.have_resp_high || ahead(psn, f.resp_high);
        if (it == f.reads.end() && !newest) break;  // a late copy of a forgotten response
        if (newest) {
          f.have_resp_high = true;
          f.resp_high = psn;
        }
        f.in_resp = false;
        if (it == f.reads.end()) {
          if (f.sent(psn) && !f.overflow) {
            add("roce.read_response", "an outstanding read request at " + psn_str(psn),
                "none outstanding");
          }
          break;
        }
        if (it->second.reported) {  // no longer judged: take it as answered
          it->second.answered = true;
          break;
        }
        const std::uint32_t len = it->second.len;
        if (info.seg == Seg::kFirst && f.mtu == 0 && valid_mtu(plen)) {
          f.mtu = static_cast<std::uint32_t>(plen);
          f.mtu_frame = frame_no;
        }
        const std::uint32_t n = read_packets(len, f.mtu);
        if (info.seg == Seg::kOnly) {
          if (n > 1) {
            add("roce.read_response",
                std::to_string(n) + " response packets for " + bytes_str(len) + " at path MTU " +
                    std::to_string(f.mtu),
                name);
          } else if (plen != len) {
            add("roce.read_response", bytes_str(len) + " (the read's DMA length)", bytes_str(plen));
          }
          it->second.answered = true;
          break;
        }
        if (n == 1) {
          add("roce.read_response", "an ONLY response for " + bytes_str(len), name);
          it->second.answered = true;
          break;
        }
        if (f.mtu != 0 && plen != f.mtu) {
          add("roce.segment_size",
              bytes_str(f.mtu) + " (the path MTU, from " + frame_ref(f.mtu_frame) + ")",
              bytes_str(plen));
        }
        if (n == 0) break;  // the MTU is still unknown: the shape cannot be judged
        f.in_resp = true;
        f.resp_start = psn;
        f.resp_next = psn_add(psn, 1);
        f.resp_packets = n;
        f.resp_len = len;
        f.resp_bytes = plen;
        f.resp_frame = frame_no;
        f.resp_doubt = false;
        break;
      }
      // MIDDLE or LAST.
      if (!f.in_resp) {
        for (auto it = f.reads.begin(); it != f.reads.end(); ++it) {
          const std::uint32_t start = it->first;
          const std::uint32_t n = read_packets(it->second.len, f.mtu);
          if (n > 1 && ahead(psn, start) && psn_diff(psn, start) < n) {
            if (!it->second.reported && !it->second.answered) {
              defer_read_gap(report_, f, frame_no, where,
                             "RDMA READ response FIRST at " + psn_str(start) + " (read in " +
                                 frame_ref(it->second.frame) + ")",
                             name + " at " + psn_str(psn), start);
              it->second.reported = true;
            }
            break;
          }
        }
        break;
      }
      if (psn != f.resp_next) {
        if (ahead(psn, f.resp_next)) {
          defer_read_gap(report_, f, frame_no, where,
                         psn_str(f.resp_next) + " next in the response to the read at " +
                             psn_str(f.resp_start),
                         psn_str(psn), f.resp_next);
          f.in_resp = false;
          finish_read(f, true);
        }
        break;  // behind: a duplicate
      }
      const std::uint32_t index = psn_diff(psn, f.resp_start);
      const bool last_slot = index + 1 == f.resp_packets;
      f.resp_bytes += plen;
      f.resp_next = psn_add(psn, 1);
      if (info.seg == Seg::kMiddle) {
        if (last_slot) {
          add("roce.read_response",
              "a LAST packet as packet " + std::to_string(f.resp_packets) + " of " +
                  std::to_string(f.resp_packets) + " (" + bytes_str(f.resp_len) + ")",
              name);
          f.in_resp = false;
          finish_read(f, true);
        } else if (plen != f.mtu) {
          add("roce.segment_size",
              bytes_str(f.mtu) + " (the path MTU, from " + frame_ref(f.mtu_frame) + ")",
              bytes_str(plen));
        }
        break;
      }
      if (!last_slot) {
        add("roce.read_response",
            std::to_string(f.resp_packets) + " response packets for " + bytes_str(f.resp_len),
            "LAST as packet " + std::to_string(index + 1));
      } else if (!f.resp_doubt && f.resp_bytes != f.resp_len) {
        add("roce.read_response", bytes_str(f.resp_len) + " (the read's DMA length)",
            bytes_str(f.resp_bytes));
      }
      f.in_resp = false;
      finish_read(f, false);
      break;
    }
    default:
      break;
  }
}

void RoceFlowChecker::on_ud(std::uint64_t frame_no, const std::string& where, const Key& dest,
                            const wire::RocePacket& pkt) {
  // Q_Keys: the GSI QP (QP1) takes 0x80010000; any other destination QP has one Q_Key at a
  // time, so a return to a Q_Key it already replaced means some packets carry a wrong one.
  constexpr std::uint32_t kGsiQkey = 0x80010000;
  const std::uint32_t qkey = pkt.hdr.deth->qkey;
  const std::uint32_t qpn = std::get<2>(dest);
  if (qpn == 1) {
    if (qkey != kGsiQkey) report_.add(frame_no, where, "roce.qkey", hex(kGsiQkey, 8), hex(qkey, 8));
    return;
  }
  auto [it, fresh] = qkeys_.try_emplace({std::get<1>(dest), qpn});
  QkeyState& s = it->second;
  if (fresh || s.current == qkey) {
    s.current = qkey;
    s.frame = frame_no;
    return;
  }
  auto old = s.retired.find(qkey);
  if (old != s.retired.end()) {
    report_.add(frame_no, where, "roce.qkey",
                hex(s.current, 8) + " (replaced " + hex(qkey, 8) + " after " +
                    frame_ref(old->second) + ", in use up to " + frame_ref(s.frame) + ")",
                hex(qkey, 8));
    s.retired.erase(old);  // one report per switch back
  }
  s.retired[s.current] = s.frame;
  s.current = qkey;
  s.frame = frame_no;
}

}  // namespace softrdma::lint
