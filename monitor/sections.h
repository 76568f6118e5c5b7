// Sections that layers above the device add to their process's report, such as librdmacm's
// rdma_cm ids ("cm_id"): a function that returns a JSON array, called on the monitoring thread
// for each query. libibverbs exports add_section to librdmacm as softrdma_monitor_section.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>

namespace softrdma::monitor {

using SectionFn = std::string (*)();

// Registers (or replaces) the section `name`.
void add_section(const std::string& name, SectionFn fn);
// Adds every section to `doc` (one whose text is not a JSON array is left out).
void fill_sections(nlohmann::json& doc);

}  // namespace softrdma::monitor
