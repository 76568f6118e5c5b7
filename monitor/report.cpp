#include "monitor/report.h"

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>

#include "monitor/sections.h"

namespace softrdma::monitor {
namespace {

using nlohmann::json;

const char* type_name(const rxe::QpInfo& q) {
  if (q.qpn == 1) return "GSI";
  switch (q.type) {
    case core::QpType::kRc:
      return "RC";
    case core::QpType::kUc:
      return "UC";
    case core::QpType::kUd:
      return "UD";
    case core::QpType::kXrcSend:
      return "XRC_INI";
    case core::QpType::kXrcRecv:
      return "XRC_TGT";
  }
  return "unknown";
}

// What a QP of either transport has: its CQs, SRQ and outstanding work requests.
template <class QpInfo>
void queue_fields(const QpInfo& q, json& r) {
  r["send-cqn"] = q.send_cqn;
  r["recv-cqn"] = q.recv_cqn;
  if (q.srqn) r["srqn"] = q.srqn;
  r["sq-wrs"] = q.send_outstanding;
  r["rq-wrs"] = q.recv_outstanding;
}

json qp_row(const rxe::QpInfo& q) {
  json r = {{"lqpn", q.qpn},      {"type", type_name(q)},      {"state", core::to_string(q.state)},
            {"sq-psn", q.sq_psn}, {"rq-psn", q.rq_psn},        {"pdn", q.pdn},
            {"pkey", q.pkey},     {"pkey-index", q.pkey_index}};
  if (q.type != core::QpType::kUd) r["rqpn"] = q.dest_qpn;
  if (!q.peer.empty()) r["peer"] = q.peer;
  queue_fields(q, r);
  const rxe::QpCounters& c = q.counters;
  r["sent-pkts"] = c.tx_packets;
  r["rcvd-pkts"] = c.rx_packets;
  r["retransmits"] = c.retransmits;
  r["seq-naks-sent"] = c.seq_naks_sent;
  r["rnr-naks-sent"] = c.rnr_naks_sent;
  r["rnr-naks-rcvd"] = c.rnr_naks_received;
  r["duplicate-requests"] = c.duplicate_requests;
  r["out-of-seq"] = c.out_of_sequence;
  r["retry-exceeded"] = c.retry_exceeded;
  r["rnr-retry-exceeded"] = c.rnr_retry_exceeded;
  if (q.loss_window > 0) r["loss-window"] = q.loss_window;  // RC, XRC: packets, after losses
  if (q.cc_rate_bps > 0) {  // DCQCN: the pacing rate and its target, Mb/s
    r["cc-rate-mbps"] = static_cast<std::uint64_t>(q.cc_rate_bps / 1e6);
    r["cc-target-mbps"] = static_cast<std::uint64_t>(q.cc_target_bps / 1e6);
  }
  r["np-ecn-marked"] = c.np_ecn_marked_roce_packets;
  r["np-cnp-sent"] = c.np_cnp_sent;
  r["rp-cnp-handled"] = c.rp_cnp_handled;
  r["rp-cnp-ignored"] = c.rp_cnp_ignored;
  return r;
}

// An iWARP QP: what it has (TCP connection, MPA options, FPDU and byte counters); no PSNs,
// P_Key, remote QPN, retransmissions or NAKs, which TCP keeps to itself.
json iwarp_qp_row(const iwarp::QpInfo& q) {
  json r = {{"lqpn", q.qpn}, {"type", "RC"}, {"state", core::to_string(q.state)}, {"pdn", q.pdn}};
  if (!q.peer.empty()) {
    r["local"] = q.local;
    r["peer"] = q.peer;
  }
  queue_fields(q, r);
  if (q.mpa_revision) {
    r["mpa-rev"] = q.mpa_revision;
    r["mpa-crc"] = q.mpa_crc;
    r["mpa-markers"] = q.mpa_markers;
    r["ird"] = q.ird;
    r["ord"] = q.ord;
  }
  const iwarp::QpCounters& c = q.counters;
  r["tx-fpdus"] = c.tx_fpdus;
  r["rx-fpdus"] = c.rx_fpdus;
  r["tx-bytes"] = c.tx_bytes;
  r["rx-bytes"] = c.rx_bytes;
  r["crc-errors"] = c.crc_errors;
  r["terminates-sent"] = c.terminates_sent;
  r["terminates-rcvd"] = c.terminates_received;
  return r;
}

// The rows both transports have (CQs, MRs, PDs, SRQs) into `o`; MR count and bytes into `dev`.
void common_rows(const std::vector<core::CqInfo>& cqs, const std::vector<core::MrInfo>& mrs,
                 const std::vector<core::PdInfo>& pds, const std::vector<core::SrqInfo>& srqs,
                 json& o, json& dev) {
  o["cq"] = json::array();
  for (const auto& c : cqs) {
    json row = {{"cqn", c.cqn},
                {"cqe", c.cqe},
                {"users", c.users},
                {"queued", c.queued},
                {"latency-samples", c.latency_samples}};
    if (c.latency_samples) {
      row["latency-p50-ns"] = c.latency_p50_ns;
      row["latency-p99-ns"] = c.latency_p99_ns;
    }
    o["cq"].push_back(std::move(row));
  }
  o["mr"] = json::array();
  std::uint64_t bytes = 0;
  for (const auto& m : mrs) {
    o["mr"].push_back({{"rkey", m.rkey},
                       {"lkey", m.lkey},
                       {"mrlen", m.length},
                       {"pdn", m.pdn},
                       {"iova", m.iova},
                       {"access", m.access}});
    bytes += m.length;
  }
  dev["mr_count"] = mrs.size();
  dev["mr_bytes"] = bytes;
  o["pd"] = json::array();
  for (const auto& p : pds) o["pd"].push_back({{"pdn", p.pdn}, {"users", p.users}});
  o["srq"] = json::array();
  for (const auto& r : srqs) {
    o["srq"].push_back({{"srqn", r.srqn},
                        {"pdn", r.pdn},
                        {"max-wr", r.max_wr},
                        {"limit", r.limit},
                        {"posted", r.posted},
                        {"lqpn", r.qpns}});
  }
}

json objects(const rxe::DeviceSnapshot& s, json& dev) {
  json o = json::object();
  o["qp"] = json::array();
  for (const auto& q : s.qps) o["qp"].push_back(qp_row(q));
  common_rows(s.cqs, s.mrs, s.pds, s.srqs, o, dev);
  return o;
}

json objects(const iwarp::DeviceSnapshot& s, json& dev) {
  json o = json::object();
  o["qp"] = json::array();
  for (const auto& q : s.qps) o["qp"].push_back(iwarp_qp_row(q));
  common_rows(s.cqs, s.mrs, s.pds, s.srqs, o, dev);
  return o;
}

}  // namespace

std::string to_json(const ProcessReport& r) {
  json doc = {{"version", kReportVersion},
              {"pid", r.pid},
              {"comm", r.comm},
              {"start_time", r.start_time},
              {"devices", json::array()}};
  for (const DeviceReport& d : r.devices) {
    json dev = {{"ifname", d.name},
                {"port", 1},
                {"transport", d.transport},
                {"backend", d.backend},
                {"address", d.address}};
    if (d.lid) dev["lid"] = d.lid;
    json counters = json::object();
    for (const auto& [name, value] : d.counters) counters[name] = value;
    dev["counters"] = std::move(counters);
    if (d.objects) dev["objects"] = objects(*d.objects, dev);
    if (d.iwarp_objects) dev["objects"] = objects(*d.iwarp_objects, dev);
    doc["devices"].push_back(std::move(dev));
  }
  fill_sections(doc);
  return doc.dump();
}

std::string own_comm() {
  std::ifstream in("/proc/self/comm");
  std::string s;
  std::getline(in, s);
  return s;
}

double unix_now() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

}  // namespace softrdma::monitor
