// Verbs-level types of the engine: work requests, completions, QP attributes and
// limits. Numeric values equal libibverbs' (IBTA verbs), so the drop-in library
// converts by copying; tests/rxe/test_abi_values.cpp checks each against verbs.h.
#pragma once

#include <array>
#include <cstdint>
#include <span>

#include "netdev/netdev.h"

namespace softrdma::core {

enum class WcStatus : std::uint8_t {
  kSuccess = 0,
  kLocLenErr = 1,
  kLocQpOpErr = 2,
  kLocEecOpErr = 3,
  kLocProtErr = 4,
  kWrFlushErr = 5,
  kMwBindErr = 6,
  kBadRespErr = 7,
  kLocAccessErr = 8,
  kRemInvReqErr = 9,
  kRemAccessErr = 10,
  kRemOpErr = 11,
  kRetryExcErr = 12,
  kRnrRetryExcErr = 13,
  kLocRddViolErr = 14,
  kRemInvRdReqErr = 15,
  kRemAbortErr = 16,
  kInvEecnErr = 17,
  kInvEecStateErr = 18,
  kFatalErr = 19,
  kRespTimeoutErr = 20,
  kGeneralErr = 21,
};
const char* to_string(WcStatus s);

enum class WcOpcode : std::uint8_t {
  kSend = 0,
  kRdmaWrite = 1,
  kRdmaRead = 2,
  kCompSwap = 3,
  kFetchAdd = 4,
  kBindMw = 5,
  kLocalInv = 6,
  kFlush = 8,        // IBTA 1.5 A19 (rdma-core 45's IBV_WC_FLUSH)
  kAtomicWrite = 9,  // IBTA 1.5 A19 (IBV_WC_ATOMIC_WRITE)
  kRecv = 128,
  kRecvRdmaWithImm = 129,
};

enum WcFlags : std::uint32_t { kWcGrh = 1u << 0, kWcWithImm = 1u << 1, kWcWithInv = 1u << 3 };

enum class WrOpcode : std::uint8_t {
  kRdmaWrite = 0,
  kRdmaWriteWithImm = 1,
  kSend = 2,
  kSendWithImm = 3,
  kRdmaRead = 4,
  kAtomicCmpAndSwp = 5,
  kAtomicFetchAndAdd = 6,
  kLocalInv = 7,
  kBindMw = 8,
  kSendWithInv = 9,
  kTso = 10,
  kFlush = 14,        // IBTA 1.5 A19 (rdma-core 45's IBV_WR_FLUSH)
  kAtomicWrite = 15,  // IBTA 1.5 A19 (IBV_WR_ATOMIC_WRITE)
};

enum SendFlags : std::uint32_t {
  kSendFence = 1u << 0,
  kSendSignaled = 1u << 1,
  kSendSolicited = 1u << 2,
  kSendInline = 1u << 3,
};

enum Access : std::uint32_t {
  kAccessLocalWrite = 1u << 0,
  kAccessRemoteWrite = 1u << 1,
  kAccessRemoteRead = 1u << 2,
  kAccessRemoteAtomic = 1u << 3,
  kAccessMwBind = 1u << 4,
  kAccessZeroBased = 1u << 5,
  kAccessFlushGlobal = 1u << 8,      // FLUSH to global visibility may target it (IBTA 1.5 A19)
  kAccessFlushPersistent = 1u << 9,  // FLUSH to persistence may target it
};

// Two P_Keys match when their low 15 bits are equal (and not 0) and at least one of them is a
// full member (the high bit), IBTA 10.9.3.
inline bool pkey_match(std::uint16_t a, std::uint16_t b) {
  return (a & 0x7FFF) != 0 && (a & 0x7FFF) == (b & 0x7FFF) && ((a | b) & 0x8000);
}

// Memory window types (ibv_mw_type). Type 1 is bound by ibv_bind_mw and stays bound until bound
// again; type 2 is bound by a BIND_MW work request to one QP and freed by invalidation.
enum class MwType : std::uint8_t { k1 = 1, k2 = 2 };

// The values are libibverbs' (IBV_QPT_*): XRC initiator (send) and target (receive) QPs.
enum class QpType : std::uint8_t { kRc = 2, kUc = 3, kUd = 4, kXrcSend = 9, kXrcRecv = 10 };
enum class QpState : std::uint8_t { kReset = 0, kInit, kRtr, kRts, kSqd, kSqe, kErr };
const char* to_string(QpState s);

enum QpAttrMask : std::uint32_t {
  kQpState = 1u << 0,
  kQpCurState = 1u << 1,
  kQpEnSqdAsyncNotify = 1u << 2,
  kQpAccessFlags = 1u << 3,
  kQpPkeyIndex = 1u << 4,
  kQpPort = 1u << 5,
  kQpQkey = 1u << 6,
  kQpAv = 1u << 7,
  kQpPathMtu = 1u << 8,
  kQpTimeout = 1u << 9,
  kQpRetryCnt = 1u << 10,
  kQpRnrRetry = 1u << 11,
  kQpRqPsn = 1u << 12,
  kQpMaxQpRdAtomic = 1u << 13,
  kQpAltPath = 1u << 14,
  kQpMinRnrTimer = 1u << 15,
  kQpSqPsn = 1u << 16,
  kQpMaxDestRdAtomic = 1u << 17,
  kQpPathMigState = 1u << 18,
  kQpCap = 1u << 19,
  kQpDestQpn = 1u << 20,
  kQpRateLimit = 1u << 25,
};

// IB MTU enumeration (1: 256 … 5: 4096).
enum class Mtu : std::uint8_t { k256 = 1, k512 = 2, k1024 = 3, k2048 = 4, k4096 = 5 };
inline std::uint32_t mtu_bytes(Mtu m) {
  return 128u << static_cast<unsigned>(m);
}
// The largest IB MTU whose packets fit an IP MTU (80 bytes of headers, as rxe).
Mtu mtu_for_ip_mtu(std::uint32_t ip_mtu);

enum class AsyncEventType : std::uint8_t {
  kCqErr = 0,
  kQpFatal = 1,
  kQpReqErr = 2,
  kQpAccessErr = 3,
  kCommEst = 4,
  kSqDrained = 5,
  kPathMig = 6,
  kPathMigErr = 7,
  kDeviceFatal = 8,
  kPortActive = 9,
  kPortErr = 10,
  kLidChange = 11,
  kPkeyChange = 12,
  kSmChange = 13,
  kSrqErr = 14,
  kSrqLimitReached = 15,
  kQpLastWqeReached = 16,
  kClientReregister = 17,
  kGidChange = 18,
};

struct Sge {
  std::uint64_t addr = 0;
  std::uint32_t length = 0;
  std::uint32_t lkey = 0;
};

inline constexpr std::size_t kMaxSge = 32;
inline constexpr std::size_t kMaxInline = 512;

struct SendWr {
  std::uint64_t wr_id = 0;
  WrOpcode opcode = WrOpcode::kSend;
  std::uint32_t send_flags = 0;
  std::uint32_t imm_data = 0;  // host order; also the rkey to invalidate for SEND_WITH_INV
  std::uint32_t invalidate_rkey = 0;
  std::span<const Sge> sg_list;  // read at post time only
  // RDMA
  std::uint64_t remote_addr = 0;
  std::uint32_t rkey = 0;
  // atomics
  std::uint64_t compare_add = 0;
  std::uint64_t swap = 0;
  // FLUSH (its target is remote_addr and rkey): the length of the range, the placement type
  // (wire::flush::kGlobal, kPersistent) and the selectivity level (kRange, kRegion)
  std::uint64_t flush_length = 0;
  std::uint8_t flush_type = 0, flush_level = 0;
  // UD
  std::uint32_t ah = 0;  // address handle id
  std::uint32_t remote_qpn = 0;
  std::uint32_t remote_qkey = 0;
  // XRC: the XRC SRQ at the target that takes the message (the XRCETH)
  std::uint32_t remote_srqn = 0;
  // BIND_MW: the window (its handle), its new key, and the part of a region it opens.
  std::uint32_t mw_handle = 0;
  std::uint32_t mw_rkey = 0;
  std::uint32_t mw_mr_lkey = 0;
  std::uint64_t mw_addr = 0, mw_length = 0;
  std::uint32_t mw_access = 0;
};

struct RecvWr {
  std::uint64_t wr_id = 0;
  std::span<const Sge> sg_list;  // read at post time only
};

struct Wc {
  std::uint64_t wr_id = 0;
  WcStatus status = WcStatus::kSuccess;
  WcOpcode opcode = WcOpcode::kSend;
  std::uint32_t vendor_err = 0;
  std::uint32_t byte_len = 0;
  std::uint32_t imm_data = 0;  // host order (verbs hands it out in network order)
  std::uint32_t invalidated_rkey = 0;
  std::uint32_t qp_num = 0;
  std::uint32_t src_qp = 0;
  std::uint32_t wc_flags = 0;
  std::uint16_t pkey_index = 0;
  std::uint16_t slid = 0;
  std::uint8_t sl = 0;
  std::uint8_t dlid_path_bits = 0;
  std::uint64_t timestamp_ns = 0;  // steady clock when the completion was queued
  std::uint64_t post_ns = 0;       // steady clock when its WR was posted (latency sampling)
};

using Gid = std::array<std::uint8_t, 16>;

// wc.sl of a UD receive, as a RoCE NIC reports it (mlx5's CQE; UCX reads it to tell IPv4 from
// IPv6 in the 40-byte GRH area): bit 3 = the frame carried a UDP header (RoCE v2), bits 2:0 =
// the L3 header, 1 for IPv6 and 2 for IPv4.
inline constexpr std::uint8_t kWcSlRoceV2Ipv6 = 0x8 | 0x1;
inline constexpr std::uint8_t kWcSlRoceV2Ipv4 = 0x8 | 0x2;

// The destination QPN of every multicast datagram (IBTA 9.6.1.2).
inline constexpr std::uint32_t kMulticastQpn = 0xFFFFFF;
// A multicast GID: IPv4-mapped 224.0.0.0/4 (RoCE v2 over IPv4) or ff00::/8.
inline bool is_multicast_gid(const Gid& g) {
  netdev::IpAddr a;
  a.bytes = g;
  return netdev::is_multicast(a);
}

// The address vector: RoCE v2 always carries a GRH (here: the IP header).
struct AhAttr {
  Gid dgid{};
  std::uint8_t sgid_index = 0;
  std::uint8_t hop_limit = 64;
  std::uint8_t traffic_class = 0;
  std::uint32_t flow_label = 0;
  std::uint16_t dlid = 0;  // only to resolve LID-addressed peers (qperf); 0 when unused
  std::uint8_t sl = 0;
  std::uint8_t port_num = 1;
  bool is_global = true;
};

struct QpCap {
  std::uint32_t max_send_wr = 0, max_recv_wr = 0, max_send_sge = 0, max_recv_sge = 0,
                max_inline_data = 0;
};

struct QpAttr {
  QpState qp_state = QpState::kReset;
  QpState cur_qp_state = QpState::kReset;
  Mtu path_mtu = Mtu::k1024;
  std::uint32_t qkey = 0;
  std::uint32_t rq_psn = 0;
  std::uint32_t sq_psn = 0;
  std::uint32_t dest_qp_num = 0;
  std::uint32_t qp_access_flags = 0;
  QpCap cap;
  AhAttr ah_attr;
  std::uint16_t pkey_index = 0;
  bool en_sqd_async_notify = false;
  bool sq_draining = false;
  std::uint8_t max_rd_atomic = 0;
  std::uint8_t max_dest_rd_atomic = 0;
  std::uint8_t min_rnr_timer = 0;
  std::uint8_t port_num = 1;
  std::uint8_t timeout = 0;
  std::uint8_t retry_cnt = 0;
  std::uint8_t rnr_retry = 0;
};

// Honest device limits: what the engine implements.
struct DeviceAttr {
  std::uint64_t max_mr_size = 1ull << 40;
  std::uint64_t page_size_cap = 4096;
  std::uint32_t vendor_id = 0x1AF4;  // see docs: a software device
  std::uint32_t vendor_part_id = 0x5352;
  std::uint32_t hw_ver = 1;
  std::uint32_t max_qp = 1u << 16;
  std::uint32_t max_qp_wr = 1u << 14;
  std::uint32_t max_sge = kMaxSge;
  std::uint32_t max_sge_rd = kMaxSge;
  std::uint32_t max_cq = 1u << 14;
  std::uint32_t max_cqe = (1u << 20) - 1;
  std::uint32_t max_mr = 1u << 18;
  std::uint32_t max_mw = 1u << 16;
  std::uint32_t max_pd = 1u << 16;
  std::uint32_t max_qp_rd_atom = 128;
  std::uint32_t max_qp_init_rd_atom = 128;
  std::uint32_t max_res_rd_atom = 128u << 16;
  std::uint32_t max_srq = 1u << 14;
  std::uint32_t max_srq_wr = 1u << 14;
  std::uint32_t max_srq_sge = kMaxSge;
  std::uint32_t max_ah = 1u << 16;
  // UD multicast: groups a device joins, QPs attached to one group, attachments in all.
  std::uint32_t max_mcast_grp = 256;
  std::uint32_t max_mcast_qp_attach = 64;
  std::uint32_t max_total_mcast_qp_attach = 256 * 64;
  std::uint32_t max_inline_data = kMaxInline;
  std::uint16_t max_pkeys = 64;  // the largest P_Key table --pkeys takes
  std::uint8_t local_ca_ack_delay = 15;
  bool atomic_glob = true;  // atomics are atomic across all QPs of the device
};

struct PortAttr {
  bool active = true;
  Mtu max_mtu = Mtu::k4096;
  Mtu active_mtu = Mtu::k1024;
  std::uint32_t gid_tbl_len = 0;
  std::uint16_t lid = 0;
};

}  // namespace softrdma::core
