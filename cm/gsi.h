// The CM agent's datagram service: the GSI QP (QP1, Q_Key 0x80010000) of the softrdma
// device, sending and receiving 256-byte CM MADs as RoCEv2 UD packets, addressed by GID.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "wire/ib_cm.h"

namespace softrdma::cm {

class Gsi {
 public:
  // Opens QP1 on `ctx` with its own PD and CQ. False and a message on failure.
  bool open(ibv_context* ctx, std::string& error);
  // The fd that becomes readable when MADs or send completions wait.
  int fd() const { return channel_ ? channel_->fd : -1; }
  // Sends one MAD to the CM agent at `dgid` (QP1). Returns 0 or an errno value.
  int send(const wire::Gid16& dgid, const std::uint8_t* mad, std::uint8_t traffic_class);
  // Calls `fn(mad, source GID)` for every MAD received, then re-arms the CQ.
  void poll(const std::function<void(const std::uint8_t*, const wire::Gid16&)>& fn);
  const wire::Gid16& gid() const { return gid_; }
  // The index of gid() in the port's GID table: the sgid_index of everything rdma_cm sends.
  std::uint8_t sgid_index() const { return sgid_index_; }
  // Sends posted whose completion (the datagram has left) has not been polled yet.
  std::uint64_t sends_pending() const { return posted_ - completed_; }
  ibv_pd* pd() const { return pd_; }

 private:
  static constexpr int kRecvSlots = 128;
  static constexpr int kSlotSize = 40 + wire::kMadSize;
  ibv_ah* ah_for(const wire::Gid16& dgid, std::uint8_t traffic_class);
  void post_recv(int slot);
  ibv_context* ctx_ = nullptr;
  ibv_pd* pd_ = nullptr;
  ibv_comp_channel* channel_ = nullptr;
  ibv_cq* cq_ = nullptr;
  ibv_qp* qp_ = nullptr;
  ibv_mr* mr_ = nullptr;
  std::uint8_t* bufs_ = nullptr;
  wire::Gid16 gid_{};
  std::uint8_t sgid_index_ = 0;
  std::uint64_t posted_ = 0, completed_ = 0;
  std::map<std::pair<wire::Gid16, std::uint8_t>, ibv_ah*> ahs_;
};

}  // namespace softrdma::cm
