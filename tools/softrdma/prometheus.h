// The Prometheus text exposition (format 0.0.4) of a collection of reports (monitor/client.h):
// device counters as counters (softrdma_<name>_total), states, depths and sizes as gauges,
// labelled device, pid and comm, and qpn (with type) for the per-QP series.
#pragma once

#include <string>

#include "monitor/client.h"

namespace softrdma::tools {

std::string render_metrics(const monitor::Collection& c);

}  // namespace softrdma::tools
