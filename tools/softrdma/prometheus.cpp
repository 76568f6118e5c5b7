#include "tools/softrdma/prometheus.h"

#include <cstdio>
#include <map>
#include <vector>

#include "tools/softrdma/watch_args.h"

namespace softrdma::tools {

namespace {

using nlohmann::json;

std::string escape(const std::string& v) {
  std::string s;
  for (const char c : v) {
    if (c == '\\' || c == '"') {
      s += '\\';
      s += c;
    } else if (c == '\n') {
      s += "\\n";
    } else {
      s += c;
    }
  }
  return s;
}

// One family: its samples in the order they came, each with its label set.
struct Family {
  std::string type, help;
  std::vector<std::pair<std::string, std::string>> samples;  // labels, value
};

class Exposition {
 public:
  void add(const std::string& name, const char* type, const std::string& help,
           const std::string& labels, const std::string& value) {
    auto [it, fresh] = families_.try_emplace(name);
    if (fresh) {
      order_.push_back(name);
      it->second.type = type;
      it->second.help = help;
    }
    it->second.samples.emplace_back(labels, value);
  }
  std::string text() const {
    std::string out;
    for (const std::string& name : order_) {
      const Family& f = families_.at(name);
      out += "# HELP " + name + " " + f.help + "\n# TYPE " + name + " " + f.type + "\n";
      for (const auto& [labels, value] : f.samples) {
        out += name + (labels.empty() ? "" : "{" + labels + "}") + " " + value + "\n";
      }
    }
    return out;
  }

 private:
  std::vector<std::string> order_;
  std::map<std::string, Family> families_;
};

std::string number(const json& v) {
  if (v.is_number_unsigned()) return std::to_string(v.get<std::uint64_t>());
  if (v.is_number_integer()) return std::to_string(v.get<std::int64_t>());
  return v.dump();
}

int state_value(const std::string& s) {
  static const char* kStates[] = {"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"};
  for (int i = 0; i < 7; ++i) {
    if (s == kStates[i]) return i;
  }
  return -1;
}

void qp_series(Exposition& e, const std::string& base, const json& qp) {
  const std::string labels = base + ",qpn=\"" + std::to_string(qp.value("lqpn", 0u)) +
                             "\",type=\"" + escape(qp.value("type", std::string())) + "\"";
  e.add("softrdma_qp_state", "gauge",
        "QP state: 0 RESET, 1 INIT, 2 RTR, 3 RTS, 4 SQD, 5 SQE, 6 ERR", labels,
        std::to_string(state_value(qp.value("state", std::string()))));
  const std::pair<const char*, const char*> gauges[] = {
      {"sq-wrs", "softrdma_qp_send_wrs_outstanding"},
      {"rq-wrs", "softrdma_qp_recv_wrs_outstanding"}};
  for (const auto& [field, name] : gauges) {
    if (qp.contains(field)) {
      e.add(name, "gauge", std::string("QP work requests posted and not completed (") + field + ")",
            labels, number(qp[field]));
    }
  }
  const std::pair<const char*, const char*> counters[] = {
      {"sent-pkts", "softrdma_qp_sent_pkts_total"},
      {"rcvd-pkts", "softrdma_qp_rcvd_pkts_total"},
      {"retransmits", "softrdma_qp_retransmits_total"},
      {"seq-naks-sent", "softrdma_qp_seq_naks_sent_total"},
      {"rnr-naks-sent", "softrdma_qp_rnr_naks_sent_total"},
      {"rnr-naks-rcvd", "softrdma_qp_rnr_naks_rcvd_total"},
      {"np-cnp-sent", "softrdma_qp_np_cnp_sent_total"},
      {"rp-cnp-handled", "softrdma_qp_rp_cnp_handled_total"},
      // iWARP QPs
      {"tx-fpdus", "softrdma_qp_tx_fpdus_total"},
      {"rx-fpdus", "softrdma_qp_rx_fpdus_total"},
      {"tx-bytes", "softrdma_qp_tx_bytes_total"},
      {"rx-bytes", "softrdma_qp_rx_bytes_total"},
      {"crc-errors", "softrdma_qp_crc_errors_total"},
      {"terminates-sent", "softrdma_qp_terminates_sent_total"},
      {"terminates-rcvd", "softrdma_qp_terminates_rcvd_total"}};
  for (const auto& [field, name] : counters) {
    if (qp.contains(field)) {
      e.add(name, "counter", std::string("QP counter ") + field, labels, number(qp[field]));
    }
  }
}

}  // namespace

std::string render_metrics(const monitor::Collection& c) {
  Exposition e;
  for (const DeviceRow& d : device_rows(c)) {
    const json& dev = *d.device;
    const std::string base = "device=\"" + escape(dev["ifname"].get<std::string>()) + "\",pid=\"" +
                             std::to_string(d.pid) + "\",comm=\"" +
                             escape((*d.process)["comm"].get<std::string>()) + "\"";
    e.add("softrdma_device_info", "gauge", "A running softrdma device (always 1)",
          base + ",transport=\"" + escape(dev["transport"].get<std::string>()) + "\",backend=\"" +
              escape(dev["backend"].get<std::string>()) + "\",address=\"" +
              escape(dev["address"].get<std::string>()) + "\"",
          "1");
    e.add("softrdma_device_start_time_seconds", "gauge", "When the device started, in Unix seconds",
          base, std::to_string((*d.process)["start_time"].get<double>()));
    for (const auto& [name, value] : dev["counters"].items()) {
      e.add("softrdma_" + name + "_total", "counter", "Device counter " + name + " (softrdma stat)",
            base, number(value));
    }
    if (dev.contains("mr_count")) {
      e.add("softrdma_mrs", "gauge", "Memory regions registered", base, number(dev["mr_count"]));
      e.add("softrdma_mr_bytes", "gauge", "Bytes of memory registered", base,
            number(dev["mr_bytes"]));
    }
    if (dev.contains("objects")) {
      for (const char* kind : {"qp", "cq", "pd", "srq"}) {
        if (!dev["objects"].contains(kind)) continue;
        e.add("softrdma_objects", "gauge", "Verbs objects of the device, by kind",
              base + ",kind=\"" + kind + "\"", std::to_string(dev["objects"][kind].size()));
      }
      if (dev["objects"].contains("qp")) {
        for (const json& qp : dev["objects"]["qp"]) qp_series(e, base, qp);
      }
      if (dev["objects"].contains("cq")) {
        for (const json& cq : dev["objects"]["cq"]) {
          const std::string labels = base + ",cqn=\"" + std::to_string(cq.value("cqn", 0u)) + "\"";
          e.add("softrdma_cq_queued", "gauge", "Completions waiting to be polled", labels,
                number(cq.value("queued", json(0))));
          for (const auto& [field, name] :
               {std::pair{"latency-p50-ns", "softrdma_cq_latency_p50_seconds"},
                std::pair{"latency-p99-ns", "softrdma_cq_latency_p99_seconds"}}) {
            if (!cq.contains(field) || !cq[field].is_number_unsigned()) continue;
            char value[32];
            std::snprintf(value, sizeof value, "%.9g",
                          static_cast<double>(cq[field].get<std::uint64_t>()) / 1e9);
            e.add(name, "gauge",
                  std::string("Post-to-poll latency of send completions since first watched (") +
                      field + ")",
                  labels, value);
          }
        }
      }
    }
  }
  e.add("softrdma_exporter_bad_entries", "gauge",
        "Processes that could not be read in this scrape (corrupt, stuck)", "",
        std::to_string(c.errors.size()));
  return e.text();
}

}  // namespace softrdma::tools
