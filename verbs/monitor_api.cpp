// softrdma_monitor_section: how librdmacm.so.1 adds its rdma_cm ids to the process's monitoring
// report (monitor/sections.h); exported in the version node SOFTRDMA_PRIVATE_1.
#include <string>

#include "monitor/sections.h"

extern "C" __attribute__((visibility("default"))) void softrdma_monitor_section(
    const char* name, std::string (*fn)()) {
  softrdma::monitor::add_section(name, fn);
}
