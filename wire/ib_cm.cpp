// Each message's layout is written once, as a list of fields at the byte offsets of IBTA
// vol. 1 chapter 12's message tables (counted from the end of the 24-byte MAD header);
// one walker stores the fields into a MAD and another loads them back.
#include "wire/ib_cm.h"

#include <algorithm>
#include <cstring>

namespace softrdma::wire {
namespace {

std::uint8_t bits_of(std::uint8_t byte, int from_top, int width) {
  return static_cast<std::uint8_t>((byte >> (8 - from_top - width)) & ((1u << width) - 1));
}

// Stores fields into a zeroed buffer.
struct Store {
  std::uint8_t* d;
  Store at(std::size_t off) const { return {d + off}; }
  void u8(std::size_t o, std::uint8_t v) const { d[o] = v; }
  void u16(std::size_t o, std::uint16_t v) const { store16(d + o, v); }
  void u24(std::size_t o, std::uint32_t v) const { store24(d + o, v); }
  void u32(std::size_t o, std::uint32_t v) const { store32(d + o, v); }
  void u64(std::size_t o, std::uint64_t v) const { store64(d + o, v); }
  template <std::size_t N>
  void bytes(std::size_t o, const std::array<std::uint8_t, N>& a) const {
    std::memcpy(d + o, a.data(), N);
  }
  // `width` bits starting `from_top` bits below the byte's most significant bit.
  template <class T>
  void bits(std::size_t o, int from_top, int width, T v) const {
    const auto field = static_cast<unsigned>(v) & ((1u << width) - 1);
    d[o] = static_cast<std::uint8_t>(d[o] | (field << (8 - from_top - width)));
  }
  // `width` bits of the big-endian 32-bit word at `o`, `shift` bits above its bottom.
  void bits32(std::size_t o, int shift, int width, std::uint32_t v) const {
    store32(d + o, load32(d + o) | ((v & ((1u << width) - 1)) << shift));
  }
};

// Loads fields from a buffer.
struct Load {
  const std::uint8_t* d;
  Load at(std::size_t off) const { return {d + off}; }
  void u8(std::size_t o, std::uint8_t& v) const { v = d[o]; }
  void u16(std::size_t o, std::uint16_t& v) const { v = load16(d + o); }
  void u24(std::size_t o, std::uint32_t& v) const { v = load24(d + o); }
  void u32(std::size_t o, std::uint32_t& v) const { v = load32(d + o); }
  void u64(std::size_t o, std::uint64_t& v) const { v = load64(d + o); }
  template <std::size_t N>
  void bytes(std::size_t o, std::array<std::uint8_t, N>& a) const {
    std::memcpy(a.data(), d + o, N);
  }
  void bits(std::size_t o, int from_top, int width, std::uint8_t& v) const {
    v = bits_of(d[o], from_top, width);
  }
  void bits(std::size_t o, int from_top, int width, bool& v) const {
    v = bits_of(d[o], from_top, width) != 0;
  }
  void bits32(std::size_t o, int shift, int width, std::uint32_t& v) const {
    v = (load32(d + o) >> shift) & ((1u << width) - 1);
  }
};

// The 44-byte path record at REQ offsets 52 (primary) and 96 (alternate).
template <class Io, class P>
void path_fields(const Io& io, P& p) {
  io.u16(0, p.local_lid);
  io.u16(2, p.remote_lid);
  io.bytes(4, p.local_gid);
  io.bytes(20, p.remote_gid);
  io.bits32(36, 12, 20, p.flow_label);
  io.bits(39, 2, 6, p.packet_rate);
  io.u8(40, p.traffic_class);
  io.u8(41, p.hop_limit);
  io.bits(42, 0, 4, p.sl);
  io.bits(42, 4, 1, p.subnet_local);
  io.bits(43, 0, 5, p.local_ack_timeout);
}

// Layout<M>: the message's attribute ID and `fields(io, m)`, m being M or const M.
template <class M>
struct Layout;

template <>
struct Layout<CmReq> {
  static constexpr CmAttr kAttr = CmAttr::kReq;
  template <class Io, class M>
  static void fields(const Io& io, M& m) {
    io.u32(0, m.local_comm_id);
    io.u64(8, m.service_id);
    io.u64(16, m.local_ca_guid);
    io.u32(28, m.local_qkey);
    io.u24(32, m.local_qpn);
    io.u8(35, m.responder_resources);
    io.u24(36, m.local_eecn);
    io.u8(39, m.initiator_depth);
    io.u24(40, m.remote_eecn);
    io.bits(43, 0, 5, m.remote_cm_response_timeout);
    io.bits(43, 5, 2, m.transport_service_type);
    io.bits(43, 7, 1, m.end_to_end_flow_control);
    io.u24(44, m.starting_psn);
    io.bits(47, 0, 5, m.local_cm_response_timeout);
    io.bits(47, 5, 3, m.retry_count);
    io.u16(48, m.pkey);
    io.bits(50, 0, 4, m.path_mtu);
    io.bits(50, 4, 1, m.rdc_exists);
    io.bits(50, 5, 3, m.rnr_retry_count);
    io.bits(51, 0, 4, m.max_cm_retries);
    io.bits(51, 4, 1, m.srq);
    io.bits(51, 5, 3, m.extended_transport_type);
    path_fields(io.at(52), m.primary);
    path_fields(io.at(96), m.alternate);
    io.bytes(140, m.private_data);
  }
};

template <>
struct Layout<CmMra> {
  static constexpr CmAttr kAttr = CmAttr::kMra;
  template <class Io, class M>
  static void fields(const Io& io, M& m) {
    io.u32(0, m.local_comm_id);
    io.u32(4, m.remote_comm_id);
    io.bits(8, 0, 2, m.message_mraed);
    io.bits(9, 0, 5, m.service_timeout);
    io.bytes(10, m.private_data);
  }
};

template <>
struct Layout<CmRej> {
  static constexpr CmAttr kAttr = CmAttr::kRej;
  template <class Io, class M>
  static void fields(const Io& io, M& m) {
    io.u32(0, m.local_comm_id);
    io.u32(4, m.remote_comm_id);
    io.bits(8, 0, 2, m.message_rejected);
    io.bits(9, 0, 7, m.ari_length);
    io.u16(10, m.reason);
    io.bytes(12, m.ari);
    io.bytes(84, m.private_data);
  }
};

template <>
struct Layout<CmRep> {
  static constexpr CmAttr kAttr = CmAttr::kRep;
  template <class Io, class M>
  static void fields(const Io& io, M& m) {
    io.u32(0, m.local_comm_id);
    io.u32(4, m.remote_comm_id);
    io.u32(8, m.local_qkey);
    io.u24(12, m.local_qpn);
    io.u24(16, m.local_eecn);
    io.u24(20, m.starting_psn);
    io.u8(24, m.responder_resources);
    io.u8(25, m.initiator_depth);
    io.bits(26, 0, 5, m.target_ack_delay);
    io.bits(26, 5, 2, m.failover_accepted);
    io.bits(26, 7, 1, m.end_to_end_flow_control);
    io.bits(27, 0, 3, m.rnr_retry_count);
    io.bits(27, 3, 1, m.srq);
    io.u64(28, m.local_ca_guid);
    io.bytes(36, m.private_data);
  }
};

// RTU and DREP are the two communication IDs and private data.
template <class Io, class M>
void ids_then_private(const Io& io, M& m) {
  io.u32(0, m.local_comm_id);
  io.u32(4, m.remote_comm_id);
  io.bytes(8, m.private_data);
}
template <>
struct Layout<CmRtu> {
  static constexpr CmAttr kAttr = CmAttr::kRtu;
  template <class Io, class M>
  static void fields(const Io& io, M& m) {
    ids_then_private(io, m);
  }
};
template <>
struct Layout<CmDrep> {
  static constexpr CmAttr kAttr = CmAttr::kDrep;
  template <class Io, class M>
  static void fields(const Io& io, M& m) {
    ids_then_private(io, m);
  }
};

template <>
struct Layout<CmDreq> {
  static constexpr CmAttr kAttr = CmAttr::kDreq;
  template <class Io, class M>
  static void fields(const Io& io, M& m) {
    io.u32(0, m.local_comm_id);
    io.u32(4, m.remote_comm_id);
    io.u24(8, m.remote_qpn);
    io.bytes(12, m.private_data);
  }
};

template <>
struct Layout<CmSidrReq> {
  static constexpr CmAttr kAttr = CmAttr::kSidrReq;
  template <class Io, class M>
  static void fields(const Io& io, M& m) {
    io.u32(0, m.request_id);
    io.u16(4, m.pkey);
    io.u64(8, m.service_id);
    io.bytes(16, m.private_data);
  }
};

template <>
struct Layout<CmSidrRep> {
  static constexpr CmAttr kAttr = CmAttr::kSidrRep;
  template <class Io, class M>
  static void fields(const Io& io, M& m) {
    io.u32(0, m.request_id);
    io.u8(4, m.status);
    io.u8(5, m.additional_info_length);
    io.u24(8, m.qpn);
    io.u64(12, m.service_id);
    io.u32(20, m.qkey);
    io.bytes(24, m.additional_info);
    io.bytes(96, m.private_data);
  }
};

// The MAD header (IBTA vol. 1 §13.4.2); byte 18 is reserved.
template <class Io, class H>
void mad_header_fields(const Io& io, H& h) {
  io.u8(0, h.base_version);
  io.u8(1, h.mgmt_class);
  io.u8(2, h.class_version);
  io.u8(3, h.method);
  io.u16(4, h.status);
  io.u16(6, h.class_specific);
  io.u64(8, h.tid);
  io.u16(16, h.attr_id);
  io.u32(20, h.attr_mod);
}

// The RDMA IP CM header (IBTA Annex A11): the IP version is the high nibble of byte 1.
template <class Io, class H>
void ip_cm_header_fields(const Io& io, H& h) {
  io.u8(0, h.cma_version);
  io.bits(1, 0, 4, h.ip_version);
  io.u16(2, h.src_port);
  io.bytes(4, h.src_addr);
  io.bytes(20, h.dst_addr);
}

}  // namespace

Expected<MadHeader> parse_mad_header(Bytes mad) {
  if (mad.size() < kMadHeaderSize) return Error::kTruncated;
  MadHeader h;
  mad_header_fields(Load{mad.data()}, h);
  if (h.base_version != kMadBaseVersion) return Error::kBadVersion;
  return h;
}

void build_mad_header(MutBytes mad, const MadHeader& h) {
  std::fill(mad.begin(), mad.begin() + kMadHeaderSize, std::uint8_t{0});
  mad_header_fields(Store{mad.data()}, h);
}

template <class M>
Expected<std::size_t> build_cm(MutBytes mad, std::uint64_t tid, const M& m) {
  if (mad.size() < kMadSize) return Error::kNoRoom;
  std::fill(mad.begin(), mad.begin() + kMadSize, std::uint8_t{0});
  MadHeader h;
  h.tid = tid;
  h.attr_id = static_cast<std::uint16_t>(Layout<M>::kAttr);
  build_mad_header(mad, h);
  Layout<M>::fields(Store{mad.data() + kMadHeaderSize}, m);
  return kMadSize;
}

template <class M>
Expected<M> parse_cm(Bytes mad) {
  if (mad.size() < kMadSize) return Error::kTruncated;
  auto h = parse_mad_header(mad);
  if (!h) return h.error();
  if (h->mgmt_class != kMgmtClassCm || h->class_version != kCmClassVersion) {
    return Error::kBadVersion;
  }
  if (h->attr_id != static_cast<std::uint16_t>(Layout<M>::kAttr)) return Error::kBadValue;
  M m;
  Layout<M>::fields(Load{mad.data() + kMadHeaderSize}, m);
  return m;
}

#define SOFTRDMA_CM_CODEC(M)                                                        \
  template Expected<std::size_t> build_cm<M>(MutBytes, std::uint64_t, const M&); \
  template Expected<M> parse_cm<M>(Bytes);
SOFTRDMA_CM_MESSAGES(SOFTRDMA_CM_CODEC)
#undef SOFTRDMA_CM_CODEC

Expected<IpCmHeader> parse_ip_cm_header(Bytes in) {
  if (in.size() < kIpCmHeaderSize) return Error::kTruncated;
  IpCmHeader h;
  ip_cm_header_fields(Load{in.data()}, h);
  if (h.cma_version != 0 || (h.ip_version != 4 && h.ip_version != 6)) return Error::kBadVersion;
  return h;
}

Expected<std::size_t> build_ip_cm_header(MutBytes out, const IpCmHeader& h) {
  if (out.size() < kIpCmHeaderSize) return Error::kNoRoom;
  std::fill(out.begin(), out.begin() + kIpCmHeaderSize, std::uint8_t{0});
  ip_cm_header_fields(Store{out.data()}, h);
  return kIpCmHeaderSize;
}

}  // namespace softrdma::wire
