// Where a running softrdma device is found: each process with a device listens on the unix
// socket /tmp/.softrdma-mon-<uid>/<pid> (a file, so it is found from every network namespace
// of the host; the directory is its user's alone, mode 0700). An entry counts only while its
// process holds the socket (it is in /proc/<pid>/net/unix), so a killed process's file is
// never listed, and listing removes it. A query connects, reads one JSON document to end of
// stream and closes. See docs/monitoring.md.
#pragma once

#include <string>
#include <vector>

namespace softrdma::monitor {

// The directory of `uid`'s endpoints, and `pid`'s endpoint in it.
std::string endpoint_dir(long uid);
std::string endpoint_path(long uid, int pid);

// Binds and listens on this process's endpoint: the fd, or -errno (-EADDRINUSE: a live process
// holds it; -EPERM: the directory is not this user's alone).
int listen_endpoint();

// The pids that hold an endpoint now, ascending: this user's, or every user's as root.
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
