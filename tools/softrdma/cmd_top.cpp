// softrdma top [--once] [-d SECONDS] [-p PID]: a terminal view of the running devices and their
// QPs, refreshed every SECONDS: packets/s, MB/s through the backend, retransmissions/s, NAKs/s,
// CNPs sent (as notification point) and handled (as reaction point) per second, WRs outstanding. q
// (or Ctrl-C) quits; --once prints one frame (rates over SECONDS) and exits.
#include <poll.h>
#include <signal.h>
#include <termios.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <thread>

#include "tools/softrdma/commands.h"
#include "tools/softrdma/watch_args.h"

namespace softrdma::tools {

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

volatile sig_atomic_t g_stop = 0;
void on_signal(int) {
  g_stop = 1;
}

std::uint64_t get(const json& o, const char* k) {
  return o.contains(k) && o[k].is_number_unsigned() ? o[k].get<std::uint64_t>() : 0;
}

// The per-second rate of `k` (or the sum of several) between two objects.
double rate(const json* before, const json& now, std::initializer_list<const char*> keys,
            double dt) {
  if (!before || dt <= 0) return 0;
  std::uint64_t a = 0, b = 0;
  for (const char* k : keys) {
    a += get(*before, k);
    b += get(now, k);
  }
  return b >= a ? static_cast<double>(b - a) / dt : 0;
}

std::string mb(double bytes_per_s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", bytes_per_s / 1e6);
  return buf;
}

struct Sample {
  monitor::Collection c;
  Clock::time_point at;
};

std::string frame(const Sample* prev, const Sample& now, double every) {
  std::map<std::string, const json*> dev_before, qp_before;
  if (prev) {
    for (const DeviceRow& d : device_rows(prev->c)) {
      dev_before[d.key()] = &(*d.device)["counters"];
      if (d.device->contains("objects")) {
        for (const json& q : (*d.device)["objects"]["qp"]) {
          qp_before[d.key() + "/" + std::to_string(get(q, "lqpn"))] = &q;
        }
      }
    }
  }
  const double dt = prev ? std::chrono::duration<double>(now.at - prev->at).count() : 0;
  std::string out;
  char line[256];
  std::snprintf(line, sizeof line, "softrdma top   every %.1f s   q quits\n\n", every);
  out += line;
  std::snprintf(line, sizeof line, "%-8s %-16s %-11s %-6s %-16s %10s %9s %8s %8s %8s %8s\n", "PID",
                "COMM", "DEVICE", "TRANS", "ADDRESS", "PKTS/S", "MB/S", "RETX/S", "NAKS/S",
                "CNPTX/S", "CNPRX/S");
  out += line;
  for (const DeviceRow& d : device_rows(now.c)) {
    const json& dev = *d.device;
    const json& cnt = dev["counters"];
    const bool iw = dev["transport"] == "iwarp";  // FPDUs and bytes over TCP, no NAKs or CNPs
    const auto b = dev_before.find(d.key());
    const json* old = b == dev_before.end() ? nullptr : b->second;
    std::snprintf(
        line, sizeof line,
        "%-8d %-16.16s %-11.11s %-6.6s %-16.16s %10.0f %9.1f %8.1f %8.1f %8.1f %8.1f\n", d.pid,
        (*d.process)["comm"].get<std::string>().c_str(), dev["ifname"].get<std::string>().c_str(),
        dev["transport"].get<std::string>().c_str(), dev["address"].get<std::string>().c_str(),
        iw ? rate(old, cnt, {"tx_fpdus", "rx_fpdus"}, dt)
           : rate(old, cnt, {"sent_pkts", "rcvd_pkts"}, dt),
        (iw ? rate(old, cnt, {"tx_bytes", "rx_bytes"}, dt)
            : rate(old, cnt, {"netdev_tx_bytes", "netdev_rx_bytes"}, dt)) /
            1e6,
        rate(old, cnt, {"retransmits"}, dt),
        rate(old, cnt, {"send_seq_err_nak", "send_rnr_err", "rcvd_rnr_err"}, dt),
        rate(old, cnt, {"np_cnp_sent"}, dt), rate(old, cnt, {"rp_cnp_handled"}, dt));
    out += line;
    if (!dev.contains("objects")) continue;
    for (const json& q : dev["objects"]["qp"]) {
      const auto qb = qp_before.find(d.key() + "/" + std::to_string(get(q, "lqpn")));
      const json* qold = qb == qp_before.end() ? nullptr : qb->second;
      char who[96];
      const std::string rqpn = q.contains("rqpn") ? std::to_string(get(q, "rqpn")) : "-";
      std::snprintf(who, sizeof who, "  qp %-6llu %-3.3s %-5.5s peer %-16.16s rqpn %s",
                    static_cast<unsigned long long>(get(q, "lqpn")),
                    q.value("type", std::string()).c_str(), q.value("state", std::string()).c_str(),
                    q.value("peer", std::string("-")).c_str(), rqpn.c_str());
      std::snprintf(line, sizeof line,
                    "%-61s %10.0f %9s %8.1f %8.1f %8.1f %8.1f  sq-wrs %llu rq-wrs %llu\n", who,
                    iw ? rate(qold, q, {"tx-fpdus", "rx-fpdus"}, dt)
                       : rate(qold, q, {"sent-pkts", "rcvd-pkts"}, dt),
                    (iw ? mb(rate(qold, q, {"tx-bytes", "rx-bytes"}, dt)) : std::string()).c_str(),
                    rate(qold, q, {"retransmits"}, dt),
                    rate(qold, q, {"seq-naks-sent", "rnr-naks-sent", "rnr-naks-rcvd"}, dt),
                    rate(qold, q, {"np-cnp-sent"}, dt), rate(qold, q, {"rp-cnp-handled"}, dt),
                    static_cast<unsigned long long>(get(q, "sq-wrs")),
                    static_cast<unsigned long long>(get(q, "rq-wrs")));
      out += line;
    }
  }
  if (now.c.reports.empty()) out += "(no softrdma device is running)\n";
  for (const std::string& e : now.c.errors) out += "! " + e + "\n";
  return out;
}

// Waits up to `seconds` for q on the terminal; true when it came (or a signal).
bool wait_for_quit(double seconds) {
  const auto until = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                        std::chrono::duration<double>(seconds));
  while (!g_stop) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count();
    if (left <= 0) return false;
    pollfd p{STDIN_FILENO, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left)) > 0) {
      char c = 0;
      const ssize_t n = read(STDIN_FILENO, &c, 1);
      if (n == 0) {  // no terminal (stdin at its end): only a signal stops us
        std::this_thread::sleep_for(std::chrono::milliseconds(left));
        return g_stop != 0;
      }
      if (c == 'q' || c == 'Q') return true;
    }
  }
  return true;
}

}  // namespace

