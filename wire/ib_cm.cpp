// Byte offsets below are those of IBTA vol. 1 chapter 12's message tables, counted
// from the end of the 24-byte MAD header.
#include "wire/ib_cm.h"

#include <algorithm>
#include <cstring>

namespace softrdma::wire {
namespace {

template <std::size_t N>
void put(std::uint8_t* p, const std::array<std::uint8_t, N>& a) {
  std::memcpy(p, a.data(), N);
}
template <std::size_t N>
void get(const std::uint8_t* p, std::array<std::uint8_t, N>& a) {
  std::memcpy(a.data(), p, N);
}
// Top `bits` bits of a byte, then the bits below them.
std::uint8_t hi(std::uint8_t v, int bits) {
  return static_cast<std::uint8_t>(v << (8 - bits));
}
std::uint8_t top(std::uint8_t byte, int bits) {
  return static_cast<std::uint8_t>(byte >> (8 - bits));
}
std::uint8_t mid(std::uint8_t byte, int from_top, int bits) {
  return static_cast<std::uint8_t>((byte >> (8 - from_top - bits)) & ((1u << bits) - 1));
}
std::uint8_t place(std::uint8_t v, int from_top, int bits) {
  return static_cast<std::uint8_t>((v & ((1u << bits) - 1)) << (8 - from_top - bits));
}

// Starts a MAD: zeroes it and writes the header. Returns the data area or nullptr.
std::uint8_t* begin(MutBytes mad, std::uint64_t tid, CmAttr attr) {
  if (mad.size() < kMadSize) return nullptr;
  std::fill(mad.begin(), mad.begin() + kMadSize, std::uint8_t{0});
  MadHeader h;
  h.tid = tid;
  h.attr_id = static_cast<std::uint16_t>(attr);
  build_mad_header(mad, h);
  return mad.data() + kMadHeaderSize;
}

// Checks a received MAD is a CM message of the given attribute; returns its data area.
Expected<const std::uint8_t*> data_of(Bytes mad, CmAttr attr) {
  if (mad.size() < kMadSize) return Error::kTruncated;
  auto h = parse_mad_header(mad);
  if (!h) return h.error();
  if (h->mgmt_class != kMgmtClassCm || h->class_version != kCmClassVersion) {
    return Error::kBadVersion;
  }
  if (h->attr_id != static_cast<std::uint16_t>(attr)) return Error::kBadValue;
  return mad.data() + kMadHeaderSize;
}

void put_path(std::uint8_t* d, const CmPath& p) {  // 44 bytes at REQ 52 / 96
  store16(d + 0, p.local_lid);
  store16(d + 2, p.remote_lid);
  put(d + 4, p.local_gid);
  put(d + 20, p.remote_gid);
  store32(d + 36, (p.flow_label & 0xFFFFF) << 12);
  d[39] = static_cast<std::uint8_t>(d[39] | (p.packet_rate & 0x3F));
  d[40] = p.traffic_class;
  d[41] = p.hop_limit;
  d[42] = static_cast<std::uint8_t>(hi(p.sl, 4) | (p.subnet_local ? 0x08 : 0));
  d[43] = hi(p.local_ack_timeout, 5);
}
CmPath get_path(const std::uint8_t* d) {
  CmPath p;
  p.local_lid = load16(d + 0);
  p.remote_lid = load16(d + 2);
  get(d + 4, p.local_gid);
  get(d + 20, p.remote_gid);
  p.flow_label = load32(d + 36) >> 12;
  p.packet_rate = d[39] & 0x3F;
  p.traffic_class = d[40];
  p.hop_limit = d[41];
  p.sl = top(d[42], 4);
  p.subnet_local = (d[42] & 0x08) != 0;
  p.local_ack_timeout = top(d[43], 5);
  return p;
}

}  // namespace

Expected<MadHeader> parse_mad_header(Bytes mad) {
  if (mad.size() < kMadHeaderSize) return Error::kTruncated;
  MadHeader h;
  h.base_version = mad[0];
  h.mgmt_class = mad[1];
  h.class_version = mad[2];
  h.method = mad[3];
  h.status = load16(&mad[4]);
  h.class_specific = load16(&mad[6]);
  h.tid = load64(&mad[8]);
  h.attr_id = load16(&mad[16]);
  h.attr_mod = load32(&mad[20]);
  if (h.base_version != kMadBaseVersion) return Error::kBadVersion;
  return h;
}

void build_mad_header(MutBytes mad, const MadHeader& h) {
  mad[0] = h.base_version;
  mad[1] = h.mgmt_class;
  mad[2] = h.class_version;
  mad[3] = h.method;
  store16(&mad[4], h.status);
  store16(&mad[6], h.class_specific);
  store64(&mad[8], h.tid);
  store16(&mad[16], h.attr_id);
  store16(&mad[18], 0);
  store32(&mad[20], h.attr_mod);
}

Expected<std::size_t> build_cm_req(MutBytes mad, std::uint64_t tid, const CmReq& m) {
  std::uint8_t* d = begin(mad, tid, CmAttr::kReq);
  if (!d) return Error::kNoRoom;
  store32(d + 0, m.local_comm_id);
  store64(d + 8, m.service_id);
  store64(d + 16, m.local_ca_guid);
  store32(d + 28, m.local_qkey);
  store24(d + 32, m.local_qpn);
  d[35] = m.responder_resources;
  store24(d + 36, m.local_eecn);
  d[39] = m.initiator_depth;
  store24(d + 40, m.remote_eecn);
  d[43] = static_cast<std::uint8_t>(hi(m.remote_cm_response_timeout, 5) |
                                    place(m.transport_service_type, 5, 2) |
                                    (m.end_to_end_flow_control ? 1 : 0));
  store24(d + 44, m.starting_psn);
  d[47] = static_cast<std::uint8_t>(hi(m.local_cm_response_timeout, 5) | (m.retry_count & 7));
  store16(d + 48, m.pkey);
  d[50] = static_cast<std::uint8_t>(hi(m.path_mtu, 4) | (m.rdc_exists ? 0x08 : 0) |
                                    (m.rnr_retry_count & 7));
  d[51] = static_cast<std::uint8_t>(hi(m.max_cm_retries, 4) | (m.srq ? 0x08 : 0) |
                                    (m.extended_transport_type & 7));
  put_path(d + 52, m.primary);
  put_path(d + 96, m.alternate);
  put(d + 140, m.private_data);
  return kMadSize;
}

Expected<CmReq> parse_cm_req(Bytes mad) {
  auto dd = data_of(mad, CmAttr::kReq);
  if (!dd) return dd.error();
  const std::uint8_t* d = *dd;
  CmReq m;
  m.local_comm_id = load32(d + 0);
  m.service_id = load64(d + 8);
  m.local_ca_guid = load64(d + 16);
  m.local_qkey = load32(d + 28);
  m.local_qpn = load24(d + 32);
  m.responder_resources = d[35];
  m.local_eecn = load24(d + 36);
  m.initiator_depth = d[39];
  m.remote_eecn = load24(d + 40);
  m.remote_cm_response_timeout = top(d[43], 5);
  m.transport_service_type = mid(d[43], 5, 2);
  m.end_to_end_flow_control = (d[43] & 1) != 0;
  m.starting_psn = load24(d + 44);
  m.local_cm_response_timeout = top(d[47], 5);
  m.retry_count = d[47] & 7;
  m.pkey = load16(d + 48);
  m.path_mtu = top(d[50], 4);
  m.rdc_exists = (d[50] & 0x08) != 0;
  m.rnr_retry_count = d[50] & 7;
  m.max_cm_retries = top(d[51], 4);
  m.srq = (d[51] & 0x08) != 0;
  m.extended_transport_type = d[51] & 7;
  m.primary = get_path(d + 52);
  m.alternate = get_path(d + 96);
  get(d + 140, m.private_data);
  return m;
}

Expected<std::size_t> build_cm_mra(MutBytes mad, std::uint64_t tid, const CmMra& m) {
  std::uint8_t* d = begin(mad, tid, CmAttr::kMra);
  if (!d) return Error::kNoRoom;
  store32(d + 0, m.local_comm_id);
  store32(d + 4, m.remote_comm_id);
  d[8] = hi(m.message_mraed, 2);
  d[9] = hi(m.service_timeout, 5);
  put(d + 10, m.private_data);
  return kMadSize;
}

Expected<CmMra> parse_cm_mra(Bytes mad) {
  auto dd = data_of(mad, CmAttr::kMra);
  if (!dd) return dd.error();
  const std::uint8_t* d = *dd;
  CmMra m;
  m.local_comm_id = load32(d + 0);
  m.remote_comm_id = load32(d + 4);
  m.message_mraed = top(d[8], 2);
  m.service_timeout = top(d[9], 5);
  get(d + 10, m.private_data);
  return m;
}

Expected<std::size_t> build_cm_rej(MutBytes mad, std::uint64_t tid, const CmRej& m) {
  std::uint8_t* d = begin(mad, tid, CmAttr::kRej);
  if (!d) return Error::kNoRoom;
  store32(d + 0, m.local_comm_id);
  store32(d + 4, m.remote_comm_id);
  d[8] = hi(m.message_rejected, 2);
  d[9] = hi(m.ari_length, 7);
  store16(d + 10, m.reason);
  put(d + 12, m.ari);
  put(d + 84, m.private_data);
  return kMadSize;
}

Expected<CmRej> parse_cm_rej(Bytes mad) {
  auto dd = data_of(mad, CmAttr::kRej);
  if (!dd) return dd.error();
  const std::uint8_t* d = *dd;
  CmRej m;
  m.local_comm_id = load32(d + 0);
  m.remote_comm_id = load32(d + 4);
  m.message_rejected = top(d[8], 2);
  m.ari_length = top(d[9], 7);
  m.reason = load16(d + 10);
  get(d + 12, m.ari);
  get(d + 84, m.private_data);
  return m;
}

Expected<std::size_t> build_cm_rep(MutBytes mad, std::uint64_t tid, const CmRep& m) {
  std::uint8_t* d = begin(mad, tid, CmAttr::kRep);
  if (!d) return Error::kNoRoom;
  store32(d + 0, m.local_comm_id);
  store32(d + 4, m.remote_comm_id);
  store32(d + 8, m.local_qkey);
  store24(d + 12, m.local_qpn);
  store24(d + 16, m.local_eecn);
  store24(d + 20, m.starting_psn);
  d[24] = m.responder_resources;
  d[25] = m.initiator_depth;
  d[26] = static_cast<std::uint8_t>(hi(m.target_ack_delay, 5) | place(m.failover_accepted, 5, 2) |
                                    (m.end_to_end_flow_control ? 1 : 0));
  d[27] = static_cast<std::uint8_t>(hi(m.rnr_retry_count, 3) | (m.srq ? 0x10 : 0));
  store64(d + 28, m.local_ca_guid);
  put(d + 36, m.private_data);
  return kMadSize;
}

Expected<CmRep> parse_cm_rep(Bytes mad) {
  auto dd = data_of(mad, CmAttr::kRep);
  if (!dd) return dd.error();
  const std::uint8_t* d = *dd;
  CmRep m;
  m.local_comm_id = load32(d + 0);
  m.remote_comm_id = load32(d + 4);
  m.local_qkey = load32(d + 8);
  m.local_qpn = load24(d + 12);
  m.local_eecn = load24(d + 16);
  m.starting_psn = load24(d + 20);
  m.responder_resources = d[24];
  m.initiator_depth = d[25];
  m.target_ack_delay = top(d[26], 5);
  m.failover_accepted = mid(d[26], 5, 2);
  m.end_to_end_flow_control = (d[26] & 1) != 0;
  m.rnr_retry_count = top(d[27], 3);
  m.srq = (d[27] & 0x10) != 0;
  m.local_ca_guid = load64(d + 28);
  get(d + 36, m.private_data);
  return m;
}

Expected<std::size_t> build_cm_rtu(MutBytes mad, std::uint64_t tid, const CmRtu& m) {
  std::uint8_t* d = begin(mad, tid, CmAttr::kRtu);
  if (!d) return Error::kNoRoom;
  store32(d + 0, m.local_comm_id);
  store32(d + 4, m.remote_comm_id);
  put(d + 8, m.private_data);
  return kMadSize;
}

Expected<CmRtu> parse_cm_rtu(Bytes mad) {
  auto dd = data_of(mad, CmAttr::kRtu);
  if (!dd) return dd.error();
  CmRtu m;
  m.local_comm_id = load32(*dd + 0);
  m.remote_comm_id = load32(*dd + 4);
  get(*dd + 8, m.private_data);
  return m;
}

Expected<std::size_t> build_cm_dreq(MutBytes mad, std::uint64_t tid, const CmDreq& m) {
  std::uint8_t* d = begin(mad, tid, CmAttr::kDreq);
  if (!d) return Error::kNoRoom;
  store32(d + 0, m.local_comm_id);
  store32(d + 4, m.remote_comm_id);
  store24(d + 8, m.remote_qpn);
  put(d + 12, m.private_data);
  return kMadSize;
}

Expected<CmDreq> parse_cm_dreq(Bytes mad) {
  auto dd = data_of(mad, CmAttr::kDreq);
  if (!dd) return dd.error();
  CmDreq m;
  m.local_comm_id = load32(*dd + 0);
  m.remote_comm_id = load32(*dd + 4);
  m.remote_qpn = load24(*dd + 8);
  get(*dd + 12, m.private_data);
  return m;
}

Expected<std::size_t> build_cm_drep(MutBytes mad, std::uint64_t tid, const CmDrep& m) {
  std::uint8_t* d = begin(mad, tid, CmAttr::kDrep);
  if (!d) return Error::kNoRoom;
  store32(d + 0, m.local_comm_id);
  store32(d + 4, m.remote_comm_id);
  put(d + 8, m.private_data);
  return kMadSize;
}

Expected<CmDrep> parse_cm_drep(Bytes mad) {
  auto dd = data_of(mad, CmAttr::kDrep);
  if (!dd) return dd.error();
  CmDrep m;
  m.local_comm_id = load32(*dd + 0);
  m.remote_comm_id = load32(*dd + 4);
  get(*dd + 8, m.private_data);
  return m;
}

Expected<std::size_t> build_cm_sidr_req(MutBytes mad, std::uint64_t tid, const CmSidrReq& m) {
  std::uint8_t* d = begin(mad, tid, CmAttr::kSidrReq);
  if (!d) return Error::kNoRoom;
  store32(d + 0, m.request_id);
  store16(d + 4, m.pkey);
  store64(d + 8, m.service_id);
  put(d + 16, m.private_data);
  return kMadSize;
}

Expected<CmSidrReq> parse_cm_sidr_req(Bytes mad) {
  auto dd = data_of(mad, CmAttr::kSidrReq);
  if (!dd) return dd.error();
  CmSidrReq m;
  m.request_id = load32(*dd + 0);
  m.pkey = load16(*dd + 4);
  m.service_id = load64(*dd + 8);
  get(*dd + 16, m.private_data);
  return m;
}

Expected<std::size_t> build_cm_sidr_rep(MutBytes mad, std::uint64_t tid, const CmSidrRep& m) {
  std::uint8_t* d = begin(mad, tid, CmAttr::kSidrRep);
  if (!d) return Error::kNoRoom;
  store32(d + 0, m.request_id);
  d[4] = m.status;
  d[5] = m.additional_info_length;
  store24(d + 8, m.qpn);
  store64(d + 12, m.service_id);
  store32(d + 20, m.qkey);
  put(d + 24, m.additional_info);
  put(d + 96, m.private_data);
  return kMadSize;
}

Expected<CmSidrRep> parse_cm_sidr_rep(Bytes mad) {
  auto dd = data_of(mad, CmAttr::kSidrRep);
  if (!dd) return dd.error();
  const std::uint8_t* d = *dd;
  CmSidrRep m;
  m.request_id = load32(d + 0);
  m.status = d[4];
  m.additional_info_length = d[5];
  m.qpn = load24(d + 8);
  m.service_id = load64(d + 12);
  m.qkey = load32(d + 20);
  get(d + 24, m.additional_info);
  get(d + 96, m.private_data);
  return m;
}

Expected<IpCmHeader> parse_ip_cm_header(Bytes in) {
  if (in.size() < kIpCmHeaderSize) return Error::kTruncated;
  IpCmHeader h;
  h.cma_version = in[0];
  h.ip_version = static_cast<std::uint8_t>(in[1] >> 4);
  h.src_port = load16(&in[2]);
  std::memcpy(h.src_addr.data(), &in[4], 16);
  std::memcpy(h.dst_addr.data(), &in[20], 16);
  if (h.cma_version != 0 || (h.ip_version != 4 && h.ip_version != 6)) return Error::kBadVersion;
  return h;
}

Expected<std::size_t> build_ip_cm_header(MutBytes out, const IpCmHeader& h) {
  if (out.size() < kIpCmHeaderSize) return Error::kNoRoom;
  out[0] = h.cma_version;
  out[1] = static_cast<std::uint8_t>(h.ip_version << 4);
  store16(&out[2], h.src_port);
  std::memcpy(&out[4], h.src_addr.data(), 16);
  std::memcpy(&out[20], h.dst_addr.data(), 16);
  return kIpCmHeaderSize;
}

}  // namespace softrdma::wire
