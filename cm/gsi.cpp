#include "cm/gsi.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>

extern "C" ibv_qp* softrdma_create_gsi_qp(ibv_pd* pd, ibv_qp_init_attr* attr);

namespace softrdma::cm {

bool Gsi::open(ibv_context* ctx, std::string& error) {
  ctx_ = ctx;
  // The GID of the device's IP address, as the kernel's rdma_cm takes the GID of the address
  // it resolved: the first RoCE v2 entry that is not IPv6 link-local (softroce0: index 1,
  // ::ffff:a.b.c.d; index 0 is the link-local default GID, see verbs/gid_table.h).
  ibv_port_attr pa{};
  if (ibv_query_port(ctx, 1, &pa) != 0) {
    error = "cannot query the device's port";
    return false;
  }
  bool found = false;
  for (int i = 0; i < pa.gid_tbl_len && !found; ++i) {
    ibv_gid_entry e{};
    if (ibv_query_gid_ex(ctx, 1, static_cast<std::uint32_t>(i), &e, 0) != 0) continue;
    const bool link_local = e.gid.raw[0] == 0xfe && (e.gid.raw[1] & 0xC0) == 0x80;
    if (e.gid_type != IBV_GID_TYPE_ROCE_V2 || link_local) continue;
    std::memcpy(gid_.data(), e.gid.raw, 16);
    sgid_index_ = static_cast<std::uint8_t>(i);
    found = true;
  }
  if (!found) {
    error = "the device has no RoCE v2 GID of an IP address";
    return false;
  }
  pd_ = ibv_alloc_pd(ctx);
  channel_ = pd_ ? ibv_create_comp_channel(ctx) : nullptr;
  cq_ = channel_ ? ibv_create_cq(ctx, 2 * kRecvSlots + 256, nullptr, channel_, 0) : nullptr;
  bufs_ = static_cast<std::uint8_t*>(std::calloc(kRecvSlots, kSlotSize));
  mr_ = (cq_ && bufs_) ? ibv_reg_mr(pd_, bufs_, kRecvSlots * kSlotSize, IBV_ACCESS_LOCAL_WRITE)
                       : nullptr;
  if (!mr_) {
    error = std::string("cannot set up the GSI QP's resources: ") + std::strerror(errno);
    return false;
  }
  ibv_qp_init_attr ia{};
  ia.send_cq = cq_;
  ia.recv_cq = cq_;
  ia.qp_type = IBV_QPT_UD;
  ia.cap.max_send_wr = 256;
  ia.cap.max_recv_wr = kRecvSlots;
  ia.cap.max_send_sge = 1;
  ia.cap.max_recv_sge = 1;
  ia.cap.max_inline_data = wire::kMadSize;
  ia.sq_sig_all = 1;
  qp_ = softrdma_create_gsi_qp(pd_, &ia);
  if (!qp_) {
    error = std::string("cannot create the GSI QP (QP1): ") + std::strerror(errno);
    return false;
  }
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.pkey_index = 0;
  a.port_num = 1;
  a.qkey = wire::kGsiQkey;
  int rc = ibv_modify_qp(qp_, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY);
  a.qp_state = IBV_QPS_RTR;
  if (!rc) rc = ibv_modify_qp(qp_, &a, IBV_QP_STATE);
  a.qp_state = IBV_QPS_RTS;
  a.sq_psn = 0;
  if (!rc) rc = ibv_modify_qp(qp_, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
  if (rc) {
    error = std::string("cannot bring the GSI QP up: ") + std::strerror(rc);
    return false;
  }
  for (int i = 0; i < kRecvSlots; ++i) post_recv(i);
  ibv_req_notify_cq(cq_, 0);
  return true;
}

void Gsi::post_recv(int slot) {
  ibv_sge sge{reinterpret_cast<std::uintptr_t>(bufs_ + slot * kSlotSize),
              static_cast<std::uint32_t>(kSlotSize), mr_->lkey};
  ibv_recv_wr wr{};
  wr.wr_id = static_cast<std::uint64_t>(slot);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  ibv_post_recv(qp_, &wr, &bad);
}

ibv_ah* Gsi::ah_for(const wire::Gid16& dgid, std::uint8_t traffic_class) {
  auto key = std::make_pair(dgid, traffic_class);
  auto it = ahs_.find(key);
  if (it != ahs_.end()) return it->second;
  ibv_ah_attr aa{};
  aa.is_global = 1;
  std::memcpy(aa.grh.dgid.raw, dgid.data(), 16);
  aa.grh.sgid_index = sgid_index_;
  aa.grh.hop_limit = 64;
  aa.grh.traffic_class = traffic_class;
  aa.port_num = 1;
  ibv_ah* ah = ibv_create_ah(pd_, &aa);
  if (ah) ahs_[key] = ah;
  return ah;
}

int Gsi::send(const wire::Gid16& dgid, const std::uint8_t* mad, std::uint8_t traffic_class) {
  ibv_ah* ah = ah_for(dgid, traffic_class);
  if (!ah) return errno ? errno : EINVAL;
  ibv_sge sge{reinterpret_cast<std::uintptr_t>(mad), static_cast<std::uint32_t>(wire::kMadSize), 0};
  ibv_send_wr wr{};
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_INLINE | IBV_SEND_SIGNALED;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.wr.ud.ah = ah;
  wr.wr.ud.remote_qpn = wire::kGsiQpn;
  wr.wr.ud.remote_qkey = wire::kGsiQkey;
  ibv_send_wr* bad = nullptr;
  int rc = ibv_post_send(qp_, &wr, &bad);
  if (rc == 0) ++posted_;
  return rc;
}

void Gsi::poll(const std::function<void(const std::uint8_t*, const wire::Gid16&)>& fn) {
  ibv_cq* ev_cq = nullptr;
  void* ev_ctx = nullptr;
  if (ibv_get_cq_event(channel_, &ev_cq, &ev_ctx) == 0) {
    ibv_ack_cq_events(ev_cq, 1);
  }
  ibv_req_notify_cq(cq_, 0);
  ibv_wc wc[32];
  int n;
  while ((n = ibv_poll_cq(cq_, 32, wc)) > 0) {
    for (int i = 0; i < n; ++i) {
      if (!(wc[i].opcode & IBV_WC_RECV)) {  // a send completion
        ++completed_;
        continue;
      }
      const int slot = static_cast<int>(wc[i].wr_id);
      if (wc[i].status == IBV_WC_SUCCESS && wc[i].byte_len >= 40 + wire::kMadSize) {
        const std::uint8_t* grh = bufs_ + slot * kSlotSize;
        wire::Gid16 src{};
        if ((grh[20] >> 4) == 4) {  // RoCEv2 over IPv4: the IPv4 header sits at offset 20
          src[10] = src[11] = 0xFF;
          std::memcpy(src.data() + 12, grh + 20 + 12, 4);
        } else {
          std::memcpy(src.data(), grh + 8, 16);
        }
        fn(grh + 40, src);
      }
      if (wc[i].status != IBV_WC_WR_FLUSH_ERR) post_recv(slot);
    }
  }
}

}  // namespace softrdma::cm
