// Test harness for the iWARP transport: two devices, a loopback TCP connection made by the
// test itself (standing in for the CM), MPA negotiation through the device's connect /
// read_request / accept, and helpers to post work and wait for completions and events.
#pragma once

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "iwarp/device.h"
#include "tests/result_slots.h"
#include "tests/tcp_pair.h"
#include "tests/wait_until.h"

namespace softrdma::iwarp::test {

using softrdma::test::TcpPair;
using softrdma::test::wait_until;

using namespace std::chrono_literals;

// Events and callbacks land here from the progress threads.
struct Inbox : softrdma::test::ResultSlots {
  std::vector<QpEvent> events;
  std::optional<ConnectResult> connect;
  std::optional<RequestResult> request;
  std::optional<int> accept;

  // Callbacks for the device's connect, read_request and accept: they store the result here.
  auto on_connect() {
    return [this](const ConnectResult& r) { put(connect, r); };
  }
  auto on_request() {
    return [this](const RequestResult& r) { put(request, r); };
  }
  auto on_accept() {
    return [this](int e) { put(accept, e); };
  }
  template <class Pred>
  bool wait(Pred pred, std::chrono::milliseconds t = 10s) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, t, [&] { return pred(); });
  }
  bool has(QpEvent::Kind k) {
    for (auto& e : events) {
      if (e.kind == k) return true;
    }
    return false;
  }
  std::optional<QpEvent> find(QpEvent::Kind k) {
    std::lock_guard lock(mu);
    for (auto& e : events) {
      if (e.kind == k) return e;
    }
    return std::nullopt;
  }
  bool wait_event(QpEvent::Kind k, std::chrono::milliseconds t = 10s) {
    return wait([&] { return has(k); }, t);
  }
};

// Members in this order: the device (and its progress thread) goes first, before the memory
// and the inbox it writes to.
struct Side {
  Inbox inbox;
  std::vector<std::uint8_t> buf;
  std::shared_ptr<core::Mr> mr;
  std::unique_ptr<Device> dev;
  Pd* pd = nullptr;
  Cq* scq = nullptr;
  Cq* rcq = nullptr;
  Qp* qp = nullptr;

  void init(DeviceConfig cfg, std::size_t bytes = 8u << 20, std::uint32_t access = 0xF & ~8u) {
    dev = std::make_unique<Device>(std::move(cfg));
    pd = dev->alloc_pd();
    int err = 0;
    scq = dev->create_cq(4096, &err);
    rcq = dev->create_cq(4096, &err);
    core::QpCap cap;
    cap.max_send_wr = 1024;
    cap.max_recv_wr = 1024;
    cap.max_send_sge = 4;
    cap.max_recv_sge = 4;
    qp = dev->create_qp(pd, core::QpType::kRc, scq, rcq, nullptr, cap, false, &err);
    buf.assign(bytes, 0);
    mr = dev->reg_mr(pd, buf.data(), buf.size(), reinterpret_cast<std::uintptr_t>(buf.data()),
                     access, &err);
    qp->set_event_handler([this](const QpEvent& e) {
      std::lock_guard lock(inbox.mu);
      inbox.events.push_back(e);
      inbox.cv.notify_all();
    });
  }
  std::uint64_t addr(std::size_t off = 0) const {
    return reinterpret_cast<std::uintptr_t>(buf.data()) + off;
  }
  core::Sge sge(std::size_t off, std::uint32_t len) const { return {addr(off), len, mr->lkey}; }

  int post_recv(std::uint64_t wr_id, std::size_t off, std::uint32_t len) {
    core::Sge s = sge(off, len);
    core::RecvWr wr;
    wr.wr_id = wr_id;
    wr.sg_list = std::span<const core::Sge>(&s, 1);
    return qp->post_recv(std::span<const core::RecvWr>(&wr, 1));
  }
  int post(core::WrOpcode op, std::uint64_t wr_id, std::size_t off, std::uint32_t len,
           std::uint64_t raddr = 0, std::uint32_t rkey = 0,
           std::uint32_t flags = core::kSendSignaled, std::uint32_t inv = 0) {
    core::Sge s = sge(off, len);
    core::SendWr wr;
    wr.wr_id = wr_id;
    wr.opcode = op;
    wr.send_flags = flags;
    wr.sg_list = std::span<const core::Sge>(&s, 1);
    wr.remote_addr = raddr;
    wr.rkey = rkey;
    wr.invalidate_rkey = inv;
    return qp->post_send(std::span<const core::SendWr>(&wr, 1));
  }
  // Waits for one completion on `cq`.
  std::optional<core::Wc> wait_wc(Cq* cq, std::chrono::milliseconds t = 10s) {
    core::Wc wc;
    const bool got = wait_until(
        [&] {
          if (cq->poll(std::span<core::Wc>(&wc, 1)) == 1) return true;
          dev->poll_progress();
          return false;
        },
        t, 50us);
    if (got) return wc;
    return std::nullopt;
  }
};

// Connects a (active) to b (passive) over a fresh loopback connection.
inline bool connect_pair(Side& a, Side& b, const MpaParams& pa, const MpaParams& pb, TcpPair& tcp) {
  if (tcp.client < 0 || tcp.server < 0) return false;
  if (b.dev->read_request(tcp.server, 5s, b.inbox.on_request()) != 0) {
    return false;
  }
  if (a.dev->connect(a.qp, tcp.client, pa, a.inbox.on_connect()) != 0) {
    return false;
  }
  if (!b.inbox.wait([&] { return b.inbox.request.has_value(); })) return false;
  if (b.inbox.request->error != 0) return false;
  if (b.dev->accept(b.qp, tcp.server, pb, b.inbox.on_accept()) != 0) {
    return false;
  }
  if (!a.inbox.wait([&] { return a.inbox.connect.has_value(); })) return false;
  if (a.inbox.connect->kind != ConnectResult::Kind::kAccepted) return false;
  if (!b.inbox.wait([&] { return b.inbox.accept.has_value(); })) return false;
  return *b.inbox.accept == 0;
}

inline void fill(std::vector<std::uint8_t>& v, std::size_t off, std::size_t n, std::uint8_t seed) {
  for (std::size_t i = 0; i < n; ++i)
    v[off + i] = static_cast<std::uint8_t>(seed + i * 13 + (i >> 9));
}

}  // namespace softrdma::iwarp::test
