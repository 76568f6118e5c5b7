// InfiniBand management datagrams (MADs, IBTA vol. 1 §13.4) and the communication
// management messages carried in them (§12.6: REQ, MRA, REJ, REP, RTU, DREQ, DREP,
// SIDR_REQ, SIDR_REP), plus the RDMA IP CM service's private-data header (IBTA Annex
// A11) that rdma_cm puts in front of REQ and SIDR_REQ private data. A MAD is 256 bytes;
// builders write all of it, parsers need all of it and never read past it.
#pragma once

#include <array>
#include <cstdint>

#include "wire/bytes.h"

namespace softrdma::wire {

inline constexpr std::size_t kMadSize = 256;
inline constexpr std::size_t kMadHeaderSize = 24;
inline constexpr std::uint8_t kMadBaseVersion = 1;
inline constexpr std::uint8_t kMgmtClassCm = 0x07;
inline constexpr std::uint8_t kCmClassVersion = 2;
inline constexpr std::uint8_t kMadMethodSend = 0x03;
inline constexpr std::uint32_t kGsiQpn = 1;
inline constexpr std::uint32_t kGsiQkey = 0x80010000;

enum class CmAttr : std::uint16_t {
  kClassPortInfo = 0x0001,
  kReq = 0x0010,
  kMra = 0x0011,
  kRej = 0x0012,
  kRep = 0x0013,
  kRtu = 0x0014,
  kDreq = 0x0015,
  kDrep = 0x0016,
  kSidrReq = 0x0017,
  kSidrRep = 0x0018,
  kLap = 0x0019,
  kApr = 0x001A,
};

struct MadHeader {
  std::uint8_t base_version = kMadBaseVersion;
  std::uint8_t mgmt_class = kMgmtClassCm;
  std::uint8_t class_version = kCmClassVersion;
  std::uint8_t method = kMadMethodSend;
  std::uint16_t status = 0;
  std::uint16_t class_specific = 0;
  std::uint64_t tid = 0;
  std::uint16_t attr_id = 0;
  std::uint32_t attr_mod = 0;
};

using Gid16 = std::array<std::uint8_t, 16>;

// Private data sizes of each message (bytes).
inline constexpr std::size_t kReqPrivate = 92, kMraPrivate = 222, kRejPrivate = 148,
                             kRepPrivate = 196, kRtuPrivate = 224, kDreqPrivate = 220,
                             kDrepPrivate = 224, kSidrReqPrivate = 216, kSidrRepPrivate = 136,
                             kRejAri = 72;

struct CmPath {
  std::uint16_t local_lid = 0xFFFF, remote_lid = 0xFFFF;  // permissive on RoCE
  Gid16 local_gid{}, remote_gid{};
  std::uint32_t flow_label = 0;
  std::uint8_t packet_rate = 0;
  std::uint8_t traffic_class = 0;
  std::uint8_t hop_limit = 0;
  std::uint8_t sl = 0;
  bool subnet_local = false;
  std::uint8_t local_ack_timeout = 0;  // 5 bits
  static CmPath none() {
    CmPath p;
    p.local_lid = p.remote_lid = 0;
    return p;
  }
};

struct CmReq {
  std::uint32_t local_comm_id = 0;
  std::uint64_t service_id = 0;
  std::uint64_t local_ca_guid = 0;
  std::uint32_t local_qkey = 0;
  std::uint32_t local_qpn = 0;  // 24 bits
  std::uint8_t responder_resources = 0;
  std::uint32_t local_eecn = 0;
  std::uint8_t initiator_depth = 0;
  std::uint32_t remote_eecn = 0;
  std::uint8_t remote_cm_response_timeout = 0;  // 5 bits
  std::uint8_t transport_service_type = 0;      // 2 bits: 0 RC, 1 UC, 3 XRC
  bool end_to_end_flow_control = false;
  std::uint32_t starting_psn = 0;              // 24 bits
  std::uint8_t local_cm_response_timeout = 0;  // 5 bits
  std::uint8_t retry_count = 0;                // 3 bits
  std::uint16_t pkey = 0xFFFF;
  std::uint8_t path_mtu = 0;  // 4 bits, IB MTU enum
  bool rdc_exists = false;
  std::uint8_t rnr_retry_count = 0;  // 3 bits
  std::uint8_t max_cm_retries = 0;   // 4 bits
  bool srq = false;
  std::uint8_t extended_transport_type = 0;  // 3 bits
  CmPath primary;
  CmPath alternate = CmPath::none();  // all zero when absent
  std::array<std::uint8_t, kReqPrivate> private_data{};
};

struct CmMra {
  std::uint32_t local_comm_id = 0, remote_comm_id = 0;
  std::uint8_t message_mraed = 0;    // 2 bits: 0 REQ, 1 REP, 2 LAP
  std::uint8_t service_timeout = 0;  // 5 bits
  std::array<std::uint8_t, kMraPrivate> private_data{};
};

struct CmRej {
  std::uint32_t local_comm_id = 0, remote_comm_id = 0;
  std::uint8_t message_rejected = 0;  // 2 bits: 0 REQ, 1 REP, 2 other
  std::uint8_t ari_length = 0;        // 7 bits
  std::uint16_t reason = 0;
  std::array<std::uint8_t, kRejAri> ari{};
  std::array<std::uint8_t, kRejPrivate> private_data{};
};

// REJ reasons used here (IBTA Table 112).
namespace rej_reason {
inline constexpr std::uint16_t kTimeout = 1, kInvalidServiceId = 8, kStaleConnection = 10,
                               kConsumerDefined = 28;
}

struct CmRep {
  std::uint32_t local_comm_id = 0, remote_comm_id = 0;
  std::uint32_t local_qkey = 0;
  std::uint32_t local_qpn = 0;
  std::uint32_t local_eecn = 0;
  std::uint32_t starting_psn = 0;
  std::uint8_t responder_resources = 0;
  std::uint8_t initiator_depth = 0;
  std::uint8_t target_ack_delay = 0;   // 5 bits
  std::uint8_t failover_accepted = 0;  // 2 bits
  bool end_to_end_flow_control = false;
  std::uint8_t rnr_retry_count = 0;  // 3 bits
  bool srq = false;
  std::uint64_t local_ca_guid = 0;
  std::array<std::uint8_t, kRepPrivate> private_data{};
};

struct CmRtu {
  std::uint32_t local_comm_id = 0, remote_comm_id = 0;
  std::array<std::uint8_t, kRtuPrivate> private_data{};
};

struct CmDreq {
  std::uint32_t local_comm_id = 0, remote_comm_id = 0;
  std::uint32_t remote_qpn = 0;
  std::array<std::uint8_t, kDreqPrivate> private_data{};
};

struct CmDrep {
  std::uint32_t local_comm_id = 0, remote_comm_id = 0;
  std::array<std::uint8_t, kDrepPrivate> private_data{};
};

struct CmSidrReq {
  std::uint32_t request_id = 0;
  std::uint16_t pkey = 0xFFFF;
  std::uint64_t service_id = 0;
  std::array<std::uint8_t, kSidrReqPrivate> private_data{};
};

// SIDR_REP status (IBTA Table 121).
namespace sidr_status {
inline constexpr std::uint8_t kSuccess = 0, kUnsupportedServiceId = 1, kRejected = 2, kNoQp = 3,
                              kRedirect = 4, kUnsupportedVersion = 5;
}

struct CmSidrRep {
  std::uint32_t request_id = 0;
  std::uint8_t status = 0;
  std::uint8_t additional_info_length = 0;
  std::uint32_t qpn = 0;
  std::uint64_t service_id = 0;
  std::uint32_t qkey = 0;
  std::array<std::uint8_t, 72> additional_info{};
  std::array<std::uint8_t, kSidrRepPrivate> private_data{};
};

// The header is checked (256 bytes, base version 1); the class is not.
Expected<MadHeader> parse_mad_header(Bytes mad);
void build_mad_header(MutBytes mad, const MadHeader& h);

// The CM messages, for code that handles each of them alike.
#define SOFTRDMA_CM_MESSAGES(X) X(CmReq) X(CmMra) X(CmRej) X(CmRep) X(CmRtu) X(CmDreq) X(CmDrep) X(CmSidrReq) X(CmSidrRep)

// build_cm writes the whole 256-byte MAD (header with the message's attribute ID, method
// Send, class CM version 2); kNoRoom when `mad` is shorter. parse_cm<M> checks the
// header's class and M's attribute and that 256 bytes are present. M is one of the above.
template <class M>
Expected<std::size_t> build_cm(MutBytes mad, std::uint64_t tid, const M& m);
template <class M>
Expected<M> parse_cm(Bytes mad);

// RDMA IP CM service: service IDs are 0x0000000001PPpppp (PP the port space, pppp the
// port), and REQ/SIDR_REQ private data starts with this 36-byte header.
inline constexpr std::uint64_t kIpCmServiceBase = 0x0000000001000000ULL;
inline constexpr std::uint64_t ip_cm_service_id(std::uint16_t port_space, std::uint16_t port) {
  return (static_cast<std::uint64_t>(port_space) << 16) | port;
}
inline constexpr bool is_ip_cm_service(std::uint64_t sid) {
  return (sid & 0xFFFFFFFFFF000000ULL) == kIpCmServiceBase;
}

struct IpCmHeader {
  std::uint8_t cma_version = 0;
  std::uint8_t ip_version = 4;  // 4 or 6 (high nibble of byte 1)
  std::uint16_t src_port = 0;
  Gid16 src_addr{};  // IPv4 in the last four bytes
  Gid16 dst_addr{};
};
inline constexpr std::size_t kIpCmHeaderSize = 36;
Expected<IpCmHeader> parse_ip_cm_header(Bytes in);  // kBadVersion for cma_version != 0 or ip 4/6
Expected<std::size_t> build_ip_cm_header(MutBytes out, const IpCmHeader& h);

}  // namespace softrdma::wire
