// The process's rdma_cm ids in its monitoring report (the "cm_id" section, docs/monitoring.md),
// with the rdma tool's field names: cm-idn, lqpn, qp-type, state, ps, src-addr, src-port,
// dst-addr, dst-port, ifname.
#pragma once

namespace softrdma::cm {

// Adds the section (once); call when the agent has started.
void register_monitor_section();

}  // namespace softrdma::cm
