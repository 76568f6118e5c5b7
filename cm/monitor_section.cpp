#include "cm/monitor_section.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <mutex>
#include <nlohmann/json.hpp>
#include <string>

#include "cm/agent.h"
#include "cm/state.h"
#include "cm/transport.h"

// Exported by softrdma's libibverbs.so.1 (SOFTRDMA_PRIVATE_1, verbs/monitor_api.cpp).
extern "C" void softrdma_monitor_section(const char* name, std::string (*fn)());

namespace softrdma::cm {

namespace {

// Each state's two names: the kernel's rdma_cm state, as `rdma res show cm_id` prints it (an
// established connection is still CONNECT there), and softrdma's finer state of the IB CM exchange.
struct StateNames {
  State state;
  const char* kernel;
  const char* cm;
};
constexpr StateNames kStateNames[] = {
    {State::kIdle, "IDLE", "idle"},
    {State::kBound, "ADDR_BOUND", "bound"},
    {State::kAddrResolved, "ADDR_RESOLVED", "addr-resolved"},
    {State::kRouteResolved, "ROUTE_RESOLVED", "route-resolved"},
    {State::kListen, "LISTEN", "listen"},
    {State::kReqSent, "CONNECT", "req-sent"},
    {State::kRepRcvd, "CONNECT", "rep-rcvd"},
    {State::kReqRcvd, "CONNECT", "req-rcvd"},
    {State::kRepSent, "CONNECT", "rep-sent"},
    {State::kEstablished, "CONNECT", "established"},
    {State::kDreqSent, "DISCONNECT", "dreq-sent"},
    {State::kTimewait, "DISCONNECT", "timewait"},
    {State::kSidrReqSent, "CONNECT", "sidr-req-sent"},
    {State::kSidrReqRcvd, "CONNECT", "sidr-req-rcvd"},
    {State::kClosed, "DISCONNECT", "closed"},
};
constexpr StateNames kUnknownState{State::kIdle, "UNKNOWN", "unknown"};

const StateNames& names_of(State s) {
  for (const StateNames& n : kStateNames) {
    if (n.state == s) return n;
  }
  return kUnknownState;
}

const char* ps_name(rdma_port_space ps) {
  switch (ps) {
    case RDMA_PS_TCP:
      return "TCP";
    case RDMA_PS_UDP:
      return "UDP";
    case RDMA_PS_IB:
      return "IB";
    case RDMA_PS_IPOIB:
      return "IPOIB";
  }
  return "unknown";
}

void add_addr(nlohmann::json& row, const char* addr_key, const char* port_key, const sockaddr& sa) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (sa.sa_family == AF_INET) {
    const auto& a = reinterpret_cast<const sockaddr_in&>(sa);
    inet_ntop(AF_INET, &a.sin_addr, buf, sizeof buf);
    row[port_key] = ntohs(a.sin_port);
  } else if (sa.sa_family == AF_INET6) {
    const auto& a = reinterpret_cast<const sockaddr_in6&>(sa);
    inet_ntop(AF_INET6, &a.sin6_addr, buf, sizeof buf);
    row[port_key] = ntohs(a.sin6_port);
  } else {
    return;
  }
  row[addr_key] = buf;
}

std::string cm_ids() {
  nlohmann::json rows = nlohmann::json::array();
  std::lock_guard lock(mutex());
  std::uint32_t n = 0;
  for (const CmId* c : agent_ids()) {
    if (c->destroyed) continue;
    const rdma_cm_id& id = c->id;
    nlohmann::json row = {{"cm-idn", n++},
                          {"state", names_of(c->state).kernel},
                          {"cm-state", names_of(c->state).cm},
                          {"ps", ps_name(id.ps)},
                          {"ifname", c->transport->device_name()}};
    if (id.qp) {
      row["lqpn"] = id.qp->qp_num;
      row["qp-type"] = id.qp_type == IBV_QPT_UD ? "UD" : "RC";
    }
    if (c->remote_qpn) row["rqpn"] = c->remote_qpn;
    add_addr(row, "src-addr", "src-port", id.route.addr.src_addr);
    if (c->state != State::kListen && c->state != State::kBound && c->state != State::kIdle) {
      add_addr(row, "dst-addr", "dst-port", id.route.addr.dst_addr);
    }
    rows.push_back(std::move(row));
  }
  return rows.dump();
}

}  // namespace

void register_monitor_section() {
  static std::once_flag once;
  std::call_once(once, [] { softrdma_monitor_section("cm_id", &cm_ids); });
}

}  // namespace softrdma::cm
