// The answering side of a process's monitoring endpoint (monitor/endpoint.h): one thread that
// sleeps in accept() and answers each query with the text `answer()` returns. Only the same
// user or root is answered; others get {"error": "permission denied"}. Nothing runs until a
// query comes: the devices' packet paths never see it.
#pragma once

#include <functional>
#include <string>

namespace softrdma::monitor {

using Answer = std::function<std::string()>;

// Starts answering for this process (once a process; a forked child starts its own). False and
// a message when the endpoint cannot be bound.
bool start_server(Answer answer, std::string& error);

}  // namespace softrdma::monitor
