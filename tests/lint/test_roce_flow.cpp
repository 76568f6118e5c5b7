// Flow-level RoCEv2 lint rules: a clean RC conversation gives no violation, and removing,
// reordering or altering one packet of it gives the right rule at the right frame.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "lint/lint.h"
#include "pcap/writer.h"
#include "wire/roce_frame.h"

using namespace softrdma;
using namespace softrdma::wire;

namespace {

constexpr std::uint32_t kHostA = 0x0A000001, kHostB = 0x0A000002;  // requester, responder
constexpr std::uint32_t kQpA = 0x000011, kQpB = 0x000022;
constexpr std::uint32_t kMtu = 256;

struct Pkt {
  std::string tag;  // names the packet for the mutations below
  bool from_a = true;
  RoceHeaders h;
  std::size_t payload = 0;
  bool corrupt = false;  // flip a bit of the ICRC
  std::uint8_t tos = 0;  // IPv4 TOS: DSCP << 2 | ECN
};

using Found = std::vector<std::pair<std::uint64_t, std::string>>;  // (frame, rule)

class Conversation {
 public:
  explicit Conversation(std::uint32_t psn) : psn_(psn & kPsnMask) {}

  std::uint32_t psn() const { return psn_; }
  void set_psn(std::uint32_t psn) { psn_ = psn & kPsnMask; }

  // A request from A to B's QP; takes `psns` PSNs (reads take one per response packet).
  Pkt& request(const std::string& tag, std::uint8_t opcode, std::size_t payload,
               std::uint32_t psns = 1) {
    Pkt p{tag, true, {}, payload};
    p.h.bth.opcode = opcode;
    p.h.bth.dest_qp = kQpB;
    p.h.bth.psn = psn_;
    const RoceOpcodeInfo& info = roce_opcode_info(opcode);
    if (info.headers & kReth) p.h.reth = Reth{0x10000, 0x1234, static_cast<std::uint32_t>(payload)};
    if (info.headers & kFeth) p.h.feth = Feth{flush::kGlobal, flush::kRange, 0};
    if (info.headers & kAtomicEth) p.h.atomic_eth = AtomicEth{0x20008, 0x1234, 1, 0};
    if (info.headers & kImmDt) p.h.imm = 7;
    if (info.headers & kIeth) p.h.inv_rkey = 9;
    if (info.seg == Seg::kLast || info.seg == Seg::kOnly) p.h.bth.ack_req = true;
    psn_ = (psn_ + psns) & kPsnMask;
    pkts.push_back(p);
    return pkts.back();
  }
  // A response from B to A's QP at `psn`.
  Pkt& response(const std::string& tag, std::uint8_t opcode, std::uint32_t psn, std::size_t payload,
                std::uint8_t syndrome = 0x1F) {
    Pkt p{tag, false, {}, payload};
    p.h.bth.opcode = opcode;
    p.h.bth.dest_qp = kQpA;
    p.h.bth.psn = psn & kPsnMask;
    const RoceOpcodeInfo& info = roce_opcode_info(opcode);
    if (info.headers & kAeth) p.h.aeth = Aeth{syndrome, msn};
    if (info.headers & kAtomicAckEth) p.h.atomic_ack_eth = AtomicAckEth{42};
    pkts.push_back(p);
    return pkts.back();
  }

  std::uint32_t msn = 0;
  std::vector<Pkt> pkts;

