#include "cm/monitor_section.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <mutex>
#include <nlohmann/json.hpp>
#include <string>

#include "cm/agent.h"
#include "cm/state.h"

// Exported by softrdma's libibverbs.so.1 (SOFTRDMA_PRIVATE_1, verbs/monitor_api.cpp).
extern "C" void softrdma_monitor_section(const char* name, std::string (*fn)());

namespace softrdma::cm {

namespace {

// The kernel's rdma_cm state names, as `rdma res show cm_id` prints them (an established
// connection is still CONNECT there).
const char* kernel_state(State s) {
  switch (s) {
    case State::kIdle:
      return "IDLE";
    case State::kBound:
      return "ADDR_BOUND";
    case State::kAddrResolved:
      return "ADDR_RESOLVED";
    case State::kRouteResolved:
      return "ROUTE_RESOLVED";
    case State::kListen:
      return "LISTEN";
    case State::kReqSent:
    case State::kRepRcvd:
    case State::kReqRcvd:
    case State::kRepSent:
    case State::kEstablished:
    case State::kSidrReqSent:
    case State::kSidrReqRcvd:
      return "CONNECT";
    case State::kDreqSent:
    case State::kTimewait:
    case State::kClosed:
      return "DISCONNECT";
  }
  return "UNKNOWN";
}

// softrdma's finer state of the IB CM exchange.
const char* cm_state(State s) {
  switch (s) {
    case State::kIdle:
      return "idle";
    case State::kBound:
      return "bound";
    case State::kAddrResolved:
      return "addr-resolved";
    case State::kRouteResolved:
      return "route-resolved";
    case State::kListen:
      return "listen";
    case State::kReqSent:
      return "req-sent";
    case State::kRepRcvd:
      return "rep-rcvd";
    case State::kReqRcvd:
      return "req-rcvd";
    case State::kRepSent:
      return "rep-sent";
    case State::kEstablished:
      return "established";
    case State::kDreqSent:
      return "dreq-sent";
    case State::kTimewait:
      return "timewait";
    case State::kSidrReqSent:
      return "sidr-req-sent";
    case State::kSidrReqRcvd:
      return "sidr-req-rcvd";
    case State::kClosed:
      return "closed";
  }
  return "unknown";
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
                          {"state", kernel_state(c->state)},
                          {"cm-state", cm_state(c->state)},
                          {"ps", ps_name(id.ps)},
                          {"ifname", agent_iwarp() ? "softiwarp0" : "softroce0"}};
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
