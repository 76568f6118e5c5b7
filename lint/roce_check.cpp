#include "lint/roce_check.h"

#include <string>

#include "lint/flow.h"
#include "wire/pfc_pause.h"
#include "wire/roce_frame.h"
#include "wire/roce_headers.h"

namespace softrdma::lint {

namespace {

std::string bytes_str(std::size_t n) {
  return std::to_string(n) + " bytes";
}

// The ICRC as it reads on the wire, e.g. "82fd002a".
std::string icrc_str(std::uint32_t icrc) {
  std::uint8_t b[4];
  wire::store32le(b, icrc);
  char buf[16];
  std::snprintf(buf, sizeof buf, "%02x%02x%02x%02x", b[0], b[1], b[2], b[3]);
  return buf;
}

// ATOMIC WRITE (IBTA 1.5 A19): a RETH of DMA length 8 and 8 bytes of payload, at an 8-byte
// aligned address.
template <class Add>
void check_atomic_write(const wire::RocePacket& pkt, const Add& add) {
  const wire::Reth& reth = *pkt.hdr.reth;
  if (reth.dma_len != wire::kAtomicWriteLen || pkt.payload.size() != wire::kAtomicWriteLen) {
    add("roce.atomic_write", "RETH DMA length 8 and 8 bytes of payload",
        "DMA length " + std::to_string(reth.dma_len) + ", " + bytes_str(pkt.payload.size()));
  }
  if (reth.va & 7) add("roce.atomic_alignment", "VA aligned to 8 bytes", hex(reth.va, 16));
}

// FETH (IBTA 1.5 A19): placement type global visibility (1), persistence (2) or both; level 0
// (the RETH's range) or 1 (the whole region); the other bits reserved.
template <class Add>
void check_feth(const wire::Feth& f, const Add& add) {
  if (f.placement == 0 || (f.placement & ~3u)) {
    add("roce.feth", "placement type 1 (global), 2 (persistent) or 3", std::to_string(f.placement));
  }
  if (f.selectivity > wire::flush::kRegion) {
    add("roce.feth", "selectivity level 0 (range) or 1 (memory region)",
        std::to_string(f.selectivity));
  }
  if (f.reserved != 0) {
    add("roce.feth_reserved", "0 in FETH bits 31-6", hex(f.reserved, 8));
  }
}

}  // namespace

void check_roce(std::uint64_t frame_no, const wire::FrameView& frame, Report& report) {
  using namespace wire;
  std::string flow = flow_string(frame);
  const Bytes dgram = frame.payload;
  if (dgram.size() >= kBthLen) flow += " qp " + hex(load24(dgram.data() + 5), 6);
  const auto add = [&](Rule rule, std::string expected, std::string found) {
    report.add(frame_no, flow, rule, std::move(expected), std::move(found));
  };

  // A lossless port's pause frame (--switch ...,pfc=): softrdma's own, in the manufacturer-specific
  // opcode range; nothing of IBTA's to check in it.
  if (is_pfc_pause(dgram)) return;
  auto pkt = parse_roce(dgram);
  if (!pkt) {
    const std::uint8_t opcode = dgram.empty() ? 0 : dgram[0];
    const RoceOpcodeInfo& info = roce_opcode_info(opcode);
    switch (pkt.error()) {
      case Error::kTruncated: {
        const std::size_t need = (dgram.size() < kBthLen || !info.defined())
                                     ? kBthLen + kIcrcLen
                                     : info.header_len() + kIcrcLen;
        add("roce.truncated",
            "at least " + bytes_str(need) +
                (info.defined() && dgram.size() >= kBthLen ? " for " + std::string(info.name) : ""),
            bytes_str(dgram.size()));
        return;  // nothing more can be checked, the ICRC included
      }
      case Error::kUnknownOpcode:
        add("roce.opcode", "an RC, UC, UD, XRC or CNP opcode", hex(opcode, 2));
        break;
      case Error::kBadVersion:
        add("roce.tver", "0", std::to_string(dgram[1] & 0x0F));
        break;
      case Error::kBadPad:
        add("roce.pad", "pad count <= payload bytes",
            "pad count " + std::to_string((dgram[1] >> 4) & 3));
        break;
      case Error::kBadLength:
        add("roce.payload", std::string("no payload for ") + std::string(info.name),
            bytes_str(dgram.size() - info.header_len() - kIcrcLen));
        break;
      default:
        add("roce.header", "a valid header", std::string(to_string(pkt.error())));
    }
  } else {
    const RoceOpcodeInfo& info = *pkt->info;
    const Bth& bth = pkt->hdr.bth;
    if (bth.resv6 != 0 || bth.resv7 != 0) {
      add("roce.bth_reserved", "0", "byte4 " + hex(bth.resv6, 2) + " byte8 " + hex(bth.resv7, 2));
    }
    if ((info.seg == Seg::kFirst || info.seg == Seg::kMiddle) && bth.pad_count != 0) {
      add("roce.pad", "pad count 0 on a first or middle packet", std::to_string(bth.pad_count));
    }
    for (std::uint8_t b : pkt->pad) {
      if (b != 0) {
        add("roce.pad_bytes", "zero pad bytes", hex(b, 2));
        break;
      }
    }
    if (pkt->hdr.atomic_eth && (pkt->hdr.atomic_eth->va & 7) != 0) {
      add("roce.atomic_alignment", "VA aligned to 8 bytes", hex(pkt->hdr.atomic_eth->va, 16));
    }
    if (info.kind == OpKind::kAtomicWrite) check_atomic_write(*pkt, add);
    if (pkt->hdr.feth) check_feth(*pkt->hdr.feth, add);
    if (pkt->hdr.aeth && aeth_kind(pkt->hdr.aeth->syndrome) == AethKind::kReserved) {
      add("roce.aeth_syndrome", "ACK, RNR NAK or NAK", hex(pkt->hdr.aeth->syndrome, 2));
    }
    if (pkt->hdr.aeth && aeth_kind(pkt->hdr.aeth->syndrome) == AethKind::kNak &&
        (pkt->hdr.aeth->syndrome & 0x1F) > 4) {
      add("roce.aeth_syndrome", "NAK code 0-4", hex(pkt->hdr.aeth->syndrome, 2));
    }
    if (pkt->hdr.xrceth) {  // every XRC request has one (the table), no response does
      if (pkt->hdr.xrceth->srqn == 0) {
        add("roce.xrceth", "an XRC SRQ number other than 0", "0");
      }
      if (pkt->hdr.xrceth->resv != 0) {
        add("roce.xrceth_reserved", "0 in the XRCETH reserved byte", hex(pkt->hdr.xrceth->resv, 2));
      }
    }
    if (pkt->hdr.deth && pkt->hdr.deth->resv != 0) {
      add("roce.deth_reserved", "0 in the DETH reserved byte", hex(pkt->hdr.deth->resv, 2));
    }
    for (std::uint8_t b : pkt->cnp_reserved) {
      if (b != 0) {
        add("roce.cnp_reserved", "16 zero bytes after the BTH", "a non-zero byte " + hex(b, 2));
        break;
      }
    }
  }
  if (dgram.size() < kBthLen + kIcrcLen) return;
  auto want = expected_icrc(frame);
  const std::uint32_t found = load32le(dgram.data() + dgram.size() - kIcrcLen);
  if (want && *want != found) add("roce.icrc", icrc_str(*want), icrc_str(found));
}

}  // namespace softrdma::lint
