// rsockets' connections: the socket table, and the QP, buffers and hello of a connection
// set up and torn down.
#include <fcntl.h>

#include <cstdlib>

#include "cm/rsocket_internal.h"

namespace softrdma::cm::rsockets {

std::mutex& table_mutex() {
  static auto* m = new std::mutex;  // the table only
  return *m;
}

std::map<int, std::shared_ptr<RSocket>>& table() {
  static auto* t = new std::map<int, std::shared_ptr<RSocket>>;
  return *t;
}

std::shared_ptr<RSocket> find(int fd) {
  std::lock_guard lock(table_mutex());
  auto it = table().find(fd);
  return it == table().end() ? nullptr : it->second;
}

void insert(int fd, std::shared_ptr<RSocket> s) {
  std::lock_guard lock(table_mutex());
  table()[fd] = std::move(s);
}

void post_recv(RSocket* s, int slot) {
  ibv_sge sge{reinterpret_cast<std::uintptr_t>(s->rbuf.data() + std::size_t(slot) * kSlotSize),
              kSlotSize, s->rmr->lkey};
  ibv_recv_wr wr{};
  wr.wr_id = static_cast<std::uint64_t>(slot);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  ibv_post_recv(s->qp, &wr, &bad);
}
bool setup_qp(RSocket* s, rdma_cm_id* id) {
  s->id = id;
  s->pd = ibv_alloc_pd(id->verbs);
  s->ch = s->pd ? ibv_create_comp_channel(id->verbs) : nullptr;
  s->cq = s->ch ? ibv_create_cq(id->verbs, 4 * kSlots + 16, s, s->ch, 0) : nullptr;
  if (!s->cq) return false;
  fcntl(s->ch->fd, F_SETFL, fcntl(s->ch->fd, F_GETFL) | O_NONBLOCK);
  ibv_qp_init_attr a{};
  a.send_cq = a.recv_cq = s->cq;
  a.qp_type = IBV_QPT_RC;
  a.cap.max_send_wr = 2 * kSlots + 8;
  a.cap.max_recv_wr = kSlots;
  a.cap.max_send_sge = a.cap.max_recv_sge = 1;
  a.sq_sig_all = 1;
  if (rdma_create_qp(id, s->pd, &a) != 0) return false;
  s->qp = id->qp;
  s->rbuf.resize(std::size_t(kSlots) * kSlotSize);
  s->sbuf.resize(std::size_t(kSlots) * kSlotSize);
  s->credit_word = static_cast<std::uint64_t*>(std::calloc(2, sizeof(std::uint64_t)));
  s->rmr = ibv_reg_mr(s->pd, s->rbuf.data(), s->rbuf.size(), IBV_ACCESS_LOCAL_WRITE);
  s->smr = ibv_reg_mr(s->pd, s->sbuf.data(), s->sbuf.size(), IBV_ACCESS_LOCAL_WRITE);
  s->cmr = ibv_reg_mr(s->pd, s->credit_word, 2 * sizeof(std::uint64_t),
                      IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (!s->rmr || !s->smr || !s->cmr) return false;
  for (int i = 0; i < kSlots; ++i) {
    post_recv(s, i);
    s->free_sslots.push_back(i);
  }
  ibv_req_notify_cq(s->cq, 0);
  return true;
}
Hello my_hello(RSocket* s) {
  return Hello{reinterpret_cast<std::uintptr_t>(s->credit_word), s->cmr->rkey, kSlots};
}
rdma_conn_param conn_param(const Hello& h) {
  rdma_conn_param p{};
  p.private_data = &h;
  p.private_data_len = sizeof h;
  p.responder_resources = 1;
  p.initiator_depth = 1;
  p.rnr_retry_count = 7;
  return p;
}
void take_hello(RSocket* s, const void* pdata, std::uint8_t len) {
  const auto h = softrdma::cm::rs::parse_hello(pdata, len, kSlots);
  s->peer_credit_addr = h.credit_addr;
  s->peer_credit_rkey = h.credit_rkey;
  s->peer_slots = h.slots;
}

void teardown(RSocket* s) {
  if (s->id) {
    if (s->connected) rdma_disconnect(s->id);
    if (s->qp) rdma_destroy_qp(s->id);
    rdma_destroy_id(s->id);
  }
  for (auto& w : s->my_windows) ibv_dereg_mr(w.mr);
  if (s->rmr) ibv_dereg_mr(s->rmr);
  if (s->smr) ibv_dereg_mr(s->smr);
  if (s->cmr) ibv_dereg_mr(s->cmr);
  if (s->cq) ibv_destroy_cq(s->cq);
  if (s->ch) ibv_destroy_comp_channel(s->ch);
  if (s->pd) ibv_dealloc_pd(s->pd);
  std::free(s->credit_word);
}

}  // namespace softrdma::cm::rsockets
