// Where a running softrdma device is found: each process with a device listens on the abstract
// unix socket "softrdma-mon/<pid>" (per network namespace, released by the kernel when the
// process ends, killed or not, so no entry is ever stale). A query connects, reads one JSON
// document to end of stream and closes. See docs/monitoring.md.
#pragma once

#include <string>
#include <vector>

namespace softrdma::monitor {

// The abstract name of `pid`'s endpoint (without the leading NUL).
std::string endpoint_name(int pid);

// Binds and listens on this process's endpoint: the fd, or -errno (-EADDRINUSE: taken).
int listen_endpoint();

// The pids that hold an endpoint now (from /proc/net/unix), ascending.
std::vector<int> list_endpoints();

enum class Query {
  kOk,        // `out` holds the answer
  kGone,      // no such endpoint, or the process ended while answering
  kNoAnswer,  // it did not answer within the timeout (stopped, or stuck)
  kBadPeer,   // the socket is held by another pid than its name says
  kError,     // another failure: `error` says which
};
// Asks `pid` for its report; waits at most `timeout_ms` in all.
Query query(int pid, int timeout_ms, std::string& out, std::string& error);

// Whether `pid` holds its endpoint now (it ends with the process, before the process is reaped).
bool holds_endpoint(int pid);

// The uid that owns /proc/PID (-1 when there is no such process).
long process_uid(int pid);

}  // namespace softrdma::monitor
