#include "iwarp/mpa_spec.h"

#include <charconv>

namespace softrdma::iwarp {
namespace {

bool number(const std::string& v, unsigned lo, unsigned hi, unsigned& out) {
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  return ec == std::errc() && p == v.data() + v.size() && out >= lo && out <= hi;
}

bool flag(const std::string& v, bool& out) {
  if (v.empty() || v == "1" || v == "on" || v == "yes") return out = true, true;
  if (v == "0" || v == "off" || v == "no") return out = false, true;
  return false;
}

}  // namespace

bool parse_mpa_spec(const std::string& spec, MpaParams& out, std::string& error,
                    TxOptions* tx) {
  TxOptions ignored;
  if (!tx) tx = &ignored;
  std::size_t pos = 0;
  while (pos < spec.size()) {
    std::size_t end = spec.find(',', pos);
    if (end == std::string::npos) end = spec.size();
    const std::string item = spec.substr(pos, end - pos);
    pos = end + 1;
    if (item.empty()) continue;
    const auto eq = item.find('=');
    const std::string key = item.substr(0, eq);
    const std::string val = eq == std::string::npos ? "" : item.substr(eq + 1);
    unsigned n = 0;
    bool ok = true;
    if (key == "rev") {
      ok = number(val, 1, 2, n);
      out.revision = static_cast<std::uint8_t>(n);
    } else if (key == "crc") {
      ok = flag(val, out.crc);
    } else if (key == "markers") {
      ok = flag(val, out.markers);
    } else if (key == "rtr") {
      if (val == "read") out.rtr = RtrType::kZeroRead;
      else if (val == "write") out.rtr = RtrType::kZeroWrite;
      else if (val == "send") out.rtr = RtrType::kZeroSend;
      else if (val == "none") out.rtr = RtrType::kNone;
      else ok = false;
    } else if (key == "fpdu") {
      ok = number(val, 64, 1u << 20, n);
      tx->max_fpdu = n;
    } else if (key == "corrupt_fpdu") {
      ok = number(val, 1, 1u << 30, n);
      tx->corrupt_nth = n;
    } else {
      error = "unknown MPA setting '" + key +
              "' (expected rev, crc, markers, rtr, fpdu, corrupt_fpdu; IRD and ORD come from rdma_cm's responder_resources and initiator_depth)";
      return false;
    }
    if (!ok) {
      error = "bad MPA setting '" + item + "'";
      return false;
    }
  }
  return true;
}

}  // namespace softrdma::iwarp
