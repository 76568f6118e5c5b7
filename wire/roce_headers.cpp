#include "wire/roce_headers.h"

#include <cstring>

namespace softrdma::wire {

Expected<Bth> parse_bth(Bytes in) {
  if (in.size() < kBthLen) return Error::kTruncated;
  const std::uint8_t* p = in.data();
  Bth h;
  h.opcode = p[0];
  h.se = p[1] & 0x80;
  h.mig_req = p[1] & 0x40;
  h.pad_count = (p[1] >> 4) & 0x3;
  h.tver = p[1] & 0x0F;
  h.pkey = load16(p + 2);
  h.fecn = p[4] & 0x80;
  h.becn = p[4] & 0x40;
  h.resv6 = p[4] & 0x3F;
  h.dest_qp = load24(p + 5);
  h.ack_req = p[8] & 0x80;
  h.resv7 = p[8] & 0x7F;
  h.psn = load24(p + 9);
  return h;
}

void encode_bth(std::uint8_t* p, const Bth& h) {
  p[0] = h.opcode;
  p[1] = static_cast<std::uint8_t>((h.se ? 0x80 : 0) | (h.mig_req ? 0x40 : 0) |
                                   ((h.pad_count & 3) << 4) | (h.tver & 0x0F));
  store16(p + 2, h.pkey);
  p[4] = static_cast<std::uint8_t>((h.fecn ? 0x80 : 0) | (h.becn ? 0x40 : 0) | (h.resv6 & 0x3F));
  store24(p + 5, h.dest_qp & kQpnMask);
  p[8] = static_cast<std::uint8_t>((h.ack_req ? 0x80 : 0) | (h.resv7 & 0x7F));
  store24(p + 9, h.psn & kPsnMask);
}

Expected<Reth> parse_reth(Bytes in) {
  if (in.size() < kRethLen) return Error::kTruncated;
  return Reth{load64(in.data()), load32(in.data() + 8), load32(in.data() + 12)};
}
void encode_reth(std::uint8_t* p, const Reth& h) {
  store64(p, h.va);
  store32(p + 8, h.rkey);
  store32(p + 12, h.dma_len);
}

Expected<Aeth> parse_aeth(Bytes in) {
  if (in.size() < kAethLen) return Error::kTruncated;
  return Aeth{in[0], load24(in.data() + 1)};
}
void encode_aeth(std::uint8_t* p, const Aeth& h) {
  p[0] = h.syndrome;
  store24(p + 1, h.msn & 0xFFFFFF);
}

Expected<AtomicEth> parse_atomic_eth(Bytes in) {
  if (in.size() < kAtomicEthLen) return Error::kTruncated;
  return AtomicEth{load64(in.data()), load32(in.data() + 8), load64(in.data() + 12),
                   load64(in.data() + 20)};
}
void encode_atomic_eth(std::uint8_t* p, const AtomicEth& h) {
  store64(p, h.va);
  store32(p + 8, h.rkey);
  store64(p + 12, h.swap_add);
  store64(p + 20, h.compare);
}

Expected<AtomicAckEth> parse_atomic_ack_eth(Bytes in) {
  if (in.size() < kAtomicAckEthLen) return Error::kTruncated;
  return AtomicAckEth{load64(in.data())};
}
void encode_atomic_ack_eth(std::uint8_t* p, const AtomicAckEth& h) {
  store64(p, h.orig);
}

Expected<Deth> parse_deth(Bytes in) {
  if (in.size() < kDethLen) return Error::kTruncated;
  return Deth{load32(in.data()), in[4], load24(in.data() + 5)};
}
void encode_deth(std::uint8_t* p, const Deth& h) {
  store32(p, h.qkey);
  p[4] = h.resv;
  store24(p + 5, h.src_qp & kQpnMask);
}

Expected<XrcEth> parse_xrceth(Bytes in) {
  if (in.size() < kXrcEthLen) return Error::kTruncated;
  return XrcEth{in[0], load24(in.data() + 1)};
}
void encode_xrceth(std::uint8_t* p, const XrcEth& h) {
  p[0] = h.resv;
  store24(p + 1, h.srqn & 0xFFFFFF);
}

Expected<Feth> parse_feth(Bytes in) {
  if (in.size() < kFethLen) return Error::kTruncated;
  const std::uint32_t w = load32(in.data());
  return Feth{static_cast<std::uint8_t>(w & 0x0F), static_cast<std::uint8_t>((w >> 4) & 0x3),
              w & ~std::uint32_t{0x3F}};
}
void encode_feth(std::uint8_t* p, const Feth& h) {
  store32(p, (h.reserved & ~std::uint32_t{0x3F}) | ((h.selectivity & 0x3u) << 4) |
                 (h.placement & 0x0Fu));
}

std::size_t roce_len(const RoceOpcodeInfo& info, std::size_t payload_len) {
  return info.header_len() + payload_len + roce_pad(payload_len) + kIcrcLen;
}

bool roce_reserved_set(const RocePacket& pkt) {
  const Bth& b = pkt.hdr.bth;
  if (b.resv6 != 0 || b.resv7 != 0) return true;
  if (pkt.hdr.deth && pkt.hdr.deth->resv != 0) return true;
  if (pkt.hdr.xrceth && pkt.hdr.xrceth->resv != 0) return true;
  if (pkt.hdr.feth && pkt.hdr.feth->reserved != 0) return true;
  for (std::uint8_t x : pkt.cnp_reserved) {
    if (x != 0) return true;
  }
  return false;
}

Expected<RocePacket> parse_roce(Bytes in) {
  auto bth = parse_bth(in);
  if (!bth) return bth.error();
  RocePacket pkt;
  pkt.hdr.bth = *bth;
  const RoceOpcodeInfo& info = roce_opcode_info(bth->opcode);
  if (!info.defined()) return Error::kUnknownOpcode;
  pkt.info = &info;
  if (bth->tver != 0) return Error::kBadVersion;
  pkt.header_len = info.header_len();
  if (in.size() < pkt.header_len + kIcrcLen) return Error::kTruncated;

  const std::uint8_t* p = in.data() + kBthLen;
  if (info.headers & kDeth) {
    pkt.hdr.deth = *parse_deth(Bytes(p, kDethLen));
    p += kDethLen;
  }
  if (info.headers & kXrcEth) {
    pkt.hdr.xrceth = *parse_xrceth(Bytes(p, kXrcEthLen));
    p += kXrcEthLen;
  }
  if (info.headers & kFeth) {
    pkt.hdr.feth = *parse_feth(Bytes(p, kFethLen));
    p += kFethLen;
  }
  if (info.headers & kReth) {
    pkt.hdr.reth = *parse_reth(Bytes(p, kRethLen));
    p += kRethLen;
  }
  if (info.headers & kAtomicEth) {
    pkt.hdr.atomic_eth = *parse_atomic_eth(Bytes(p, kAtomicEthLen));
    p += kAtomicEthLen;
  }
  if (info.headers & kAeth) {
    pkt.hdr.aeth = *parse_aeth(Bytes(p, kAethLen));
    p += kAethLen;
  }
  if (info.headers & kAtomicAckEth) {
    pkt.hdr.atomic_ack_eth = *parse_atomic_ack_eth(Bytes(p, kAtomicAckEthLen));
    p += kAtomicAckEthLen;
  }
  if (info.headers & kImmDt) {
    pkt.hdr.imm = load32(p);
    p += kImmDtLen;
  }
  if (info.headers & kIeth) {
    pkt.hdr.inv_rkey = load32(p);
    p += kIethLen;
  }
  if (info.headers & kCnpPad) {
    pkt.cnp_reserved = Bytes(p, kCnpPadLen);
    p += kCnpPadLen;
  }
  const std::size_t body = in.size() - pkt.header_len - kIcrcLen;  // payload + pad
  if (!info.payload && body != 0) return Error::kBadLength;
  if (bth->pad_count > body) return Error::kBadPad;
  pkt.payload = Bytes(p, body - bth->pad_count);
  pkt.pad = Bytes(p + pkt.payload.size(), bth->pad_count);
  pkt.icrc = load32le(in.data() + in.size() - kIcrcLen);
  return pkt;
}

Expected<std::size_t> build_roce_header(MutBytes out, const RoceHeaders& h,
                                        std::size_t payload_len) {
  const RoceOpcodeInfo& info = roce_opcode_info(h.bth.opcode);
  if (!info.defined()) return Error::kUnknownOpcode;
  if (!info.payload && payload_len != 0) return Error::kBadValue;
  const auto need = [&](std::uint16_t bit, bool present) {
    return !(info.headers & bit) || present;
  };
  if (!need(kDeth, h.deth.has_value()) || !need(kXrcEth, h.xrceth.has_value()) ||
      !need(kFeth, h.feth.has_value()) || !need(kReth, h.reth.has_value()) ||
      !need(kAtomicEth, h.atomic_eth.has_value()) || !need(kAeth, h.aeth.has_value()) ||
      !need(kAtomicAckEth, h.atomic_ack_eth.has_value()) || !need(kImmDt, h.imm.has_value()) ||
      !need(kIeth, h.inv_rkey.has_value())) {
    return Error::kBadValue;
  }
  const std::size_t hlen = info.header_len();
  if (out.size() < hlen) return Error::kNoRoom;
  Bth bth = h.bth;
  bth.pad_count = roce_pad(payload_len);
  std::uint8_t* p = out.data();
  encode_bth(p, bth);
  p += kBthLen;
  if (info.headers & kDeth) {
    encode_deth(p, *h.deth);
    p += kDethLen;
  }
  if (info.headers & kXrcEth) {
    encode_xrceth(p, *h.xrceth);
    p += kXrcEthLen;
  }
  if (info.headers & kFeth) {
    encode_feth(p, *h.feth);
    p += kFethLen;
  }
  if (info.headers & kReth) {
    encode_reth(p, *h.reth);
    p += kRethLen;
  }
  if (info.headers & kAtomicEth) {
    encode_atomic_eth(p, *h.atomic_eth);
    p += kAtomicEthLen;
  }
  if (info.headers & kAeth) {
    encode_aeth(p, *h.aeth);
    p += kAethLen;
  }
  if (info.headers & kAtomicAckEth) {
    encode_atomic_ack_eth(p, *h.atomic_ack_eth);
    p += kAtomicAckEthLen;
  }
  if (info.headers & kImmDt) {
    store32(p, *h.imm);
    p += kImmDtLen;
  }
  if (info.headers & kIeth) {
    store32(p, *h.inv_rkey);
    p += kIethLen;
  }
  if (info.headers & kCnpPad) std::memset(p, 0, kCnpPadLen);
  return hlen;
}

Expected<std::size_t> build_roce(MutBytes out, const RoceHeaders& h, Bytes payload) {
  const RoceOpcodeInfo& info = roce_opcode_info(h.bth.opcode);
  if (!info.defined()) return Error::kUnknownOpcode;
  const std::size_t total = roce_len(info, payload.size());
  if (out.size() < total && info.payload) return Error::kNoRoom;
  auto hlen = build_roce_header(out, h, payload.size());
  if (!hlen) return hlen.error();
  if (out.size() < total) return Error::kNoRoom;
  std::uint8_t* p = out.data() + *hlen;
  if (!payload.empty()) std::memcpy(p, payload.data(), payload.size());
  p += payload.size();
  std::memset(p, 0, roce_pad(payload.size()) + kIcrcLen);
  return total;
}

}  // namespace softrdma::wire
