// Small text helpers for the option specs of netdev/ (--faults, --trace-filter): trimming,
// splitting and whole-string number parsing. No allocation but split's vector.
#pragma once

#include <charconv>
#include <string_view>
#include <system_error>
#include <vector>

namespace softrdma::netdev::spec {

// `s` without leading and trailing blanks (spaces and tabs).
inline std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Splits `s` at `sep` into trimmed pieces (empty pieces kept, so callers can reject them).
inline std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  while (true) {
    const std::size_t at = s.find(sep);
    out.push_back(trim(s.substr(0, at)));
    if (at == std::string_view::npos) return out;
    s = s.substr(at + 1);
  }
}

// The whole of `s` as a number (false when empty, partly a number, or out of range).
template <class T>
bool parse_number(std::string_view s, T& out) {
  if (s.empty()) return false;
  const char* end = s.data() + s.size();
  auto [ptr, ec] = std::from_chars(s.data(), end, out);
  return ec == std::errc() && ptr == end;
}

}  // namespace softrdma::netdev::spec
