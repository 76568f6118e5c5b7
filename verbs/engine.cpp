#include "verbs/engine.h"

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>

#include "iwarp/mpa_spec.h"
#include "lwtcp/lwip_stack.h"
#include "lwtcp/raw_port.h"
#include "netdev/backlog_marker.h"
#include "netdev/faults.h"
#include "netdev/forwarding.h"
#include "netdev/open.h"
#include "netdev/raw_eth.h"
#include "netdev/switch_port.h"
#include "netdev/trace.h"
#include "verbs/monitor_hook.h"

namespace softrdma::verbs {

namespace {

// A whole decimal number from lo to hi, or false with a message naming `key`.
bool number(const std::string& key, const std::string& value, unsigned lo, unsigned hi, unsigned& v,
            std::string& error) {
  auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
  if (ec != std::errc() || p != value.data() + value.size() || v < lo || v > hi) {
    error = key + " must be a number from " + std::to_string(lo) + " to " + std::to_string(hi) +
            ", not '" + value + "'";
    return false;
  }
  return true;
}

// "0xffff,0x8001,0x0001": 1 to 64 distinct P_Keys, each a 16-bit number (hex with 0x) whose low
// 15 bits are not 0; the high bit is full membership.
bool parse_pkeys(const std::string& value, std::vector<std::uint16_t>& out, std::string& error) {
  std::vector<std::uint16_t> table;
  std::size_t from = 0;
  for (;;) {
    const std::size_t comma = value.find(',', from);
    const std::string item = value.substr(from, comma == std::string::npos ? comma : comma - from);
    const bool hex = item.rfind("0x", 0) == 0 || item.rfind("0X", 0) == 0;
    const char* b = item.data() + (hex ? 2 : 0);
    unsigned v = 0;
    auto [p, ec] = std::from_chars(b, item.data() + item.size(), v, hex ? 16 : 10);
    if (item.size() == (hex ? 2u : 0u) || ec != std::errc() || p != item.data() + item.size() ||
        v > 0xFFFF || (v & 0x7FFF) == 0) {
      error = "bad P_Key '" + item +
              "' in pkeys (expected 16-bit values such as 0xffff,0x8001,"
              "whose low 15 bits are not 0)";
      return false;
    }
    if (std::find(table.begin(), table.end(), v) != table.end()) {
      error = "P_Key '" + item + "' twice in pkeys";
      return false;
    }
    table.push_back(static_cast<std::uint16_t>(v));
    if (comma == std::string::npos) break;
    from = comma + 1;
  }
  if (table.size() > 64) {
    error = "pkeys has " + std::to_string(table.size()) + " entries (at most 64)";
    return false;
  }
  out = table;
  return true;
}

bool apply(Config& cfg, const std::string& key, const std::string& value, std::string& error) {
  if (key == "device") {
    if (value.empty() || value.size() >= 64) {
      error = "device name must be 1 to 63 characters";
      return false;
    }
    cfg.device_name = value;
    cfg.device_given = true;
  } else if (key == "netdev") {
    netdev::IpAddr a;
    if (value.rfind("udp:", 0) == 0) {
      if (!netdev::IpAddr::parse(value.substr(4), a)) {
        error = "bad address in '" + value + "' (expected udp:IPV4-OR-IPV6-ADDRESS)";
        return false;
      }
    } else if (value.rfind("af_packet:", 0) == 0 || value.rfind("af_xdp:", 0) == 0) {
      std::string iface, addr;
      const std::string kind = value.substr(0, value.find(':'));
      if (!netdev::split_iface_spec(value, iface, addr) ||
          (!addr.empty() && !netdev::IpAddr::parse(addr, a))) {
        error = "bad value '" + value + "' (expected " + kind + ":INTERFACE or " + kind +
                ":INTERFACE:IPV4-ADDRESS)";
        return false;
      }
    } else if (value.rfind("dpdk:", 0) == 0) {
      std::string dev, addr;
      if (!netdev::split_dpdk_spec(value, dev, addr) ||
          (!addr.empty() && !netdev::IpAddr::parse(addr, a))) {
        error = "bad value '" + value + "' (expected dpdk:DEVICE or dpdk:DEVICE@IPV4-ADDRESS)";
        return false;
      }
    } else if (!value.empty()) {
      error = "unknown backend '" + value + "' (expected " + netdev::kSpecForms + ")";
      return false;
    }
    cfg.netdev = value;
  } else if (key == "faults") {
    netdev::FaultConfig f;
    if (!netdev::parse_faults(value, f, error)) return false;
    cfg.faults = value;
  } else if (key == "mtu") {
    unsigned v = 0;
    if (!number(key, value, 576, 65536, v, error)) return false;
    cfg.mtu = v;
  } else if (key == "vlan") {
    unsigned v = 0;
    if (!number(key, value, 1, 4094, v, error)) return false;
    cfg.vlan = static_cast<std::uint16_t>(v);
  } else if (key == "pkeys") {
    if (!parse_pkeys(value, cfg.pkeys, error)) return false;
  } else if (key == "dpdk_qps") {
    unsigned v = 0;
    if (!number(key, value, 1, 65536, v, error)) return false;
    cfg.dpdk_qps = v;
  } else if (key == "stats") {
    if (value != "0" && value != "1") {
      error = "bad value '" + value + "' for stats (expected 0 or 1)";
      return false;
    }
    cfg.stats = value == "1";
  } else if (key == "local") {
    if (value != "direct" && value != "rings" && value != "kernel") {
      error = "bad value '" + value + "' for local (expected direct, rings or kernel)";
      return false;
    }
    cfg.local = value == "direct"  ? Config::Local::kDirect
                : value == "rings" ? Config::Local::kRings
                                   : Config::Local::kKernel;
  } else if (key == "view") {
    if (value != "auto" && value != "on" && value != "off") {
      error = "bad value '" + value + "' for view (expected auto, on or off)";
      return false;
    }
    cfg.view = value == "auto" ? Config::View::kAuto
               : value == "on" ? Config::View::kOn
                               : Config::View::kOff;
  } else if (key == "pcap") {
    cfg.pcap = value;
  } else if (key == "pcap_filter") {
    netdev::TraceConfig t;
    if (!netdev::parse_trace_spec(value, t, error)) return false;
    cfg.pcap_filter = value;
  } else if (key == "transport") {
    if (value != "roce" && value != "iwarp") {
      error = "transport must be roce or iwarp, not '" + value + "'";
      return false;
    }
    cfg.transport = value;
    cfg.transport_given = true;
  } else if (key == "cc") {
    rxe::CcConfig c;
    if (!rxe::parse_cc(value, c, error)) return false;
    cfg.cc = value;
  } else if (key == "switch") {
    netdev::SwitchConfig s;
    if (!value.empty() && !netdev::parse_switch(value, s, error)) return false;
    cfg.switch_port = value;
  } else if (key == "mpa") {
    iwarp::MpaParams m;
    if (!iwarp::parse_mpa_spec(value, m, error)) return false;
    cfg.mpa = value;
  } else if (key == "tcp") {
    lwtcp::TcpChoice t;
    if (!lwtcp::parse_tcp_choice(value, t)) {
      error = "tcp must be auto, kernel or user, not '" + value + "'";
      return false;
    }
    cfg.tcp = value;
  } else {
    error = "unknown setting '" + key + "'";
    return false;
  }
  return true;
}

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  const auto e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

// A netdev wrapper that reports a configured MTU instead of the interface's.
class MtuOverride : public netdev::ForwardingNetdev {
 public:
  MtuOverride(std::unique_ptr<netdev::Netdev> inner, std::uint32_t mtu)
      : ForwardingNetdev(std::move(inner)), mtu_(mtu) {}
  std::uint32_t mtu() const override { return mtu_; }

