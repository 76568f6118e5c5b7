// The device and port attributes softroce0 and softiwarp0 share (verbs/provider.h).
#include <cstdio>
#include <cstring>

#include "verbs/provider.h"

namespace softrdma::verbs {

void fill_common_attr(const core::DeviceAttr& r, std::uint64_t node_guid, ibv_device_attr& a) {
  std::memset(&a, 0, sizeof a);
  std::snprintf(a.fw_ver, sizeof a.fw_ver, "0.1.0");
  a.node_guid = htobe64(node_guid);
  a.sys_image_guid = a.node_guid;
  a.max_mr_size = r.max_mr_size;
  a.page_size_cap = r.page_size_cap;
  a.vendor_id = r.vendor_id;
  a.vendor_part_id = r.vendor_part_id;
  a.hw_ver = r.hw_ver;
  a.max_qp = static_cast<int>(r.max_qp);
  a.max_qp_wr = static_cast<int>(r.max_qp_wr);
  a.max_sge = static_cast<int>(r.max_sge);
  a.max_sge_rd = static_cast<int>(r.max_sge_rd);
  a.max_cq = static_cast<int>(r.max_cq);
  a.max_cqe = static_cast<int>(r.max_cqe);
  a.max_mr = static_cast<int>(r.max_mr);
  a.max_pd = static_cast<int>(r.max_pd);
  a.max_qp_rd_atom = static_cast<int>(r.max_qp_rd_atom);
  a.max_qp_init_rd_atom = static_cast<int>(r.max_qp_init_rd_atom);
  a.max_res_rd_atom = static_cast<int>(r.max_res_rd_atom);
  a.max_srq = static_cast<int>(r.max_srq);
  a.max_srq_wr = static_cast<int>(r.max_srq_wr);
  a.max_srq_sge = static_cast<int>(r.max_srq_sge);
  a.phys_port_cnt = 1;
}

void fill_common_port_attr(ibv_port_attr& a) {
  a.state = IBV_PORT_ACTIVE;
  a.max_mtu = IBV_MTU_4096;
  a.max_msg_sz = 1u << 31;
  a.max_vl_num = 1;
  a.active_width = 2;   // 4X
  a.active_speed = 32;  // EDR (25 Gb/s per lane): a nominal figure for a software link
  a.phys_state = 5;     // LinkUp
  a.link_layer = IBV_LINK_LAYER_ETHERNET;
}

}  // namespace softrdma::verbs
