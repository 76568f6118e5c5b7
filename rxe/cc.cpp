#include "rxe/cc.h"

#include <charconv>

namespace softrdma::rxe {

namespace {
// "25G", "800M", "1.5G": bits/s, powers of 1000, within 1 Mb/s and 1 Tb/s.
bool rate(const std::string& v, double& out) {
  if (v.empty()) return false;
  double mult = 1;
  std::size_t n = v.size();
  switch (v.back()) {
    case 'K':
      mult = 1e3;
      break;
    case 'M':
      mult = 1e6;
      break;
    case 'G':
      mult = 1e9;
      break;
    case 'T':
      mult = 1e12;
      break;
    default:
      break;
  }
  if (mult != 1) --n;
  double x = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + n, x);
  if (ec != std::errc{} || p != v.data() + n || !(x * mult >= 1e6) || !(x * mult <= 1e12)) {
    return false;
  }
  out = x * mult;
  return true;
}
}  // namespace

bool parse_cc(const std::string& spec, CcConfig& out, std::string& error) {
  out = CcConfig{};
  const std::string mode = spec.substr(0, spec.find(','));
  if (mode == "none") {
    out.dcqcn = false;
    out.ud_hold = {};
  } else if (mode != "dcqcn" && !mode.empty()) {
    error = "bad congestion control '" + mode + "' (expected dcqcn or none)";
    return false;
  }
  std::size_t pos = spec.find(',');
  while (pos != std::string::npos) {
    const std::size_t next = spec.find(',', pos + 1);
    const std::string item =
        spec.substr(pos + 1, next == std::string::npos ? next : next - pos - 1);
    pos = next;
    const auto eq = item.find('=');
    const std::string key = item.substr(0, eq);
    const std::string v = eq == std::string::npos ? "" : item.substr(eq + 1);
    if (eq == std::string::npos || !out.dcqcn ||
        (key != "cnp_interval_us" && key != "line_rate" && key != "backlog" &&
         key != "ud_hold_us")) {
      error = "bad item '" + item + "' in '" + spec +
              "' (expected dcqcn[,cnp_interval_us=N][,line_rate=RATE][,backlog=on|off]"
              "[,ud_hold_us=N] or none)";
      return false;
    }
    if (key == "backlog") {
      if (v != "on" && v != "off") {
        error = "bad backlog '" + v + "' (expected on or off)";
        return false;
      }
      out.mark_backlog = v == "on";
      continue;
    }
    if (key == "line_rate") {
      double r = 0;
      if (!rate(v, r)) {
        error = "bad line_rate '" + v + "' (bits/s with K, M or G, 1M to 1T: 25G, 800M)";
        return false;
      }
      out.rp.line_rate_bps = r;
      out.pace_line_rate = true;
      continue;
    }
    unsigned us = 0;
    auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), us);
    if (ec != std::errc{} || p != v.data() + v.size() || v.empty() || us > 1'000'000) {
      error = "bad " + key + " '" + v + "' (expected 0 to 1000000 microseconds)";
      return false;
    }
    if (key == "ud_hold_us") {
      out.ud_hold = std::chrono::microseconds(us);
    } else {
      out.cnp_interval = std::chrono::microseconds(us);
    }
  }
  return true;
}

}  // namespace softrdma::rxe