 private:
  std::uint32_t mtu_;
};

constexpr std::uint16_t kMaxUnicastLid = 0xBFFF;

// LID <-> address: the LID is the low 16 bits of an IPv4 address; a LID-only
// peer lives in our own /16 (127.1.0.0/16 for the per-process default).
std::uint16_t lid_of(const netdev::IpAddr& a) {
  if (!a.is_v4()) return 1;
  const auto low = static_cast<std::uint16_t>(a.v4_host() & 0xFFFF);
  return low == 0 || low > kMaxUnicastLid ? 1 : low;
}

}  // namespace

bool load_config(Config& cfg, std::string& error) {
  if (const char* file = std::getenv("SOFTRDMA_CONFIG"); file && *file) {
    std::ifstream in(file);
    if (!in) {
      error = std::string("SOFTRDMA_CONFIG: cannot read ") + file;
      return false;
    }
    std::string line;
    int n = 0;
    while (std::getline(in, line)) {
      ++n;
      line = trim(line);
      if (line.empty() || line[0] == '#') continue;
      const auto eq = line.find('=');
      if (eq == std::string::npos) {
        error = std::string(file) + ":" + std::to_string(n) + ": expected key=value";
        return false;
      }
      if (!apply(cfg, trim(line.substr(0, eq)), trim(line.substr(eq + 1)), error)) {
        error = std::string(file) + ":" + std::to_string(n) + ": " + error;
        return false;
      }
    }
  }
  const std::pair<const char*, const char*> vars[] = {{"SOFTRDMA_DEVICE", "device"},
                                                      {"SOFTRDMA_NETDEV", "netdev"},
                                                      {"SOFTRDMA_FAULTS", "faults"},
                                                      {"SOFTRDMA_MTU", "mtu"},
                                                      {"SOFTRDMA_PCAP", "pcap"},
                                                      {"SOFTRDMA_PCAP_FILTER", "pcap_filter"},
                                                      {"SOFTRDMA_TRANSPORT", "transport"},
                                                      {"SOFTRDMA_MPA", "mpa"},
                                                      {"SOFTRDMA_TCP", "tcp"},
                                                      {"SOFTRDMA_VLAN", "vlan"},
                                                      {"SOFTRDMA_DPDK_QPS", "dpdk_qps"},
                                                      {"SOFTRDMA_PKEYS", "pkeys"},
                                                      {"SOFTRDMA_LOCAL", "local"},
                                                      {"SOFTRDMA_STATS", "stats"},
                                                      {"SOFTRDMA_VIEW", "view"},
                                                      {"SOFTRDMA_CC", "cc"},
                                                      {"SOFTRDMA_SWITCH", "switch"}};
  for (const auto& [var, key] : vars) {
    if (const char* v = std::getenv(var)) {
      if (!apply(cfg, key, v, error)) {
        error = std::string(var) + ": " + error;
        return false;
      }
    }
  }
  return resolve_device(cfg, error);
}

bool resolve_device(Config& cfg, std::string& error) {
  if (cfg.device_name == kIwarpDeviceName) {
    // Naming the iWARP device selects it, as transport=iwarp does; the RoCE device keeps its
    // own name (a second device called softiwarp0 would be listed otherwise).
    if (cfg.transport_given && cfg.transport != "iwarp") {
      error = std::string("--device ") + kIwarpDeviceName +
              " (SOFTRDMA_DEVICE) names the iWARP device, but --transport " + cfg.transport +
              " (SOFTRDMA_TRANSPORT) asks for RoCE: give --device " + kIwarpDeviceName +
              " alone (or with --transport iwarp), or a RoCE device name with --transport roce";
      return false;
    }
    cfg.transport = "iwarp";
    cfg.device_name = Config{}.device_name;
    return true;
  }
  if (cfg.device_given && cfg.transport == "iwarp") {
    error = "--device " + cfg.device_name +
            " (SOFTRDMA_DEVICE) names a RoCE device, but --transport iwarp (SOFTRDMA_TRANSPORT) "
            "selects the iWARP device " +
            kIwarpDeviceName + ": give --device " + kIwarpDeviceName +
            " or leave --device out, or use --transport roce";
    return false;
  }
  return true;
}

namespace {

// The process's engine. A forked child starts with none: the parent's stays the parent's (its
// threads did not come along), and the child's first verbs call makes one of its own.
std::mutex g_engine_mu;
Engine* g_engine = nullptr;
bool g_engine_tried = false;  // made (or failed) in this process
std::atomic<unsigned> g_generation{0};
bool g_stats_at_exit = false;

void before_fork() {
  g_engine_mu.lock();
}
void after_fork_parent() {
  g_engine_mu.unlock();
}
void after_fork_child() {
  g_engine_mu.unlock();
  g_engine = nullptr;  // left to the parent: never freed here
  g_engine_tried = false;
  g_generation.fetch_add(1, std::memory_order_relaxed);
}

void print_stats_at_exit() {
  std::lock_guard lock(g_engine_mu);
  if (g_engine && g_engine->config().stats) g_engine->print_stats();
}

}  // namespace

Engine* Engine::get() {
  static std::once_flag once;
  std::call_once(once, [] { pthread_atfork(before_fork, after_fork_parent, after_fork_child); });
  std::lock_guard lock(g_engine_mu);
  if (!g_engine_tried) {
    g_engine_tried = true;
    auto* e = new Engine();
    std::string error;
    if (e->start(error)) {
      g_engine = e;
      start_monitor(*e);
      if (e->cfg_.stats && !g_stats_at_exit) {  // once a process, children included
        g_stats_at_exit = true;
        std::atexit(print_stats_at_exit);
      }
    } else {
      std::fprintf(stderr, "softrdma: %s\n", error.c_str());
      delete e;
    }
  }
  return g_engine;
}

unsigned Engine::generation() {
  return g_generation.load(std::memory_order_relaxed);
}

bool Engine::start(std::string& error) {
  if (!load_config(cfg_, error)) return false;
  netdev::FaultConfig faults;
  if (!netdev::parse_faults(cfg_.faults, faults, error)) return false;
  netdev::OpenOptions options;
  options.faults = faults;
  options.host_local_rings = cfg_.local != Config::Local::kKernel;
  options.vlan = cfg_.vlan;
  options.dpdk_qps = cfg_.dpdk_qps;
  options.spec_origin = "SOFTRDMA_NETDEV: ";
  // Over af_xdp, softiwarp0's TCP takes the XDP program: softroce0 goes to af_packet.
  lwtcp::parse_tcp_choice(cfg_.tcp, tcp_choice_);  // checked by load_config
  const std::string spec = cfg_.transport == "iwarp"
                               ? lwtcp::roce_spec_beside_user_tcp(cfg_.netdev, tcp_choice_)
                               : cfg_.netdev;
  std::unique_ptr<netdev::Netdev> nd = netdev::open(spec, options, error, &address_);
  if (!nd) return false;
  if (cfg_.vlan && nd->backend() == "udp") {
    error =
        "SOFTRDMA_VLAN: only the raw backends (af_packet, af_xdp, dpdk) tag frames; over udp: "
        "use a VLAN interface's address";
    return false;
  }
  // The MAC the default GID derives from: the raw backends' interface's, else the one traces show.
  if (const auto* raw = dynamic_cast<const netdev::RawEthNetdev*>(nd.get())) {
    mac_ = raw->mac();
  } else {
    mac_ = netdev::trace_mac(address_);
  }
  if (cfg_.mtu) nd = std::make_unique<MtuOverride>(std::move(nd), *cfg_.mtu);
  rxe::CcConfig cc;
  if (!rxe::parse_cc(cfg_.cc, cc, error)) return false;
  if (!cfg_.switch_port.empty()) {  // in front of the receive path, behind the trace
    netdev::SwitchConfig sw;
    if (!netdev::parse_switch(cfg_.switch_port, sw, error)) return false;
    nd = std::make_unique<netdev::SwitchPortNetdev>(std::move(nd), sw);
  } else if (cc.dcqcn && cc.mark_backlog) {  // no switch: mark CE when receiving falls behind
    nd = std::make_unique<netdev::BacklogMarkerNetdev>(std::move(nd));
  }
  if (!cfg_.pcap.empty()) {
    netdev::TraceConfig trace_config;
    if (!netdev::parse_trace_spec(cfg_.pcap_filter, trace_config, error)) return false;
    trace_config.path = cfg_.pcap;
    trace_config.device = cfg_.device_name;
    auto traced = std::make_unique<netdev::TracingNetdev>(std::move(nd), trace_config);
    if (!traced->ok()) {
      error = "SOFTRDMA_PCAP: " + traced->error();
      return false;
    }
    nd = std::move(traced);
  }
  lid_ = lid_of(address_);
  device_ = std::make_unique<rxe::Device>(std::move(nd), cfg_.device_name, cc);
  device_->set_pkeys(cfg_.pkeys);  // checked by load_config
  gids_ = roce_gid_table(mac_, device_->netdev().addresses());
  if (cfg_.local == Config::Local::kDirect) device_->enable_direct_placement();
  return true;
}

void Engine::print_stats() {
  // One line, so that a test or a person can grep it.
  const netdev::Netdev& nd = device_->netdev();
  std::string line = "softrdma: stats " + cfg_.device_name + " " + nd.name() + ":";
  for (const auto& [name, value] : device_->hw_counters()) {
    line += " " + name + "=" + std::to_string(value);
  }
  std::fprintf(stderr, "%s\n", line.c_str());
  if (iwarp_) {  // softiwarp0 carried something: its QPs' counters too (over kernel TCP)
    const auto counters = iwarp_->hw_counters();
    if (std::none_of(counters.begin(), counters.end(), [](const auto& c) { return c.second; })) {
      return;
    }
    line = "softrdma: stats " + iwarp_->name() + " tcp:";
    for (const auto& [name, value] : counters) line += " " + name + "=" + std::to_string(value);
    std::fprintf(stderr, "%s\n", line.c_str());
  }
}

// softiwarp0's userspace TCP: over af_packet, af_xdp or dpdk on an address no interface holds (the
// kernel owns the others, and would reset our connections), or with --tcp user on an address the
// kernel holds (its ports held in the kernel), with --faults on what it sends; else none (kernel
// TCP, as before).
std::shared_ptr<iwarp::UserTcp> Engine::open_user_tcp(
    const std::shared_ptr<pcap::PcapngWriter>& trace) {
  const auto steer = lwtcp::user_tcp_steering(cfg_.netdev, address_, tcp_choice_);
  if (!steer) {
    if (tcp_choice_ == lwtcp::TcpChoice::kUser) {
      std::fprintf(stderr,
                   "softrdma: --tcp user needs a raw backend (af_packet, af_xdp, dpdk), not '%s': "
                   "iWARP stays on kernel TCP\n",
                   cfg_.netdev.c_str());
    }
    return nullptr;
  }
  std::string error;
  netdev::FaultConfig faults;
  netdev::parse_faults(cfg_.faults, faults, error);  // checked at start
  auto port = lwtcp::open_raw_port(cfg_.netdev, address_, *steer, cfg_.vlan, faults, error);
  std::shared_ptr<iwarp::UserTcp> tcp;
  if (port) {
    lwtcp::StackConfig sc;
    sc.address = address_;
    sc.hold_ports = *steer == netdev::Steering::kTcpShared;
    sc.trace_name = kIwarpDeviceName;
    sc.trace = trace;
    tcp = lwtcp::open_stack(std::move(port), sc, error);
  }
  if (!tcp) std::fprintf(stderr, "softrdma: %s: iWARP stays on kernel TCP\n", error.c_str());
  return tcp;
}

iwarp::Device& Engine::iwarp_device() {
  std::call_once(iwarp_once_, [this] {
    iwarp::DeviceConfig c;
    c.name = kIwarpDeviceName;
    c.mac = netdev::trace_mac(address_);  // 02:00 and the IPv4 address, as traces show it
    iwarp::MpaParams unused;
    std::string error;
    iwarp::parse_mpa_spec(cfg_.mpa, unused, error, &c.tx);  // validated by load_config
    if (auto* t = dynamic_cast<netdev::TracingNetdev*>(&device_->netdev())) {
      c.trace = t->shared_writer();
    }
    c.user_tcp = open_user_tcp(c.trace);
    iwarp_ = std::make_unique<iwarp::Device>(std::move(c));
    iwarp_ready_.store(iwarp_.get(), std::memory_order_release);
  });
  return *iwarp_;
}

netdev::IpAddr Engine::address_for_lid(std::uint16_t lid) const {
  if (!address_.is_v4()) return address_;
  return netdev::IpAddr::v4((address_.v4_host() & 0xFFFF0000u) | lid);
}

}  // namespace softrdma::verbs
