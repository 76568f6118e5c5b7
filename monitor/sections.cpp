#include "monitor/sections.h"

#include <map>
#include <mutex>
#include <nlohmann/json.hpp>

namespace softrdma::monitor {
namespace {

std::mutex& mu() {
  static std::mutex m;
  return m;
}
std::map<std::string, SectionFn>& table() {
  static auto* t = new std::map<std::string, SectionFn>();
  return *t;
}

}  // namespace

void add_section(const std::string& name, SectionFn fn) {
  std::lock_guard lock(mu());
  table()[name] = fn;
}

void fill_sections(nlohmann::json& doc) {
  std::map<std::string, SectionFn> copy;
  {
    std::lock_guard lock(mu());
    copy = table();
  }
  for (const auto& [name, fn] : copy) {
    auto rows = nlohmann::json::parse(fn(), nullptr, false);
    if (rows.is_array()) doc[name] = std::move(rows);  // else left out: the reader sees none
  }
}

}  // namespace softrdma::monitor
