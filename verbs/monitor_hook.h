// Makes the process's engine findable while it runs (docs/monitoring.md): starts the monitoring
// endpoint, which answers queries with the devices' counters and objects.
#pragma once

namespace softrdma::verbs {

class Engine;

// Once the engine has started. A failure (the endpoint cannot be bound) is printed and leaves
// the engine running unmonitored.
void start_monitor(Engine& e);

}  // namespace softrdma::verbs
