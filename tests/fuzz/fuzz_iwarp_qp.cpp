// Fuzz target: an iWARP QP (iwarp/) on a live loopback TCP connection whose other end the input
// plays: as the passive peer (the QP sent an MPA request; the input is the reply and whatever
// follows: RTR, FPDUs, TERMINATE) or as the initiator (the input is the MPA request and what
// follows; the QP reads it, accepts and goes on). The peer then closes its side, so the QP must
// settle — connected or refused, then disconnected or fatal — and never hang. Its memory region
// sits between guard bytes that must stay untouched. The 4 bytes DE AD BE EF anywhere in the input
// stand for the region's STag (the key is not predictable); it starts at iova 0x100000.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "iwarp/device.h"
#include "tests/result_slots.h"
#include "tests/tcp_pair.h"

namespace {
using namespace softrdma;
using namespace softrdma::iwarp;
using namespace std::chrono_literals;

constexpr std::size_t kGuard = 4096, kRegion = 64 * 1024;
constexpr std::uint64_t kIova = 0x100000;
constexpr std::uint8_t kGuardByte = 0xA5;

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "fuzz_iwarp_qp: %s\n", what);
  std::abort();
}

// What the device reports, from its progress thread.
struct Inbox : softrdma::test::ResultSlots {
  std::optional<ConnectResult> connect;
  std::optional<RequestResult> request;
  std::optional<int> accept;
  bool ended = false;  // disconnected or fatal
  template <class Pred>
  void wait(Pred pred) {
    std::unique_lock lock(mu);
    if (!cv.wait_for(lock, 10s, pred)) fail("the QP did not settle after the peer closed");
  }
};

struct World {
  std::vector<std::uint8_t> mem = std::vector<std::uint8_t>(kGuard + kRegion + kGuard, kGuardByte);
  Device dev;
  Pd* pd = dev.alloc_pd();
  Cq* cq = nullptr;
  std::shared_ptr<core::Mr> mr;
  World() {
    int err = 0;
    cq = dev.create_cq(4096, &err);
    mr = dev.reg_mr(pd, mem.data() + kGuard, kRegion, kIova,
                    core::kAccessLocalWrite | core::kAccessRemoteWrite | core::kAccessRemoteRead,
                    &err);
    if (!cq || !mr) fail("set-up failed");
  }
  bool guards_intact() const {
    const auto ok = [](std::uint8_t b) { return b == kGuardByte; };
    return std::all_of(mem.begin(), mem.begin() + kGuard, ok) &&
           std::all_of(mem.end() - kGuard, mem.end(), ok);
  }
};

void write_all(int fd, const std::vector<std::uint8_t>& b) {
  std::size_t off = 0;
  while (off < b.size()) {
    const ssize_t n = ::send(fd, b.data() + off, b.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return;  // the QP closed: the rest is moot
    off += static_cast<std::size_t>(n);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static World* w = new World();  // never destroyed: its progress thread outlives the inputs
  if (size < 1) return 0;
  const std::uint8_t mode = data[0];
  std::vector<std::uint8_t> stream(data + 1, data + size);
  const std::uint32_t stag = htonl(w->mr->rkey);
  for (std::size_t i = 0; i + 4 <= stream.size(); ++i) {
    if (stream[i] == 0xDE && stream[i + 1] == 0xAD && stream[i + 2] == 0xBE &&
        stream[i + 3] == 0xEF) {
      std::memcpy(&stream[i], &stag, 4);
    }
  }
  MpaParams p;
  p.revision = mode & 0x20 ? 1 : 2;
  p.crc = mode & 2;
  p.markers = mode & 4;
  p.rtr = p.revision == 1 ? RtrType::kNone : static_cast<RtrType>((mode >> 3) & 3);
  p.timeout = 2s;
  const bool active = mode & 1;

  const softrdma::test::TcpPair tcp;
  if (tcp.server < 0) fail("no loopback TCP connection");
  const int client = tcp.client, server = tcp.server;
  core::QpCap cap;
  cap.max_send_wr = 16;
  cap.max_recv_wr = 16;
  cap.max_send_sge = 1;
  cap.max_recv_sge = 1;
  int err = 0;
  Qp* qp = w->dev.create_qp(w->pd, core::QpType::kRc, w->cq, w->cq, nullptr, cap, false, &err);
  if (!qp) fail("create_qp failed");
  // Shared with the callbacks: the device may run one collected before destroy_qp after it (as
  // verbs/iwarp_cm.cpp allows for with its hooks).
  auto inbox = std::make_shared<Inbox>();
  Inbox& in = *inbox;
  qp->set_event_handler([inbox](const QpEvent& e) {
    if (e.kind == QpEvent::Kind::kEstablished) return;
    std::lock_guard lock(inbox->mu);
    inbox->ended = true;
    inbox->cv.notify_all();
  });
  for (std::uint32_t i = 0; i < 4; ++i) {
    const core::Sge s{kIova + i * 4096, 4096, w->mr->lkey};
    core::RecvWr r;
    r.wr_id = i;
    r.sg_list = std::span(&s, 1);
    (void)qp->post_recv(std::span(&r, 1));
  }
  // The peer's end: `peer`; the QP's: `ours` (owned by the QP once connect/accept took it).
  const int peer = active ? server : client, ours = active ? client : server;
  bool qp_owns = false;
  if (active) {
    if (w->dev.connect(qp, ours, p,
                       [inbox](const ConnectResult& r) { inbox->put(inbox->connect, r); }) != 0) {
      fail("connect refused a fresh QP");
    }
    qp_owns = true;
    write_all(peer, stream);
    ::shutdown(peer, SHUT_WR);
    in.wait([&] { return in.connect.has_value(); });
    if (in.connect->kind == ConnectResult::Kind::kAccepted) in.wait([&] { return in.ended; });
  } else {
    write_all(peer, stream);
    ::shutdown(peer, SHUT_WR);
    if (w->dev.read_request(
            ours, 2s, [inbox](const RequestResult& r) { inbox->put(inbox->request, r); }) != 0) {
      fail("read_request refused a socket");
    }
    in.wait([&] { return in.request.has_value(); });
    if (in.request->error == 0) {
      if (w->dev.accept(qp, ours, p, [inbox](int e) { inbox->put(inbox->accept, e); }) == 0) {
        qp_owns = true;
        in.wait([&] { return in.accept.has_value(); });
        if (*in.accept == 0) in.wait([&] { return in.ended; });
      }
    }
  }
  w->dev.destroy_qp(qp);
  if (!qp_owns) ::close(ours);
  ::close(peer);
  core::Wc wc[16];
  while (w->cq->poll(wc) > 0) {
  }
  if (!w->guards_intact()) fail("a write landed outside the registered region");
  return 0;
}
