// rsockets' flow control and data path: completions taken, credits told and counted, and
// messages sent within them.
#include <endian.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "cm/rsocket_internal.h"

namespace softrdma::cm::rsockets {

void tell_credits(RSocket* s) {
  if (!s->connected || s->broken || s->eof || s->closing || s->reposted == s->reposted_told) {
    return;
  }
  s->credit_word[1] = s->reposted;
  ibv_sge sge{reinterpret_cast<std::uintptr_t>(&s->credit_word[1]), 8, s->cmr->lkey};
  ibv_send_wr wr{};
  wr.wr_id = kCreditWr;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.send_flags = IBV_SEND_INLINE;
  wr.wr.rdma.remote_addr = s->peer_credit_addr;
  wr.wr.rdma.rkey = s->peer_credit_rkey;
  ibv_send_wr* bad = nullptr;
  if (ibv_post_send(s->qp, &wr, &bad) == 0) {
    s->outstanding++;
    s->reposted_told = s->reposted;
  }
}

// Takes every completion waiting on the socket's CQ.
void drain(RSocket* s) {
  if (!s->cq) return;
  ibv_cq* ev_cq;
  void* ev_ctx;
  while (ibv_get_cq_event(s->ch, &ev_cq, &ev_ctx) == 0) ibv_ack_cq_events(ev_cq, 1);
  ibv_req_notify_cq(s->cq, 0);
  ibv_wc wc[32];
  int n;
  while ((n = ibv_poll_cq(s->cq, 32, wc)) > 0) {
    for (int i = 0; i < n; ++i) {
      const ibv_wc& w = wc[i];
      const bool is_send = w.wr_id >= kSendTag;  // (an error completion's opcode is undefined)
      if (w.status != IBV_WC_SUCCESS) {
        // Receives flushed after the peer ended its stream (its disconnect moved the QP to
        // the error state): expected, and the data before the end is still to be read.
        if (!is_send && s->eof && w.status == IBV_WC_WR_FLUSH_ERR) continue;
        if (!s->broken && std::getenv("SOFTRDMA_RS_DEBUG")) {
          std::fprintf(stderr, "rsocket %d: %s (wr_id %llx)\n", s->fd, ibv_wc_status_str(w.status),
                       static_cast<unsigned long long>(w.wr_id));
        }
        if (!s->broken) s->error = w.status == IBV_WC_WR_FLUSH_ERR ? ECONNRESET : EIO;
        s->broken = true;
        if (is_send) s->outstanding--;
        continue;
      }
      if (!is_send) {
        const int slot = static_cast<int>(w.wr_id);
        if (w.wc_flags & IBV_WC_WITH_IMM) {  // a control message
          if (be32toh(w.imm_data) == kCtrlClose) {
            s->eof = true;
            s->peer_closed = true;
          } else if (be32toh(w.imm_data) == kCtrlIomap) {
            // A window riomap cannot make (negative offset, end beyond off_t) is ignored.
            if (auto win = softrdma::cm::rs::parse_window(
                    s->rbuf.data() + std::size_t(slot) * kSlotSize, w.byte_len)) {
              s->peer_windows.push_back(*win);
            }
          }
          post_recv(s, slot);
          s->reposted++;
        } else if (w.byte_len == 0) {  // the peer shut its side
          s->eof = true;
          post_recv(s, slot);
          s->reposted++;
        } else {
          s->rx.push_back(Chunk{slot, 0, w.byte_len});
        }
      } else {
        s->outstanding--;
        if (w.wr_id != kCreditWr) s->free_sslots.push_back(static_cast<int>(w.wr_id - kSendTag));
      }
    }
  }
  if (s->reposted - s->reposted_told >= kSlots / 2) tell_credits(s);
}

std::uint64_t credits(RSocket* s) {
  const std::uint64_t peer_reposted = __atomic_load_n(&s->credit_word[0], __ATOMIC_ACQUIRE);
  return softrdma::cm::rs::credits(peer_reposted, s->peer_slots, s->sent_chunks);
}

bool readable(RSocket* s) {
  return !s->rx.empty() || s->eof || s->broken;
}
bool writable(RSocket* s, std::uint64_t reserve) {
  return s->broken || s->peer_closed || (credits(s) > reserve && !s->free_sslots.empty());
}

int post_send(RSocket* s, int slot, std::uint32_t len, bool imm, std::uint32_t imm_value) {
  ibv_sge sge{reinterpret_cast<std::uintptr_t>(s->sbuf.data() + std::size_t(slot) * kSlotSize), len,
              s->smr->lkey};
  ibv_send_wr wr{};
  wr.wr_id = kSendTag | static_cast<std::uint64_t>(slot);
  wr.opcode = imm ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND;
  wr.imm_data = htobe32(imm_value);
  wr.sg_list = &sge;
  wr.num_sge = len ? 1 : 0;
  ibv_send_wr* bad = nullptr;
  int rc = ibv_post_send(s->qp, &wr, &bad);
  if (rc == 0) {
    s->outstanding++;
    s->sent_chunks++;
  }
  return rc;
}
int send_message(RSocket* s, const void* src, std::uint32_t len, bool imm, std::uint32_t v,
                 std::uint64_t reserve) {
  if (!wait_for(
          s, [&] { return writable(s, reserve); }, s->nonblocking ? 0 : -1))
    return EAGAIN;
  if (s->broken) return s->error ? s->error : ECONNRESET;
  if (s->peer_closed || s->closing) return EPIPE;
  const int slot = s->free_sslots.back();
  s->free_sslots.pop_back();
  if (len) std::memcpy(s->sbuf.data() + std::size_t(slot) * kSlotSize, src, len);
  return post_send(s, slot, len, imm, v);
}

int mss(RSocket* s) {
  return s->id && s->id->route.num_paths && s->id->route.path_rec
             ? 1 << (7 + s->id->route.path_rec->mtu)
             : 2048;
}

}  // namespace softrdma::cm::rsockets
