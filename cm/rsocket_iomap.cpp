// riomap, riounmap and riowrite: windows of ours the peer may RDMA-WRITE into (announced by
// a control message), and RDMA WRITEs into the peer's.
#include <rdma/rsocket.h>
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "cm/rsocket_internal.h"

using namespace softrdma::cm::rsockets;

extern "C" {

off_t riomap(int socket, void* buf, size_t len, int prot, int flags, off_t offset) {
  (void)flags;
  S s(socket);
  if (!s) return -1;
  if (!s->connected) return fail(ENOTCONN);
  if (!(prot & PROT_WRITE) || offset < 0) return fail(EINVAL);  // offset -1 (pick one): not done
  Window w{offset, reinterpret_cast<std::uintptr_t>(buf), 0, len};
  w.mr = ibv_reg_mr(s->pd, buf, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (!w.mr) return -1;
  w.rkey = w.mr->rkey;
  w.buf = buf;
  s->my_windows.push_back(w);
  std::uint8_t wire[softrdma::cm::rs::kWindowBytes];
  softrdma::cm::rs::encode_window({offset, w.addr, w.rkey, w.len}, wire);
  const bool nb = s->nonblocking;
  s->nonblocking = false;
  const int rc = send_message(s, wire, sizeof wire, true, kCtrlIomap);
  s->nonblocking = nb;
  if (rc) return fail(rc);
  return offset;
}

int riounmap(int socket, void* buf, size_t len) {
  S s(socket);
  if (!s) return -1;
  auto it = std::find_if(s->my_windows.begin(), s->my_windows.end(),
                         [&](const Window& w) { return w.buf == buf && w.len == len; });
  if (it == s->my_windows.end()) return fail(EINVAL);
  ibv_dereg_mr(it->mr);
  s->my_windows.erase(it);
  return 0;
}

size_t riowrite(int socket, const void* buf, size_t count, off_t offset, int flags) {
  S s(socket);
  if (!s) return 0;
  if (!s->connected) return errno = ENOTCONN, 0;
  drain(s);  // the peer's windows arrive as control messages
  std::uint64_t remote = 0;
  const auto win = std::find_if(
      s->peer_windows.begin(), s->peer_windows.end(),
      [&](const softrdma::cm::rs::Window& w) { return window_covers(w, offset, count, remote); });
  if (win == s->peer_windows.end()) return errno = EINVAL, 0;
  const bool nb = s->nonblocking || (flags & MSG_DONTWAIT);
  std::size_t done = 0;
  const auto* in = static_cast<const std::uint8_t*>(buf);
  while (done < count) {
    if (!wait_for(
            s, [&] { return s->broken || !s->free_sslots.empty(); }, nb && done == 0 ? 0 : -1)) {
      break;
    }
    if (s->broken) return done ? done : (errno = s->error ? s->error : ECONNRESET, 0);
    const int slot = s->free_sslots.back();
    s->free_sslots.pop_back();
    const auto n = static_cast<std::uint32_t>(std::min<std::size_t>(count - done, kSlotSize));
    std::memcpy(s->sbuf.data() + std::size_t(slot) * kSlotSize, in + done, n);
    ibv_sge sge{reinterpret_cast<std::uintptr_t>(s->sbuf.data() + std::size_t(slot) * kSlotSize), n,
                s->smr->lkey};
    ibv_send_wr wr{};
    wr.wr_id = kSendTag | static_cast<std::uint64_t>(slot);
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.wr.rdma.remote_addr = remote + done;
    wr.wr.rdma.rkey = win->rkey;
    ibv_send_wr* bad = nullptr;
    if (ibv_post_send(s->qp, &wr, &bad) != 0) break;
    s->outstanding++;
    done += n;
  }
  if (done == 0) errno = EAGAIN;
  return done;
}
}  // extern "C"
