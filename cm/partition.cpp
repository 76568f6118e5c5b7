// rdma_cm's partition on softroce0: the P_Key at index 0 of the port's table (--pkeys). The
// GSI QP sends the CM MADs at that index, a REQ names it in its Partition Key field (IBTA
// 12.6.5), path records and addresses carry it, and the QPs rdma_cm moves to INIT take the
// table entry that matches it (IBTA 10.9.3), as the kernel's CM and rdma_cm find theirs.
#include <arpa/inet.h>

#include "cm/agent_internal.h"
#include "cm/transport.h"

namespace softrdma::cm {

std::uint16_t cm_partition() {
  __be16 pkey = htons(0xFFFF);
  const Agent& a = agent();
  if (a.ctx && a.transport && a.transport->partitions()) ibv_query_pkey(a.ctx, 1, 0, &pkey);
  return ntohs(pkey);
}

int pkey_index_for(ibv_context* ctx, std::uint16_t pkey) {
  ibv_port_attr pa{};
  if (!ctx || ibv_query_port(ctx, 1, &pa)) return -1;
  for (int i = 0; i < pa.pkey_tbl_len; ++i) {
    __be16 e = 0;
    if (ibv_query_pkey(ctx, 1, i, &e)) return -1;
    const std::uint16_t k = ntohs(e);
    // Low 15 bits equal (not 0), and one side a full member.
    if ((k & 0x7FFF) != 0 && (k & 0x7FFF) == (pkey & 0x7FFF) && ((k | pkey) & 0x8000)) return i;
  }
  return -1;
}

}  // namespace softrdma::cm