int cmd_top(const WatchArgs& args) {
  const double every = args.seconds.value_or(1.0);
  if (args.once) {
    Sample a{monitor::collect(args.pid), Clock::now()};
    if (print_errors("top", a.c)) return 2;
    std::this_thread::sleep_for(std::chrono::duration<double>(every));
    Sample b{monitor::collect(args.pid), Clock::now()};
    std::fputs(frame(&a, b, every).c_str(), stdout);
    return b.c.errors.empty() ? 0 : 2;
  }
  signal(SIGINT, on_signal);
  signal(SIGTERM, on_signal);
  termios saved{};
  const bool tty = isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &saved) == 0;
  if (tty) {
    termios raw = saved;
    raw.c_lflag &= ~static_cast<tcflag_t>(ICANON | ECHO);
    raw.c_cc[VMIN] = 0;
    raw.c_cc[VTIME] = 0;
    tcsetattr(STDIN_FILENO, TCSANOW, &raw);
  }
  Sample prev;
  bool have_prev = false;
  for (;;) {
    Sample now{monitor::collect(args.pid), Clock::now()};
    std::fputs(("\x1b[H\x1b[2J" + frame(have_prev ? &prev : nullptr, now, every)).c_str(), stdout);
    std::fflush(stdout);
    prev = std::move(now);
    have_prev = true;
    if (wait_for_quit(every)) break;
  }
  if (tty) tcsetattr(STDIN_FILENO, TCSANOW, &saved);
  return 0;
}

}  // namespace softrdma::tools
