// The CM agent's private parts, shared by its files (agent*.cpp, cm_handlers.cpp,
// mad_senders.cpp, cm_timers.cpp, id_lifetime.cpp, qp_driving.cpp): the process's Agent, the
// IB CM constants, and the helpers those files call. Expects cm::mutex() held, as agent.h.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <functional>
#include <mutex>
#include <random>
#include <utility>
#include <vector>

#include "cm/agent.h"
#include "cm/gsi.h"
#include "cm/liveness.h"

namespace softrdma::cm {

struct Agent {
  bool started = false;
  int start_errno = 0;
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;  // the default PD of ids (rdma_create_qp with a NULL PD)
  Gsi gsi;
  Liveness liveness;
  std::vector<std::pair<wire::Gid16, Clock::time_point>> gone;  // peers that ended, when to act
  int epfd = -1;
  int wake_fd = -1;
  std::vector<CmId*> ids;
  std::mt19937 rng{std::random_device{}()};
  std::uint64_t next_tid = 0;
  std::uint64_t node_guid = 0;
  ibv_device_attr dattr{};
  ibv_port_attr pattr{};
  std::uint64_t drops = 0;
  const Transport* transport = nullptr;  // the device's CM, chosen as the agent starts
  verbs::IwarpCm* iw = nullptr;          // set in iWARP mode
  std::mutex tasks_mu;
  std::vector<std::function<void()>> tasks;
};

// The process's agent (made on first use; a forked child gets a fresh one).
Agent& agent();

constexpr std::uint8_t kRespTimeoutCode = 18;  // 4.096 us * 2^18 = 1.07 s
constexpr int kMaxCmRetries = 3;
constexpr auto kTimewait = std::chrono::milliseconds(1000);

// Counts a MAD dropped and says why (the first few times).
void drop(const char* why);
std::uint32_t random_u32();
// Makes the agent's loop run its tasks and recompute its timers.
void wake();

// MAD senders (mad_senders.cpp). Sends id->last_mad to `to`.
int send_mad(CmId* id, const wire::Gid16& to);
// Sends the MAD in id->last_mad and waits for its answer (retransmitting).
int send_and_wait(CmId* id);

// CM message handlers (cm_handlers.cpp): one received MAD from `src`.
void on_mad(const std::uint8_t* mad, const wire::Gid16& src);

// Timers (cm_timers.cpp). The connection of `id` ended: timewait, then DISCONNECTED.
void disconnected(CmId* id);
// The peer ended the connection of `id` (its DREQ, or its process ended): disconnected() once
// the application has polled the completions its QP already had, at most kDisconnectGrace
// later. On a NIC those completions are in the CQ microseconds after their packets, long
// before a DREQ sent after them is read; here the progress pass that makes them and the
// application that polls them may both have waited for the CPU (docs/rdma-cm.md).
void peer_disconnected(CmId* id);
// Retransmits, times out and ends timewaits that are due; ms until the next one is.
int run_timers();

}  // namespace softrdma::cm
