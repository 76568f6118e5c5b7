// Test tool: writes COUNT random RoCEv2 frames (seeded) to a pcap through wire/
// and prints, per frame, the header fields tshark and scapy are expected to see,
// as tab-separated `frame opcode destqp psn field=value...` lines.
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "pcap/writer.h"
#include "wire/roce_frame.h"

using namespace softrdma::wire;

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: roce_pcap_gen SEED COUNT OUT.pcap [--ipv4-only]\n");
    return 2;
  }
  std::mt19937_64 rng(std::strtoull(argv[1], nullptr, 10));
  const int count = std::atoi(argv[2]);
  const bool ipv4_only = argc > 4 && std::string(argv[4]) == "--ipv4-only";
  std::string err;
  auto w = softrdma::pcap::Writer::open(argv[3], 1, err);
  if (!w) {
    std::fprintf(stderr, "%s\n", err.c_str());
    return 2;
  }
  std::vector<std::uint8_t> defined;
  for (int i = 0; i < 256; ++i)
    if (roce_opcode_info(static_cast<std::uint8_t>(i)).defined())
      defined.push_back(static_cast<std::uint8_t>(i));
  std::vector<std::uint8_t> buf(4096), payload(1024);
  const auto r32 = [&] { return static_cast<std::uint32_t>(rng()); };
  for (int n = 1; n <= count; ++n) {
    const std::uint8_t opcode = defined[rng() % defined.size()];
    const RoceOpcodeInfo& info = roce_opcode_info(opcode);
    RoceHeaders h;
    h.bth.opcode = opcode;
    h.bth.se = rng() & 1;
    h.bth.dest_qp = r32() & kQpnMask;
    h.bth.psn = r32() & kPsnMask;
    h.bth.ack_req = rng() & 1;
    h.bth.fecn = rng() % 8 == 0;
    std::string fields;
    char tmp[128];
    if (info.headers & kDeth) {
      h.deth = Deth{r32(), 0, r32() & kQpnMask};
      std::snprintf(tmp, sizeof tmp, "\tdeth.q_key=%u\tdeth.srcqp=%u", h.deth->qkey,
                    h.deth->src_qp);
      fields += tmp;
    }
    // tshark 4.0 knows neither FLUSH nor ATOMIC WRITE (IBTA 1.5), nor the headers of XRC's
    // opcodes (it names them): it decodes their BTH and shows the rest as unknown data, so only
    // the BTH fields are expected of them.
    const bool ibta15 = info.kind == OpKind::kFlush || info.kind == OpKind::kAtomicWrite;
    const bool bth_only = ibta15 || info.transport == Transport::kXrc;
    if (info.headers & kXrcEth) h.xrceth = XrcEth{0, (r32() & 0xFFFFFF) | 1};
    if (info.headers & kFeth) {
      h.feth =
          Feth{static_cast<std::uint8_t>(1 + rng() % 3), static_cast<std::uint8_t>(rng() & 1), 0};
    }
    if (info.headers & kReth) {
      h.reth = Reth{rng(), r32(), r32()};
      if (info.kind == OpKind::kAtomicWrite) {
        h.reth->va &= ~std::uint64_t{7};
        h.reth->dma_len = kAtomicWriteLen;
      }
      std::snprintf(tmp, sizeof tmp, "\treth.va=%" PRIu64 "\treth.r_key=%u\treth.dmalen=%u",
                    h.reth->va, h.reth->rkey, h.reth->dma_len);
      fields += tmp;
    }
    if (info.headers & kAtomicEth) {
      h.atomic_eth = AtomicEth{rng() & ~std::uint64_t{7}, r32(), rng(), rng()};
      std::snprintf(tmp, sizeof tmp, "\tatomiceth.swapdt=%" PRIu64 "\tatomiceth.cmpdt=%" PRIu64,
                    h.atomic_eth->swap_add, h.atomic_eth->compare);
      fields += tmp;
    }
    if (info.headers & kAeth) {
      static constexpr std::uint8_t kSyndromes[] = {0x1F, 0x00, 0x25, 0x60, 0x61, 0x62, 0x63};
      h.aeth = Aeth{kSyndromes[rng() % 7], r32() & 0xFFFFFF};
      std::snprintf(tmp, sizeof tmp, "\taeth.syndrome=%u\taeth.msn=%u", h.aeth->syndrome,
                    h.aeth->msn);
      fields += tmp;
    }
    if (info.headers & kAtomicAckEth) {
      h.atomic_ack_eth = AtomicAckEth{rng()};
      std::snprintf(tmp, sizeof tmp, "\tatomicacketh.origremdt=%" PRIu64, h.atomic_ack_eth->orig);
      fields += tmp;
    }
    if (info.headers & kImmDt) {
      h.imm = r32();
      std::snprintf(tmp, sizeof tmp, "\timmdt=%08x", *h.imm);
      fields += tmp;
    }
    if (info.headers & kIeth) {
      h.inv_rkey = r32();
      std::snprintf(tmp, sizeof tmp, "\tieth=%08x", *h.inv_rkey);
      fields += tmp;
    }
    if (bth_only) fields.clear();
    std::size_t plen = 0;
    if (info.payload)
      plen = (info.seg == Seg::kFirst || info.seg == Seg::kMiddle) ? 256 : rng() % 300;
    if (info.kind == OpKind::kAtomicWrite) plen = kAtomicWriteLen;
    for (std::size_t i = 0; i < plen; ++i) payload[i] = static_cast<std::uint8_t>(rng());
    RoceAddr a;
    a.ipv6 = !ipv4_only && rng() % 4 == 0;
    a.src4 = r32();
    a.dst4 = r32();
    for (auto& b : a.src6) b = static_cast<std::uint8_t>(rng());
    for (auto& b : a.dst6) b = static_cast<std::uint8_t>(rng());
    a.src6[0] = a.dst6[0] = 0xfd;
    a.src_port = static_cast<std::uint16_t>(0xC000 | (rng() & 0x3FFF));
    a.traffic_class = static_cast<std::uint8_t>(rng());
    a.hop_limit = static_cast<std::uint8_t>(1 + rng() % 255);
    a.ip_id = static_cast<std::uint16_t>(rng());
    a.flow_label = r32() & 0xFFFFF;
    a.udp_checksum = rng() % 4 == 0;
    a.eth = Ethernet{{0x02, 0, 0, 0, 0, 2}, {0x02, 0, 0, 0, 0, 1}, std::nullopt, 0};
    if (rng() % 5 == 0) a.eth->vlan_tci = static_cast<std::uint16_t>(rng() & 0x0FFF);
    auto len = build_roce_frame(buf, a, h, Bytes(payload).first(plen));
    if (!len) {
      std::fprintf(stderr, "build failed: %s\n", std::string(to_string(len.error())).c_str());
      return 1;
    }
    w->write(1'700'000'000 + n, 0, Bytes(buf).first(*len));
    std::printf("%d\topcode=%u\tdestqp=%u\tpsn=%u%s\n", n, opcode, h.bth.dest_qp, h.bth.psn,
                fields.c_str());
  }
  return 0;
}