 private:
  std::uint32_t psn_;
};

std::vector<Pkt>::iterator at_tag(std::vector<Pkt>& pkts, const std::string& tag) {
  auto it = std::find_if(pkts.begin(), pkts.end(), [&](const Pkt& p) { return p.tag == tag; });
  EXPECT_NE(it, pkts.end()) << tag;
  return it;
}
std::uint64_t frame_of(std::vector<Pkt>& pkts, const std::string& tag) {
  return static_cast<std::uint64_t>(at_tag(pkts, tag) - pkts.begin()) + 1;
}

Found lint_packets(const std::vector<Pkt>& pkts, const std::string& name) {
  const std::string path = testing::TempDir() + "roce_flow_" + name + ".pcap";
  std::string error;
  {
    auto w = pcap::Writer::open(path, 1, error);
    EXPECT_TRUE(w) << error;
    if (!w) return {};
    std::vector<std::uint8_t> buf(8192), payload(8192);
    for (std::size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<std::uint8_t>(i * 7);
    std::int64_t t = 0;
    for (const Pkt& p : pkts) {
      RoceAddr a;
      a.src4 = p.from_a ? kHostA : kHostB;
      a.dst4 = p.from_a ? kHostB : kHostA;
      a.src_port = roce_src_port(p.from_a ? kQpA : kQpB);
      a.traffic_class = p.tos;
      a.eth = Ethernet{{0x02, 0, 0, 0, 0, 2}, {0x02, 0, 0, 0, 0, 1}, std::nullopt, 0};
      auto len = build_roce_frame(buf, a, p.h, Bytes(payload).first(p.payload));
      EXPECT_TRUE(len) << p.tag;
      if (!len) return {};
      if (p.corrupt) buf[*len - 1] ^= 0x01;
      w->write(1'700'000'000, ++t * 1000, Bytes(buf).first(*len));
    }
  }
  lint::Report report;
  EXPECT_GE(lint::run(path, lint::Options{}, report, error), 0) << error;
  Found found;
  for (const auto& v : report.violations()) {
    found.emplace_back(v.frame, v.rule);
    std::printf("  frame %llu %s: expected %s, found %s\n",
                static_cast<unsigned long long>(v.frame), v.rule.c_str(), v.expected.c_str(),
                v.found.c_str());
  }
  return found;
}

// A requester at A and a responder at B on one RC QP pair, path MTU 256, PSNs wrapping past
// 0xFFFFFF: multi-packet SENDs and WRITEs, READs with one- and three-packet responses,
// atomics, coalesced ACKs, a NAK with a go-back-N resend and a read resent after a timeout.
std::vector<Pkt> clean_rc() {
  Conversation c(0xFFFFF8);
  using namespace op;
  const std::uint32_t s0 = c.psn();
  c.request("send1.first", kRcSendFirst, kMtu);
  c.request("send1.middle", kRcSendMiddle, kMtu);
  c.request("send1.last", kRcSendLast, 100);
  c.msn = 1;
  c.response("ack1", kRcAck, s0 + 2, 0);

  Pkt& wf = c.request("write.first", kRcWriteFirst, kMtu);
  wf.h.reth->dma_len = 600;
  c.request("write.middle", kRcWriteMiddle, kMtu);
  c.request("write.last", kRcWriteLast, 88);
  c.request("write.only", kRcWriteOnly, 50);
  c.msn = 3;
  c.response("ack2", kRcAck, s0 + 6, 0);

  const std::uint32_t r1 = c.psn();
  Pkt& rd = c.request("read1", kRcReadRequest, 0, 3);
  rd.h.reth->dma_len = 700;
  const std::uint32_t r2 = c.psn();
  Pkt& rd2 = c.request("read2", kRcReadRequest, 0, 1);
  rd2.h.reth->dma_len = 100;
  c.msn = 4;
  c.response("read1.first", kRcReadResponseFirst, r1, kMtu);
  c.response("read1.middle", kRcReadResponseMiddle, r1 + 1, kMtu);
  c.response("read1.last", kRcReadResponseLast, r1 + 2, 188);
  c.msn = 5;
  c.response("read2.only", kRcReadResponseOnly, r2, 100);

  const std::uint32_t a1 = c.psn();
  c.request("cmp_swap", kRcCompareSwap, 0);
  const std::uint32_t a2 = c.psn();
  c.request("fetch_add", kRcFetchAdd, 0);
  c.msn = 6;
  c.response("atomic_ack1", kRcAtomicAck, a1, 0);
  c.msn = 7;
  c.response("atomic_ack2", kRcAtomicAck, a2, 0);

  // B misses send2.middle and NAKs it; A goes back to it and resends everything after it.
  const std::uint32_t g = c.psn();
  c.request("send2.first", kRcSendFirst, kMtu);
  c.request("send2.middle", kRcSendMiddle, kMtu);
  c.request("send2.last", kRcSendLastImm, 3);
  c.request("write2.only", kRcWriteOnlyImm, 8);
  c.response("nak", kRcAck, g + 1, 0, syndrome::kNakPsnSeqErr);
  c.set_psn(g + 1);
  c.request("resend.middle", kRcSendMiddle, kMtu);
  c.request("resend.last", kRcSendLastImm, 3);
  c.request("resend.write", kRcWriteOnlyImm, 8);
  c.msn = 9;
  c.response("ack3", kRcAck, g + 3, 0);

  // A read whose responses are lost: resent after a timeout with the same PSN.
  const std::uint32_t r3 = c.psn();
  Pkt& rd3 = c.request("read3", kRcReadRequest, 0, 2);
  rd3.h.reth->dma_len = 300;
  c.set_psn(r3);
  Pkt& rd3b = c.request("read3.resent", kRcReadRequest, 0, 2);
  rd3b.h.reth->dma_len = 300;
  c.msn = 10;
  c.response("read3.first", kRcReadResponseFirst, r3, kMtu);
  c.response("read3.last", kRcReadResponseLast, r3 + 1, 44);
  c.request("send3.only", kRcSendOnly, 0);
  c.request("send4.only", kRcSendOnlyInv, 256);
  c.msn = 12;
  c.response("ack4", kRcAck, r3 + 3, 0);
  // A duplicate ACK keeps the MSN.
  c.response("ack4.dup", kRcAck, r3 + 3, 0);
  return c.pkts;
}

Found lint_mutated(const std::string& name, void (*mutate)(std::vector<Pkt>&), std::uint64_t* frame,
                   const std::string& at) {
  auto pkts = clean_rc();
  mutate(pkts);
  *frame = frame_of(pkts, at);
  return lint_packets(pkts, name);
}

}  // namespace

TEST(RoceFlow, CleanRcConversationHasNoViolation) {
  EXPECT_EQ(lint_packets(clean_rc(), "clean"), Found{});
}

TEST(RoceFlow, RemovedMiddlePacketIsAPsnGap) {
  std::uint64_t frame = 0;
  auto found = lint_mutated(
      "removed_middle", [](auto& p) { p.erase(at_tag(p, "send1.middle")); }, &frame, "send1.last");
  EXPECT_EQ(found, (Found{{frame, "roce.psn_gap"}}));
}

TEST(RoceFlow, RemovedReadResponseMiddle) {
  std::uint64_t frame = 0;
  auto found = lint_mutated(
      "removed_read_middle", [](auto& p) { p.erase(at_tag(p, "read1.middle")); }, &frame,
      "read1.last");
  EXPECT_EQ(found, (Found{{frame, "roce.read_response"}}));
}

TEST(RoceFlow, RemovedReadResponseOnlyIsFoundAtTheNextResponse) {
  std::uint64_t frame = 0;
  auto found = lint_mutated(
      "removed_read_only", [](auto& p) { p.erase(at_tag(p, "read2.only")); }, &frame,
      "atomic_ack1");
  EXPECT_EQ(found, (Found{{frame, "roce.read_response"}}));
}

TEST(RoceFlow, RemovedReadResponseFirst) {
  std::uint64_t frame = 0;
  auto found = lint_mutated(
      "removed_read_first", [](auto& p) { p.erase(at_tag(p, "read1.first")); }, &frame,
      "read1.middle");
  EXPECT_EQ(found, (Found{{frame, "roce.read_response"}}));
}

TEST(RoceFlow, RemovedAtomicAck) {
  std::uint64_t frame = 0;
  auto found = lint_mutated(
      "removed_atomic_ack", [](auto& p) { p.erase(at_tag(p, "atomic_ack1")); }, &frame,
      "atomic_ack2");
  EXPECT_EQ(found, (Found{{frame, "roce.atomic_ack"}}));
}

TEST(RoceFlow, AckBeforeTheRequestItAcknowledges) {
  std::uint64_t frame = 0;
  auto found = lint_mutated(
      "reordered_ack", [](auto& p) { std::iter_swap(at_tag(p, "send1.last"), at_tag(p, "ack1")); },
      &frame, "ack1");
  EXPECT_EQ(found, (Found{{frame, "roce.ack_psn"}}));
}

TEST(RoceFlow, ReorderedRequestsAreAGapThenARetransmission) {
  std::uint64_t frame = 0;
  auto found = lint_mutated(
      "reordered_write",
      [](auto& p) { std::iter_swap(at_tag(p, "write.middle"), at_tag(p, "write.last")); }, &frame,
      "write.last");
  EXPECT_EQ(found, (Found{{frame, "roce.psn_gap"}}));
}

TEST(RoceFlow, ReorderedReadResponses) {
  std::uint64_t frame = 0;
  auto found = lint_mutated(
      "reordered_read",
      [](auto& p) { std::iter_swap(at_tag(p, "read1.middle"), at_tag(p, "read1.last")); }, &frame,
      "read1.last");
  EXPECT_EQ(found, (Found{{frame, "roce.read_response"}}));
}

TEST(RoceFlow, WrongRethLength) {
  std::uint64_t frame = 0;
  auto found = lint_mutated(
      "reth_length", [](auto& p) { at_tag(p, "write.first")->h.reth->dma_len = 700; }, &frame,
      "write.last");
  EXPECT_EQ(found, (Found{{frame, "roce.write_length"}}));
}

TEST(RoceFlow, WriteOnlyLengthMismatch) {
  std::uint64_t frame = 0;
  auto found = lint_mutated(
      "write_only_length", [](auto& p) { at_tag(p, "write.only")->h.reth->dma_len = 51; }, &frame,
      "write.only");
  EXPECT_EQ(found, (Found{{frame, "roce.write_length"}}));
}

TEST(RoceFlow, MiddleWithoutFirst) {
  std::uint64_t frame = 0;
  auto found = lint_mutated(
      "middle_without_first",
      [](auto& p) {
        auto it = at_tag(p, "write.first");
        it->h.bth.opcode = op::kRcWriteMiddle;
        it->h.reth.reset();
      },
      &frame, "write.first");
  EXPECT_EQ(found, (Found{{frame, "roce.sequence"}}));
}

TEST(RoceFlow, SendOpcodeInsideAWrite) {
  std::uint64_t frame = 0;
  auto found = lint_mutated(
      "send_in_write", [](auto& p) { at_tag(p, "write.middle")->h.bth.opcode = op::kRcSendMiddle; },
      &frame, "write.middle");
  EXPECT_EQ(found, (Found{{frame, "roce.sequence"}}));
}

TEST(RoceFlow, FirstInsideAMessage) {
  std::uint64_t frame = 0;
  auto found = lint_mutated(
      "first_in_message",
      [](auto& p) { at_tag(p, "send1.middle")->h.bth.opcode = op::kRcSendFirst; }, &frame,
      "send1.middle");
  EXPECT_EQ(found, (Found{{frame, "roce.sequence"}}));
}

TEST(RoceFlow, MiddleShorterThanTheMtu) {
  std::uint64_t frame = 0;
  auto found = lint_mutated(
      "short_middle",
      [](auto& p) {
        at_tag(p, "write.middle")->payload = 200;
        at_tag(p, "write.last")->payload = 144;
      },
      &frame, "write.middle");
  EXPECT_EQ(found, (Found{{frame, "roce.segment_size"}}));
}

TEST(RoceFlow, MsnGoingBack) {
  std::uint64_t frame = 0;
  auto found = lint_mutated(
      "msn_back", [](auto& p) { at_tag(p, "ack2")->h.aeth->msn = 0; }, &frame, "ack2");
  EXPECT_EQ(found, (Found{{frame, "roce.msn"}}));
}

TEST(RoceFlow, AtomicAckWithoutAnAtomic) {
  // The atomic ACK moved to a SEND's PSN: it answers no atomic, and the compare-and-swap
  // it belonged to is left unanswered when the next atomic is acknowledged.
  std::uint64_t frame = 0;
  auto found = lint_mutated(
      "stray_atomic_ack",
      [](auto& p) { at_tag(p, "atomic_ack1")->h.bth.psn = at_tag(p, "ack2")->h.bth.psn; }, &frame,
      "atomic_ack1");
  EXPECT_EQ(found, (Found{{frame, "roce.atomic_ack"}, {frame + 1, "roce.atomic_ack"}}));
}

TEST(RoceFlow, ReadResponseTooLong) {
  std::uint64_t frame = 0;
  auto found = lint_mutated(
      "long_read_only", [](auto& p) { at_tag(p, "read2.only")->payload = 104; }, &frame,
      "read2.only");
  EXPECT_EQ(found, (Found{{frame, "roce.read_response"}}));
}

TEST(RoceFlow, CaptureStartingMidMessageIsClean) {
  auto pkts = clean_rc();
  pkts.erase(pkts.begin(), pkts.begin() + 1);  // starts at send1.middle
  EXPECT_EQ(lint_packets(pkts, "mid_start"), Found{});
  pkts = clean_rc();
  pkts.erase(pkts.begin(), at_tag(pkts, "read1.middle"));  // starts inside a read response
  EXPECT_EQ(lint_packets(pkts, "mid_read"), Found{});
}

TEST(RoceFlow, UcFlowGap) {
  Conversation c(5);
  c.request("f", 0x20 + op::kRcSendFirst, kMtu).h.bth.dest_qp = 0x33;
  c.request("m", 0x20 + op::kRcSendMiddle, kMtu).h.bth.dest_qp = 0x33;
  c.request("l", 0x20 + op::kRcSendLast, 1).h.bth.dest_qp = 0x33;
  c.request("w", 0x20 + op::kRcWriteOnly, 4).h.bth.dest_qp = 0x33;
  EXPECT_EQ(lint_packets(c.pkts, "uc_clean"), Found{});
  c.pkts.erase(c.pkts.begin() + 2);
  EXPECT_EQ(lint_packets(c.pkts, "uc_gap"), (Found{{3, "roce.psn_gap"}}));
}

TEST(RoceFlow, UdQkeys) {
  Conversation c(1);
  const auto ud = [&](const std::string& tag, std::uint32_t qkey, std::uint32_t qpn) {
    Pkt& p = c.request(tag, op::kUdSendOnly, 16);
    p.h.bth.dest_qp = qpn;
    p.h.deth = Deth{qkey, 0, kQpA};
  };
  ud("a", 0x1111, 0x40);
  ud("b", 0x1111, 0x40);
  ud("c", 0x2222, 0x41);  // another QP, another Q_Key
  ud("d", 0x3333, 0x40);  // the QP's Q_Key changed once: accepted
  ud("e", 0x80010000, 1);
  Pkt& cnp = c.request("cnp", op::kCnp, 0);
  cnp.h.bth.dest_qp = kQpA;
  EXPECT_EQ(lint_packets(c.pkts, "ud_clean"), Found{});
  ud("f", 0x1111, 0x40);  // back to the replaced Q_Key
  ud("g", 0x1234, 1);     // QP1 takes only the GSI Q_Key
  EXPECT_EQ(lint_packets(c.pkts, "ud_bad"), (Found{{7, "roce.qkey"}, {8, "roce.qkey"}}));
}

TEST(RoceFlow, MergedTraceWithBothEndsRecordsIsClean) {
  // A merged trace holds every packet twice: as sent by one device and, a little later, as
  // received by the other — before anything the receiver sends in reply. Every delay gives
  // the same verdict as the single copy.
  for (std::size_t delay : {1u, 2u, 3u, 5u, 8u}) {
    const auto pkts = clean_rc();
    std::vector<Pkt> merged;
    std::vector<std::size_t> in_flight;  // sent, not yet recorded as received
    for (std::size_t i = 0; i <= pkts.size(); ++i) {
      // Deliver what is due, and everything before a packet from the other end.
      while (!in_flight.empty() && (i == pkts.size() || i - in_flight.front() >= delay ||
                                    pkts[in_flight.front()].from_a != pkts[i].from_a)) {
        merged.push_back(pkts[in_flight.front()]);
        in_flight.erase(in_flight.begin());
      }
      if (i == pkts.size()) break;
      merged.push_back(pkts[i]);
      in_flight.push_back(i);
    }
    EXPECT_EQ(merged.size(), 2 * pkts.size());
    EXPECT_EQ(lint_packets(merged, "merged" + std::to_string(delay)), Found{}) << delay;
  }
}

TEST(RoceFlow, CorruptedPacketIsReportedOnceAsIcrc) {
  for (const char* tag : {"send1.middle", "write.first", "read1", "read1.middle", "resend.last"}) {
    auto pkts = clean_rc();
    at_tag(pkts, tag)->corrupt = true;
    const std::uint64_t frame = frame_of(pkts, tag);
    EXPECT_EQ(lint_packets(pkts, std::string("corrupt_") + tag), (Found{{frame, "roce.icrc"}}))
        << tag;
  }
}

// roce.cnp_target: a CNP answers CE-marked (or, seen at the sender, ECN-capable) packets of the
// flow it goes to; one to a flow that was all Not-ECT is reported, one to a flow the capture
// never showed is not judged, nor any in a capture without ECN at all.
TEST(RoceFlow, CnpGoesOnlyToAFlowThatWasEcnCapable) {
  const auto run = [](std::uint8_t tos, const std::string& name) {
    Conversation c(100);
    // ECN is in use on this fabric: B's own UD datagrams to A are ECN-capable.
    Pkt& b_ud = c.request("b_ud", op::kUdSendOnly, 16);
    b_ud.from_a = false;
    b_ud.h.bth.dest_qp = 0x50;
    b_ud.h.deth = Deth{0x2222, 0, 0x60};
    b_ud.tos = 2;
    c.request("w1", op::kRcWriteOnly, 16).tos = tos;
    c.request("w2", op::kRcWriteOnly, 16).tos = tos;
    c.response("ack", op::kRcAck, 101, 0);
    Pkt& cnp = c.response("cnp", op::kCnp, 0, 0);  // from B (the receiver) to A's QP
    cnp.h.bth.dest_qp = kQpA;
    cnp.h.aeth.reset();
    cnp.tos = 48 << 2;
    // A UD QP of B answered too: its CNP goes to the DETH's source QP of A's datagrams.
    Pkt& ud = c.request("ud", op::kUdSendOnly, 16);
    ud.h.bth.dest_qp = 0x40;
    ud.h.deth = Deth{0x1111, 0, 0x77};
    ud.tos = tos;
    Pkt& cnp2 = c.response("cnp2", op::kCnp, 0, 0);
    cnp2.h.bth.dest_qp = 0x77;
    cnp2.h.aeth.reset();
    // A CNP to a QP of a host that sent nothing in this capture: not judged.
    Pkt& cnp3 = c.request("cnp3", op::kCnp, 0);
    cnp3.h.bth.dest_qp = 0x99;
    return lint_packets(c.pkts, name);
  };
  EXPECT_EQ(run(3, "cnp_after_ce"), Found{});   // CE
  EXPECT_EQ(run(2, "cnp_after_ect"), Found{});  // ECT(0), as the sender's own trace shows it
  EXPECT_EQ(run(0, "cnp_not_ect"), (Found{{5, "roce.cnp_target"}, {7, "roce.cnp_target"}}));
}
