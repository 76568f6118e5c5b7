// rsockets' lingering closes: a socket that sent its close stays until the peer's close or
// DREQ, a broken connection or kLinger (at exit, up to kExitLinger), as TCP's FIN_WAIT_2.
#include <cstdlib>

#include "cm/rsocket_internal.h"

namespace softrdma::cm::rsockets {
namespace {

// Sockets closed by us whose peer has not closed yet (see the top of the file).
struct Lingering {
  std::shared_ptr<RSocket> s;
  std::chrono::steady_clock::time_point until;
};
std::mutex g_linger_mu;
std::vector<Lingering>& lingerers() {
  static auto* v = new std::vector<Lingering>;
  return *v;
}

// Whether a lingering socket may go: the peer closed, its DREQ came (an event on the id's
// channel), the connection broke or the time is up.
bool linger_done(RSocket* s, std::chrono::steady_clock::time_point until) {
  drain(s);  // sends nothing: s->closing
  if (s->peer_closed || s->broken || std::chrono::steady_clock::now() >= until) return true;
  pollfd p{s->id->channel->fd, POLLIN, 0};
  return poll(&p, 1, 0) > 0;
}

}  // namespace

void reap(bool at_exit) {
  std::lock_guard lock(g_linger_mu);
  auto& v = lingerers();
  const auto exit_until = std::chrono::steady_clock::now() + kExitLinger;
  for (;;) {
    for (auto it = v.begin(); it != v.end();) {
      std::lock_guard sl(it->s->mu);
      if (linger_done(it->s.get(), at_exit ? std::min(it->until, exit_until) : it->until)) {
        teardown(it->s.get());
        it = v.erase(it);
      } else {
        ++it;
      }
    }
    if (!at_exit || v.empty()) return;
    poll(nullptr, 0, 1);
  }
}

void lingering(std::shared_ptr<RSocket> s) {
  static std::once_flag once;
  // Registered after the device's own exit handler (which prints --stats): runs before it.
  std::call_once(once, [] { std::atexit([] { reap(true); }); });
  {
    std::lock_guard lock(g_linger_mu);
    lingerers().push_back(Lingering{std::move(s), std::chrono::steady_clock::now() + kLinger});
  }
  reap(false);
}

}  // namespace softrdma::cm::rsockets
