// The IB CM MAD senders: REQ, REP, RTU, REJ, DREQ, SIDR_REQ and SIDR_REP built from an id's
// state, sent on the GSI QP, with retransmission armed for those that wait for an answer.
#include <arpa/inet.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <span>
#include <thread>

#include "cm/agent_internal.h"

namespace softrdma::cm {
namespace {

// Copies up to `room` bytes of the caller's private data (which may be absent).
void put_private(std::uint8_t* dst, const std::uint8_t* pdata, std::size_t len, std::size_t room) {
  if (pdata && len) std::memcpy(dst, pdata, std::min(len, room));
}

// A REQ's or SIDR_REQ's private data: the IP CM header (the id's addresses and source
// port), then as much of the caller's private data as fits.
void put_request_private(CmId* id, std::span<std::uint8_t> out, const std::uint8_t* pdata,
                         std::size_t len) {
  wire::IpCmHeader h;
  h.ip_version = id->id.route.addr.dst_addr.sa_family == AF_INET6 ? 6 : 4;
  h.src_port = ntohs(rdma_get_src_port(&id->id));
  h.src_addr = gid_of(&id->id.route.addr.src_addr);
  h.dst_addr = gid_of(&id->id.route.addr.dst_addr);
  if (h.ip_version == 4) {  // the IPv4 form keeps the address in the last four bytes only
    h.src_addr[10] = h.src_addr[11] = 0;
    h.dst_addr[10] = h.dst_addr[11] = 0;
  }
  wire::build_ip_cm_header(out, h);
  put_private(out.data() + wire::kIpCmHeaderSize, pdata, len, out.size() - wire::kIpCmHeaderSize);
}

std::uint64_t new_tid() {
  return ++agent().next_tid;
}

}  // namespace

int send_mad(CmId* id, const wire::Gid16& to) {
  return agent().gsi.send(to, id->last_mad.data(), id->tos);
}

// Sends the MAD in id->last_mad and waits for its answer (retransmitting).
int send_and_wait(CmId* id) {
  id->waiting = true;
  id->retries_left = kMaxCmRetries;
  id->deadline = Clock::now() + id->resp_timeout;
  wake();
  return send_mad(id, id->peer_gid);
}

void flush_sends() {
  auto& a = agent();
  const auto until = Clock::now() + std::chrono::milliseconds(200);
  while (a.gsi.sends_pending() > 0 && Clock::now() < until) {
    a.gsi.poll(on_mad);
    if (a.gsi.sends_pending() > 0) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

int send_req(CmId* id, const std::uint8_t* pdata, std::size_t len) {
  auto& a = agent();
  wire::CmReq m;
  id->local_comm_id = random_u32();
  id->local_psn = random_u32() & 0xFFFFFF;
  id->tid = new_tid();
  m.local_comm_id = id->local_comm_id;
  m.service_id = wire::ip_cm_service_id(static_cast<std::uint16_t>(id->id.ps),
                                        ntohs(rdma_get_dst_port(&id->id)));
  m.local_ca_guid = a.node_guid;
  m.local_qpn = id->id.qp ? id->id.qp->qp_num : id->qp_num;
  id->conn_qpn = m.local_qpn;
  m.responder_resources = id->responder_resources;
  m.initiator_depth = id->initiator_depth;
  m.remote_cm_response_timeout = kRespTimeoutCode;
  // RC 0, UC 1; XRC is 3 with extended transport type 1 (IBTA 12.6.5, annex A14).
  if (id->id.qp_type == IBV_QPT_UC) m.transport_service_type = 1;
  if (id->id.qp_type == IBV_QPT_XRC_SEND) {
    m.transport_service_type = 3;
    m.extended_transport_type = 1;
  }
  m.starting_psn = id->local_psn;
  m.local_cm_response_timeout = kRespTimeoutCode;
  m.retry_count = id->retry_count & 7;
  m.path_mtu = id->path_mtu;
  m.pkey = cm_partition();  // the partition of the connection, which the MADs travel on too
  m.rnr_retry_count = id->rnr_retry_count & 7;
  m.max_cm_retries = kMaxCmRetries;
  m.srq = id->id.qp ? id->id.qp->srq != nullptr : id->srq;
  m.primary.local_gid = a.gsi.gid();
  m.primary.remote_gid = id->peer_gid;
  m.primary.traffic_class = id->tos;
  m.primary.hop_limit = 64;
  m.primary.packet_rate = 0x10;  // 100 Gb/s-class, informational
  m.primary.subnet_local = true;
  m.primary.local_ack_timeout = id->ack_timeout;
  put_request_private(id, m.private_data, pdata, len);
  wire::build_cm(id->last_mad, id->tid, m);
  id->state = State::kReqSent;
  return send_and_wait(id);
}

int send_rep(CmId* id, const std::uint8_t* pdata, std::size_t len) {
  auto& a = agent();
  wire::CmRep m;
  m.local_comm_id = id->local_comm_id;
  m.remote_comm_id = id->remote_comm_id;
  m.local_qpn = id->id.qp ? id->id.qp->qp_num : id->qp_num;
  id->conn_qpn = m.local_qpn;
  m.starting_psn = id->local_psn;
  m.responder_resources = id->responder_resources;
  m.initiator_depth = id->initiator_depth;
  m.rnr_retry_count = id->rnr_retry_count & 7;
  m.srq = id->id.qp ? id->id.qp->srq != nullptr : id->srq;
  m.local_ca_guid = a.node_guid;
  put_private(m.private_data.data(), pdata, len, wire::kRepPrivate);
  wire::build_cm(id->last_mad, id->tid, m);
  id->state = State::kRepSent;
  a.liveness.watch(id->peer_gid);
  id->answer_sent = true;
  return send_and_wait(id);
}

int send_rtu(CmId* id) {
  wire::CmRtu m;
  m.local_comm_id = id->local_comm_id;
  m.remote_comm_id = id->remote_comm_id;
  wire::build_cm(id->last_mad, id->tid, m);
  id->answer_sent = true;
  return send_mad(id, id->peer_gid);
}

int send_rej(CmId* id, std::uint16_t reason, const std::uint8_t* pdata, std::size_t len) {
  wire::CmRej m;
  m.local_comm_id = id->local_comm_id;
  m.remote_comm_id = id->remote_comm_id;
  m.message_rejected = id->state == State::kReqRcvd ? 0 : 1;
  m.reason = reason;
  put_private(m.private_data.data(), pdata, len, wire::kRejPrivate);
  std::array<std::uint8_t, wire::kMadSize> mad;
  wire::build_cm(mad, id->tid, m);
  return agent().gsi.send(id->peer_gid, mad.data(), id->tos);
}

int send_dreq(CmId* id) {
  wire::CmDreq m;
  m.local_comm_id = id->local_comm_id;
  m.remote_comm_id = id->remote_comm_id;
  m.remote_qpn = id->remote_qpn;
  id->tid = new_tid();
  wire::build_cm(id->last_mad, id->tid, m);
  id->state = State::kDreqSent;
  return send_and_wait(id);
}

int send_sidr_req(CmId* id, const std::uint8_t* pdata, std::size_t len) {
  wire::CmSidrReq m;
  id->local_comm_id = random_u32();
  id->tid = new_tid();
  m.request_id = id->local_comm_id;
  m.service_id = wire::ip_cm_service_id(static_cast<std::uint16_t>(id->id.ps),
                                        ntohs(rdma_get_dst_port(&id->id)));
  put_request_private(id, m.private_data, pdata, len);
  wire::build_cm(id->last_mad, id->tid, m);
  id->state = State::kSidrReqSent;
  return send_and_wait(id);
}

int send_sidr_rep(CmId* id, std::uint8_t status, const std::uint8_t* pdata, std::size_t len) {
  wire::CmSidrRep m;
  m.request_id = id->remote_comm_id;
  m.status = status;
  m.qpn = id->id.qp ? id->id.qp->qp_num : id->qp_num;
  m.qkey = RDMA_UDP_QKEY;
  m.service_id = wire::ip_cm_service_id(static_cast<std::uint16_t>(id->id.ps),
                                        ntohs(rdma_get_src_port(&id->id)));
  put_private(m.private_data.data(), pdata, len, wire::kSidrRepPrivate);
  wire::build_cm(id->last_mad, id->tid, m);
  id->answer_sent = true;
  id->state = status == wire::sidr_status::kSuccess ? State::kEstablished : State::kClosed;
  return send_mad(id, id->peer_gid);
}

}  // namespace softrdma::cm
