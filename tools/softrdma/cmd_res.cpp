// softrdma res [qp|cq|mr|pd|srq|cm_id] [--json] [-p PID]: the objects of every running device,
// as `rdma res show` lists a kernel device's, with the rdma tool's field names, plus softrdma's
// own (peer address, WRs outstanding, retransmissions, NAKs, RNR NAKs per QP; MR count and
// bytes per device). Without a kind: how many of each per device.
#include <cstdio>
#include <string>
#include <vector>

#include "tools/softrdma/commands.h"
#include "tools/softrdma/usage.h"
#include "tools/softrdma/watch_args.h"

namespace softrdma::tools {

namespace {

using nlohmann::json;

constexpr const char* kKinds[] = {"qp", "cq", "mr", "pd", "srq", "cm_id"};

// The text columns of each kind, in the rdma tool's order; "|" marks where pid and comm go.
std::vector<std::string> columns(const std::string& kind) {
  // An iWARP QP's row has no PSNs, P_Key, rqpn, NAKs or packets, and adds local and the rest.
  if (kind == "qp") {
    return {"lqpn",
            "rqpn",
            "type",
            "state",
            "sq-psn",
            "rq-psn",
            "pdn",
            "|",
            "pkey",
            "pkey-index",
            "local",
            "peer",
            "sq-wrs",
            "rq-wrs",
            "retransmits",
            "seq-naks-sent",
            "rnr-naks-sent",
            "rnr-naks-rcvd",
            "sent-pkts",
            "rcvd-pkts",
            "mpa-rev",
            "mpa-crc",
            "mpa-markers",
            "ird",
            "ord",
            "tx-fpdus",
            "rx-fpdus",
            "tx-bytes",
            "rx-bytes",
            "crc-errors",
            "terminates-sent",
            "terminates-rcvd"};
  }
  if (kind == "cq") {
    return {"cqn",           "cqe", "users", "|", "queued", "latency-samples", "latency-p50-ns",
            "latency-p99-ns"};
  }
  if (kind == "mr") return {"rkey", "lkey", "mrlen", "pdn", "|"};
  if (kind == "pd") return {"pdn", "users", "|"};
  if (kind == "srq") return {"srqn", "pdn", "max-wr", "limit", "posted", "lqpn", "|"};
  return {"cm-idn",   "lqpn",     "qp-type",  "state",    "ps",
          "src-addr", "src-port", "dst-addr", "dst-port", "|"};
}

std::string text_of(const std::string& col, const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_array()) {
    std::string s;
    for (const json& e : v) s += (s.empty() ? "" : ",") + text_of(col, e);
    return s.empty() ? "-" : s;
  }
  if ((col == "rkey" || col == "lkey" || col == "pkey") && v.is_number_unsigned()) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "0x%x", v.get<unsigned>());
    return buf;
  }
  return v.dump();
}

void print_row(const std::string& kind, const DeviceRow& d, const json& row) {
  std::string line = "link " + (*d.device)["ifname"].get<std::string>() + "/" +
                     std::to_string((*d.device).value("port", 1));
  for (const std::string& col : columns(kind)) {
    if (col == "|") {
      line += " pid " + std::to_string(d.pid) + " comm " + (*d.process)["comm"].get<std::string>();
    } else if (row.contains(col)) {
      line += " " + col + " " + text_of(col, row[col]);
    }
  }
  std::printf("%s\n", line.c_str());
}

// The rows of `kind` of one device (cm_id rows are the process's, given to its RoCE device or
// the device they name).
std::vector<json> rows_of(const std::string& kind, const DeviceRow& d) {
  std::vector<json> rows;
  const json& dev = *d.device;
  if (kind == "cm_id") {
    const json& p = *d.process;
    if (!p.contains("cm_id")) return rows;
    for (const json& r : p["cm_id"]) {
      const std::string on = r.value("ifname", std::string("softroce0"));
      if (on == dev["ifname"]) rows.push_back(r);
    }
    return rows;
  }
  if (dev.contains("objects") && dev["objects"].contains(kind)) {
    for (const json& r : dev["objects"][kind]) rows.push_back(r);
  }
  return rows;
}

}  // namespace

int cmd_res(const WatchArgs& args) {
  std::string kind = args.words.empty() ? "" : args.words[0];
  if (kind == "show") kind = "";
  bool known = kind.empty();
  for (const char* k : kKinds) known = known || kind == k;
  if (!known) {
    return usage_error("res", "unknown object '" + kind + "' (qp, cq, mr, pd, srq or cm_id)");
  }

  const monitor::Collection c = monitor::collect(args.pid);
  json out = json::array();
  for (const DeviceRow& d : device_rows(c)) {
    if (kind.empty()) {  // a summary: how many of each
      json row = identity(d);
      std::string line = (*d.device)["ifname"].get<std::string>() + ": pid " +
                         std::to_string(d.pid) + " comm " + (*d.process)["comm"].get<std::string>();
      for (const char* k : kKinds) {
        row[k] = rows_of(k, d).size();
        line += std::string(" ") + k + " " + std::to_string(rows_of(k, d).size());
      }
      if (args.json) {
        out.push_back(std::move(row));
      } else {
        std::printf("%s\n", line.c_str());
      }
      continue;
    }
    for (json row : rows_of(kind, d)) {
      if (args.json) {
        row.update(identity(d));
        out.push_back(std::move(row));
      } else {
        print_row(kind, d, row);
      }
    }
    if (kind == "mr" && !args.json && d.device->contains("mr_count")) {
      std::printf("%s pid %d comm %s: mr_count %llu mr_bytes %llu\n",
                  (*d.device)["ifname"].get<std::string>().c_str(), d.pid,
                  (*d.process)["comm"].get<std::string>().c_str(),
                  static_cast<unsigned long long>((*d.device)["mr_count"].get<std::uint64_t>()),
                  static_cast<unsigned long long>((*d.device)["mr_bytes"].get<std::uint64_t>()));
    }
  }
  if (args.json) std::printf("%s\n", out.dump(2).c_str());
  return print_errors("res", c) ? 2 : 0;
}

}  // namespace softrdma::tools
