// softrdma sample-trace OUT.pcap: a capture built by wire/ alone (no engine):
// one RoCEv2 packet of every RC, UC, UD and XRC opcode and a CNP, over IPv4, IPv6
// and a VLAN, so that `softrdma lint` and tshark have something real to read.
#include <cstdio>
#include <string>
#include <vector>

#include "pcap/writer.h"
#include "tools/softrdma/commands.h"
#include "tools/softrdma/sample_iwarp.h"
#include "wire/roce_frame.h"

namespace softrdma::tools {

namespace {

using namespace wire;

// Each packet goes to a QP of its own: the capture is a catalogue of opcodes,
// not one flow, so flow-level rules have nothing to connect.
RoceHeaders headers_for(std::uint8_t opcode, std::uint32_t psn, std::uint32_t payload_len) {
  RoceHeaders h;
  h.bth.opcode = opcode;
  h.bth.dest_qp = 0x000100 + opcode;
  h.bth.psn = psn;
  const RoceOpcodeInfo& info = roce_opcode_info(opcode);
  h.bth.ack_req = info.seg == Seg::kLast || info.seg == Seg::kOnly;
  if (info.headers & kDeth) h.deth = Deth{0x11111111, 0, 0x000012};
  if (info.headers & kXrcEth) h.xrceth = XrcEth{0, 0x000001};
  // A WRITE_ONLY's DMA length is its payload; a FIRST announces a longer message.
  if (info.headers & kReth) {
    h.reth = Reth{0x00007f0000001000, 0x1234, info.seg == Seg::kOnly ? payload_len : 4096};
  }
  if (info.kind == OpKind::kReadRequest) h.reth->dma_len = 4096;
  if (info.headers & kFeth) {  // a FLUSH of 4096 bytes to global visibility
    h.feth = Feth{flush::kGlobal, flush::kRange, 0};
    h.reth->dma_len = 4096;
  }
  if (info.headers & kAtomicEth) h.atomic_eth = AtomicEth{0x00007f0000002000, 0x5678, 1, 0};
  if (info.headers & kAeth) h.aeth = Aeth{syndrome::kAckNoCredit, psn};
  if (info.headers & kAtomicAckEth) h.atomic_ack_eth = AtomicAckEth{41};
  if (info.headers & kImmDt) h.imm = 0xdeadbeef;
  if (info.headers & kIeth) h.inv_rkey = 0x1234;
  return h;
}

}  // namespace

int cmd_sample_trace(int argc, char** argv) {
  if (argc != 1) {
    std::fprintf(stderr, "usage: softrdma sample-trace OUT.pcap\n");
    return 2;
  }
  std::string error;
  auto w = pcap::Writer::open(argv[0], 1, error);
  if (!w) {
    std::fprintf(stderr, "softrdma sample-trace: %s: %s\n", argv[0], error.c_str());
    return 2;
  }
  std::int64_t t = 1'700'000'000LL * 1'000'000'000LL;
  const auto emit = [&](Bytes frame) {
    t += 1000;
    w->write(t / 1'000'000'000, t % 1'000'000'000, frame);
  };
  std::vector<std::uint8_t> buf(9000);
  std::vector<std::uint8_t> payload(256);
  for (std::size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<std::uint8_t>(i);

  RoceAddr a;
  a.src4 = 0xC0000201;  // 192.0.2.1 > 192.0.2.2 (RFC 5737 documentation range)
  a.dst4 = 0xC0000202;
  a.src_port = roce_src_port(0x11);
  a.eth = Ethernet{{0x02, 0, 0, 0, 0, 2}, {0x02, 0, 0, 0, 0, 1}, std::nullopt, 0};
  std::uint32_t psn = 100;
  int packets = 0;
  for (int opc = 0; opc < 256; ++opc) {
    const auto opcode = static_cast<std::uint8_t>(opc);
    const RoceOpcodeInfo& info = roce_opcode_info(opcode);
    if (!info.defined()) continue;
    const std::size_t plen = info.kind == OpKind::kAtomicWrite ? kAtomicWriteLen
                             : info.payload
                                 ? (info.seg == Seg::kFirst || info.seg == Seg::kMiddle ? 256 : 13)
                                 : 0;
    a.ip_id = static_cast<std::uint16_t>(packets);
    auto n = build_roce_frame(buf, a, headers_for(opcode, psn++, static_cast<std::uint32_t>(plen)),
                              Bytes(payload).first(plen));
    if (!n) {
      std::fprintf(stderr, "softrdma sample-trace: %s: %s\n", std::string(info.name).c_str(),
                   std::string(to_string(n.error())).c_str());
      return 1;
    }
    emit(Bytes(buf).first(*n));
    ++packets;
  }
  // The same flow over IPv6 and behind a VLAN tag.
  RoceAddr a6 = a;
  a6.ipv6 = true;
  a6.src6 = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};  // 2001:db8::1
  a6.dst6 = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
  RoceAddr av = a;
  av.eth->vlan_tci = 100;
  std::uint32_t extra_qp = 0x200;
  for (const RoceAddr* addr : {&a6, &av}) {
    RoceHeaders h = headers_for(op::kRcWriteOnlyImm, psn++, 64);
    h.bth.dest_qp = extra_qp++;
    auto n = build_roce_frame(buf, *addr, h, Bytes(payload).first(64));
    if (!n) return 1;
    emit(Bytes(buf).first(*n));
    ++packets;
  }
  packets += write_sample_iwarp(emit);
  w->flush();
  std::printf("%s: %d frames\n", argv[0], packets);
  return 0;
}

}  // namespace softrdma::tools
