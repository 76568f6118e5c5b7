#include "netdev/shm_link.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

namespace softrdma::netdev {

namespace {

using Clock = std::chrono::steady_clock;
constexpr std::uint64_t kHelloMagic = 0x6f6c6c65486d7253ull;  // "SrmHello"
constexpr std::uint32_t kHelloVersion = 1;
constexpr auto kRetry = std::chrono::seconds(1);         // a destination with no listener
constexpr auto kCheck = std::chrono::milliseconds(100);  // how often a sender looks for HUP
constexpr int kFullYields = 8;  // a full ring: yields before its datagrams are held
constexpr auto kFullWait = std::chrono::milliseconds(10);  // kMaxHeld held: then drop
constexpr std::size_t kMaxSpare = 1024;                    // buffers kept for held datagrams
constexpr auto kFullNap = std::chrono::microseconds(20);
constexpr auto kCheckWhileFull = std::chrono::milliseconds(1);
constexpr auto kControlEvery = std::chrono::milliseconds(1);
constexpr auto kQuiesceLimit = std::chrono::seconds(1);     // a sender that died inside a window
constexpr std::uint64_t kDirMagic = 0x0072694472725353ull;  // "SSrrDir"
constexpr std::size_t kMaxDirectory = std::size_t{64} << 20;
constexpr std::size_t kMaxOut = 256;
constexpr std::size_t kMaxIn = 256;

struct Hello {
  std::uint64_t magic;
  std::uint32_t version;
  std::uint32_t ring_bytes;
};

// The receiver's answer to a Hello: its directory for direct placement, as SCM_RIGHTS.
struct DirHello {
  std::uint64_t magic;
  std::uint32_t version;
  std::uint32_t reserved;
};

// A message of type T with room for N fds as SCM_RIGHTS, to send or to receive.
template <class T, std::size_t N>
struct FdMessage {
  T body{};
  iovec iov{&body, sizeof body};
  alignas(cmsghdr) char cbuf[CMSG_SPACE(N * sizeof(int))] = {};
  msghdr m{};
  FdMessage() {
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    m.msg_control = cbuf;
    m.msg_controllen = sizeof cbuf;
  }
  FdMessage(const FdMessage&) = delete;
  FdMessage& operator=(const FdMessage&) = delete;
  void set_fds(const int (&fds)[N]) {
    cmsghdr* c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(N * sizeof(int));
    std::memcpy(CMSG_DATA(c), fds, sizeof fds);
  }
  // After recvmsg: the fds received (-1 where none), which the caller then owns.
  void get_fds(int (&fds)[N]) {
    for (int& fd : fds) fd = -1;
    for (cmsghdr* c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
          c->cmsg_len == CMSG_LEN(N * sizeof(int))) {
        std::memcpy(fds, CMSG_DATA(c), sizeof fds);
      }
    }
  }
};

using HelloMessage = FdMessage<Hello, 2>;  // the ring and the bell
using DirMessage = FdMessage<DirHello, 1>;

socklen_t abstract_name(const IpAddr& addr, std::uint16_t port, sockaddr_un& sun) {
  sun = {};
  sun.sun_family = AF_UNIX;
  const std::string name = "softrdma-shm/" + std::to_string(port) + "/" + addr.str();
  std::memcpy(sun.sun_path + 1, name.data(), name.size());  // sun_path[0] = 0: abstract
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
}

bool hung_up(int fd) {
  pollfd p{fd, POLLRDHUP, 0};
  return poll(&p, 1, 0) > 0 && (p.revents & (POLLHUP | POLLRDHUP | POLLERR));
}

void close_fd(int& fd) {
  if (fd >= 0) close(fd);
  fd = -1;
}

}  // namespace

// A receiver's directory, mapped read-only, and its process: what a PeerWindow opens onto.
struct ShmLinks::Window : PeerWindow::Link {
  std::shared_ptr<ShmRing> ring;  // where the write sections are counted
  void* map = nullptr;
  std::size_t len = 0;
  int pid = 0;
  std::atomic<bool> refused{false};
  ~Window() override {
    if (map) munmap(map, len);
  }
  void end_write() override { ring->end_write(); }
  void refuse() override { refused.store(true, std::memory_order_relaxed); }
};

void ShmLinks::HeldQueue::push_back(Held&& h) {
  if (count_ == slots_.size()) {  // full: twice the slots, in order from the first
    std::vector<Held> bigger(std::max<std::size_t>(16, slots_.size() * 2));
    for (std::size_t i = 0; i < count_; ++i) {
      bigger[i] = std::move(slots_[(head_ + i) % slots_.size()]);
    }
    slots_.swap(bigger);
    head_ = 0;
  }
  slots_[(head_ + count_) % slots_.size()] = std::move(h);
  ++count_;
}

void ShmLinks::HeldQueue::clear() {
  slots_ = {};
  head_ = count_ = 0;
}

void ShmLinks::Out::reset() {
  if (ring) ring->publish();
  ring.reset();
  window.reset();
  close_fd(conn);
  close_fd(bell);
  state = State::kNone;
  dirty = false;
  held.clear();
  held_bytes = 0;
  retry_at = Clock::now() + kRetry;
}

std::unique_ptr<ShmLinks> ShmLinks::open(const IpAddr& addr, std::uint16_t port, int epfd,
                                         AtomicCounters& counters, std::string& error) {
  std::unique_ptr<ShmLinks> l(new ShmLinks(counters));
  auto fail = [&](const char* what) {
    error = std::string("host-local rings: ") + what + ": " + std::strerror(errno);
    return nullptr;
  };
  l->epfd_ = epfd;
  l->listen_fd_ = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (l->listen_fd_ < 0) return fail("socket");
  sockaddr_un sun;
  const socklen_t len = abstract_name(addr, port, sun);
  if (bind(l->listen_fd_, reinterpret_cast<sockaddr*>(&sun), len) != 0) return fail("bind");
  if (listen(l->listen_fd_, 64) != 0) return fail("listen");
  l->ctl_ep_ = epoll_create1(EPOLL_CLOEXEC);
  if (l->ctl_ep_ < 0) return fail("epoll_create1");
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = l->listen_fd_;
  if (epoll_ctl(l->ctl_ep_, EPOLL_CTL_ADD, l->listen_fd_, &ev) != 0) return fail("epoll_ctl");
  ev.data.fd = l->ctl_ep_;
  if (epoll_ctl(epfd, EPOLL_CTL_ADD, l->ctl_ep_, &ev) != 0) return fail("epoll_ctl");
  return l;
}

ShmLinks::~ShmLinks() {
  {
    std::lock_guard lock(send_mu_);
    for (auto& [k, o] : out_) reset(o);
  }
  while (!in_.empty()) drop_in(in_.size() - 1);
  if (ctl_ep_ >= 0) epoll_ctl(epfd_, EPOLL_CTL_DEL, ctl_ep_, nullptr);
  close_fd(ctl_ep_);
  close_fd(listen_fd_);
  if (const int fd = dir_fd_.exchange(-1); fd >= 0) close(fd);
}

std::size_t ShmLinks::outbound_up() const {
  std::lock_guard lock(send_mu_);
  return static_cast<std::size_t>(std::count_if(out_.begin(), out_.end(), [](const auto& e) {
    const Out& o = e.second;
    return o.ring && (o.state == Out::State::kUp || o.ring->attached()) && !o.ring->closed();
  }));
}

// --- send side

ShmLinks::Batch::Batch(ShmLinks* links) : links_(links) {
  if (links_) lock_ = std::unique_lock(links_->send_mu_);
}

ShmLinks::Batch::~Batch() {
  if (!links_) return;
  links_->publish_all();
  for (Out* o : links_->stalled_) o->stalled = false;
  links_->stalled_.clear();
  if (links_->holding()) {
    bool left = false;
    for (const auto& [k, o] : links_->out_) left |= !o.held.empty();
    links_->holding_.store(left, std::memory_order_relaxed);
  }
}

bool ShmLinks::Batch::takes(const Packet& p) {
  if (!links_) return false;
  Out* o = links_->route(p);
  return o && o->state == Out::State::kUp;
}

bool ShmLinks::Batch::send(const Packet& p, bool icrc_filled) {
  if (!links_) return false;
  Out* o = links_->route(p);
  if (!o || o->state != Out::State::kUp) return false;
  if ((o->held.empty() || links_->push_held(*o)) && o->ring->push(p, icrc_filled)) {
    links_->mark_dirty(*o);
    return true;
  }
  if (o->stalled) {  // it stayed full earlier in this batch: lose the rest without waiting
    bump(links_->counters_.tx_dropped);
    return true;
  }
  if (o->held.empty()) {
    // Full: let the receiver see what is there, and give it our core a few times (on two cores
    // a spinning sender would hold the receiver's).
    for (int round = 0; round < kFullYields; ++round) {
      links_->publish_all();
      if (o->ring->closed()) {
        links_->reset(*o);
        return false;  // the receiver is gone: the kernel's path (and its ICMP) from now on
      }
      sched_yield();
      if (o->ring->push(p, icrc_filled)) {
        links_->mark_dirty(*o);
        return true;
      }
    }
  }
  if (o->held_bytes + p.len > kMaxHeld && !links_->wait_below_cap(*o, p.len)) {
    if (o->state != Out::State::kUp) return false;
    o->stalled = true;
    links_->stalled_.push_back(o);
    bump(links_->counters_.tx_dropped);
    return true;
  }
  return links_->hold(*o, p, icrc_filled);
}

void ShmLinks::mark_dirty(Out& o) {
  if (o.dirty) return;
  o.dirty = true;
  dirty_.push_back(&o);
}

bool ShmLinks::push_held(Out& o) {
  while (!o.held.empty()) {
    Held& h = o.held.front();
    h.meta.data = h.bytes.data();
    if (!o.ring->push(h.meta, h.icrc_filled)) return false;
    mark_dirty(o);
    o.held_bytes -= h.meta.len;
    if (spare_.size() < kMaxSpare) spare_.push_back(std::move(h.bytes));
    o.held.pop_front();
  }
  return true;
}

bool ShmLinks::hold(Out& o, const Packet& p, bool icrc_filled) {
  if (p.len > kMaxDatagram) {  // no ring takes it
    bump(counters_.tx_dropped);
    return true;
  }
  Held h{p, {}, icrc_filled};
  if (!spare_.empty()) {
    h.bytes = std::move(spare_.back());
    spare_.pop_back();
  }
  h.bytes.assign(p.data, p.data + p.len);
  h.meta.data = nullptr;
  h.meta.cap = p.len;
  o.held_bytes += p.len;
  o.held.push_back(std::move(h));
  holding_.store(true, std::memory_order_relaxed);
  bump(counters_.tx_held);
  return true;
}

bool ShmLinks::wait_below_cap(Out& o, std::size_t len) {
  const auto start = Clock::now();
  auto next_check = start;
  for (;;) {
    publish_all();
    push_held(o);
    if (o.held_bytes + len <= kMaxHeld) return true;
    const auto now = Clock::now();
    if (o.ring->closed() || (now >= next_check && hung_up(o.conn))) {
      reset(o);
      return false;
    }
    if (now >= next_check) next_check = now + kCheckWhileFull;
    if (now - start >= kFullWait) return false;
    std::this_thread::sleep_for(kFullNap);
  }
}

bool ShmLinks::flush_held() {
  if (!holding()) return false;
  std::lock_guard lock(send_mu_);
  const auto now = Clock::now();
  bool left = false;
  for (auto& [k, o] : out_) {
    if (o.held.empty()) continue;
    if (o.state != Out::State::kUp || o.ring->closed()) {
      reset(o);
      continue;
    }
    if (now >= o.next_check) {
      o.next_check = now + kCheck;
      if (hung_up(o.conn)) {
        reset(o);
        continue;
      }
    }
    left |= !push_held(o);
  }
  publish_all();
  holding_.store(left, std::memory_order_relaxed);
  return left;
}

void ShmLinks::reset(Out& o) {
  if (!o.held.empty()) bump(counters_.tx_dropped, o.held.size());
  o.reset();
}

void ShmLinks::publish_all() {
  for (Out* o : dirty_) {
    o->dirty = false;
    if (o->ring && o->ring->publish()) {
      const std::uint64_t one = 1;
      [[maybe_unused]] ssize_t r = write(o->bell, &one, sizeof one);
    }
  }
  dirty_.clear();
}

ShmLinks::Out* ShmLinks::route(const Packet& p) {
  const Key k{p.dst, p.dst_port};
  Out* o;
  if (last_out_ && k == last_key_) {
    o = last_out_;
  } else {
    if (is_multicast(p.dst)) return nullptr;
    auto it = out_.find(k);
    if (it == out_.end()) {
      if (out_.size() >= kMaxOut) return nullptr;
      it = out_.emplace(k, Out{}).first;
    }
    o = &it->second;
    last_key_ = k;
    last_out_ = o;
  }
  switch (o->state) {
    case Out::State::kUp: {
      if (o->ring->closed()) {
        reset(*o);
        return o;
      }
      const auto now = Clock::now();
      if (now < o->next_check) return o;
      o->next_check = now + kCheck;
      if (hung_up(o->conn)) reset(*o);  // the receiver died without closing the ring
      return o;
    }
    case Out::State::kPending:
      if (o->ring->attached()) {
        o->state = Out::State::kUp;
        o->window = receive_directory(o->conn, o->ring);  // sent before the ring was attached
        return o;
      }
      if (Clock::now() >= o->next_check) {
        o->next_check = Clock::now() + kCheck;
        if (hung_up(o->conn)) o->reset();  // refused by the receiver
      }
      return o;
    case Out::State::kNone:
      if (Clock::now() >= o->retry_at) connect(k, *o);
      return o;
  }
  return o;
}

void ShmLinks::connect(const Key& k, Out& o) {
  o.retry_at = Clock::now() + kRetry;
  o.conn = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  sockaddr_un sun;
  const socklen_t len = abstract_name(k.addr, k.port, sun);
  if (o.conn < 0 || ::connect(o.conn, reinterpret_cast<sockaddr*>(&sun), len) != 0) {
    close_fd(o.conn);  // nobody listens: not a softrdma device of this host
    return;
  }
  std::string error;
  o.ring = ShmRing::create(ShmRing::kDefaultBytes, error);
  // The bell is an eventfd (a pipe would raise SIGPIPE in the sender once the receiver is gone).
  o.bell = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (!o.ring || o.bell < 0) {
    o.reset();
    return;
  }
  HelloMessage msg;
  msg.body = Hello{kHelloMagic, kHelloVersion, static_cast<std::uint32_t>(o.ring->bytes())};
  msg.set_fds({o.ring->fd(), o.bell});
  if (sendmsg(o.conn, &msg.m, MSG_DONTWAIT | MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof(Hello))) {
    o.reset();
    return;
  }
  o.state = Out::State::kPending;
  o.next_check = Clock::now() + kCheck;
}

// --- receive side

void ShmLinks::receive(std::span<Packet* const> pkts, std::size_t& n, SocketPath& socket) {
  if (socket.backlog()) return;
  if (settling_) {
    const std::size_t before = n;
    socket.read(pkts, n);
    if (n == before && Clock::now() >= settle_until_) settling_ = false;
    if (socket.backlog()) return;
  }
  recv(pkts, n, socket);
}

void ShmLinks::recv(std::span<Packet* const> pkts, std::size_t& n, SocketPath& socket) {
  const std::size_t rings = in_.size();
  for (std::size_t r = 0; r < rings && n < pkts.size(); ++r) {
    In& in = in_[(next_in_ + r) % rings];
    if (!in.ring) continue;  // no hello yet
    Packet view;
    bool icrc_filled = true;
    if (!in.seen_data && in.ring->peek(view, icrc_filled)) {
      // The sender has switched to the ring: what it sent before through the kernel goes first.
      in.seen_data = true;
      settling_ = true;
      settle_until_ = Clock::now() + kSettle;
      return;
    }
    while (n < pkts.size() && in.ring->peek(view, icrc_filled)) {
      if (socket.deliver(view, icrc_filled, *pkts[n])) ++n;
      in.ring->consume();
    }
    in.ring->release();
    if (in.ring->broken() && !in.closing) {
      bump(counters_.rx_malformed);  // the rest of that ring is lost; its sender is told
      in.closing = true;
      in.ring->close();
    }
  }
  if (rings) next_in_ = (next_in_ + 1) % rings;
  const auto now = Clock::now();
  // New senders and hang-ups wait for this, at most a millisecond (their datagrams go through
  // the kernel meanwhile), or for prepare_sleep: an idle poll costs no system call here.
  if (now >= next_control_) {
    next_control_ = now + kControlEvery;
    control();
  }
}

bool ShmLinks::prepare_sleep(bool wake_me) {
  // Only the thread that sleeps asks for wake-ups and silences the bells that answered; threads
  // that merely poll leave both alone, or the sleeper could miss a datagram.
  control();  // before blocking on their fds
  bool ready = true;
  for (In& in : in_) {
    if (!in.ring) continue;
    if (in.ring->wake_taken()) in.bell_pending = true;
    if (in.bell_pending) {
      std::uint64_t v;
      if (read(in.bell, &v, sizeof v) == sizeof v || errno != EAGAIN) in.bell_pending = false;
    }
    if (wake_me && !in.closing && !in.ring->arm()) ready = false;
  }
  return ready;
}

void ShmLinks::control() {
  std::array<epoll_event, 16> evs;
  const int k = epoll_wait(ctl_ep_, evs.data(), static_cast<int>(evs.size()), 0);
  for (int e = 0; e < k; ++e) {
    const int fd = evs[static_cast<std::size_t>(e)].data.fd;
    if (fd == listen_fd_) {
      for (;;) {
        const int c = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (c < 0) break;
        if (in_.size() >= kMaxIn) {
          close(c);  // the sender sees the hang-up and keeps to the kernel's path
          continue;
        }
        epoll_event ev{};
        ev.events = EPOLLIN | EPOLLRDHUP;
        ev.data.fd = c;
        if (epoll_ctl(ctl_ep_, EPOLL_CTL_ADD, c, &ev) != 0) {
          close(c);
          continue;
        }
        In in;
        in.conn = c;
        in_.push_back(std::move(in));
      }
      continue;
    }
    auto it = std::find_if(in_.begin(), in_.end(), [&](const In& in) { return in.conn == fd; });
    if (it == in_.end()) continue;
    if (!it->ring) {
      accept_hello(*it);
    } else {
      char b;
      if (::recv(fd, &b, 1, MSG_DONTWAIT) == 0 ||
          (evs[static_cast<std::size_t>(e)].events & (EPOLLHUP | EPOLLRDHUP | EPOLLERR))) {
        it->closing = true;  // the sender is gone: read what it left, then let go
        it->ring->close();
        epoll_ctl(ctl_ep_, EPOLL_CTL_DEL, fd, nullptr);
      }
    }
  }
  // Let go of rings whose sender is gone once they are read out, and of refused senders.
  for (std::size_t i = in_.size(); i-- > 0;) {
    In& in = in_[i];
    if (in.conn < 0 || (in.closing && (in.ring->broken() || in.ring->empty()))) drop_in(i);
  }
}

void ShmLinks::accept_hello(In& in) {
  HelloMessage msg;
  msghdr& m = msg.m;
  const Hello& h = msg.body;
  const ssize_t r = recvmsg(in.conn, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
  if (r < 0 && errno == EAGAIN) return;
  int fds[2];
  msg.get_fds(fds);
  std::string error;
  if (r == sizeof h && !(m.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) && h.magic == kHelloMagic &&
      h.version == kHelloVersion && fds[0] >= 0 && fds[1] >= 0) {
    in.ring = ShmRing::attach(fds[0], error);  // takes fds[0]
    fds[0] = -1;
    in.bell = fds[1];
    fds[1] = -1;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = in.bell;
    if (in.ring && epoll_ctl(epfd_, EPOLL_CTL_ADD, in.bell, &ev) == 0) {
      send_directory(in.conn);
      {
        std::lock_guard lock(attached_mu_);
        attached_.push_back(in.ring);
      }
      in.ring->set_attached();
      in.ring->arm();  // the receiving thread may be asleep already, with no request on it
      settling_ = true;
      return;
    }
  }
  // Not a sender we understand: hang up (it keeps to the kernel's path).
  for (int fd : fds) {
    if (fd >= 0) close(fd);
  }
  in.ring.reset();
  close_fd(in.bell);
  epoll_ctl(ctl_ep_, EPOLL_CTL_DEL, in.conn, nullptr);
  close_fd(in.conn);
}

void ShmLinks::drop_in(std::size_t i) {
  In& in = in_[i];
  if (in.ring) {
    in.ring->close();
    std::lock_guard lock(attached_mu_);
    std::erase(attached_, in.ring);
  }
  if (in.bell >= 0) epoll_ctl(epfd_, EPOLL_CTL_DEL, in.bell, nullptr);
  if (in.conn >= 0) epoll_ctl(ctl_ep_, EPOLL_CTL_DEL, in.conn, nullptr);
  close_fd(in.bell);
  close_fd(in.conn);
  in_.erase(in_.begin() + static_cast<std::ptrdiff_t>(i));
  if (next_in_ >= in_.size()) next_in_ = 0;
}

// --- direct placement

bool ShmLinks::share_directory(int fd) {
  const int dup = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (dup < 0) return false;
  int none = -1;
  if (!dir_fd_.compare_exchange_strong(none, dup)) {
    close(dup);
    return false;
  }
  return true;
}

void ShmLinks::send_directory(int conn) {
  const int fd = dir_fd_.load();
  if (fd < 0) return;
  DirMessage msg;
  msg.body = DirHello{kDirMagic, kHelloVersion, 0};
  msg.set_fds({fd});
  // Lost (a full socket): that sender simply never opens a window.
  [[maybe_unused]] ssize_t r = sendmsg(conn, &msg.m, MSG_DONTWAIT | MSG_NOSIGNAL);
}

std::shared_ptr<ShmLinks::Window> ShmLinks::receive_directory(int conn,
                                                              std::shared_ptr<ShmRing> ring) {
  DirMessage msg;
  const DirHello& h = msg.body;
  const msghdr& m = msg.m;
  const ssize_t r = recvmsg(conn, &msg.m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
  if (r < 0) return nullptr;  // no directory shared
  int fds[1];
  msg.get_fds(fds);
  const int fd = fds[0];
  auto w = std::make_shared<Window>();
  w->ring = std::move(ring);
  ucred cred{};
  socklen_t cred_len = sizeof cred;
  struct stat st {};
  // A file that could shrink under the mapping would be a SIGBUS here: refused, like a bad answer.
  const int seals = fd >= 0 ? fcntl(fd, F_GET_SEALS) : -1;
  const bool ok = r == sizeof h && !(m.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) &&
                  h.magic == kDirMagic && h.version == kHelloVersion && seals >= 0 &&
                  (seals & F_SEAL_SHRINK) && fstat(fd, &st) == 0 && st.st_size > 0 &&
                  static_cast<std::size_t>(st.st_size) <= kMaxDirectory &&
                  getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &cred, &cred_len) == 0 && cred.pid > 0;
  if (ok) {
    w->len = static_cast<std::size_t>(st.st_size);
    void* map = mmap(nullptr, w->len, PROT_READ, MAP_SHARED, fd, 0);
    w->map = map == MAP_FAILED ? nullptr : map;
    w->pid = cred.pid;
  }
  if (fd >= 0) close(fd);
  return w->map ? w : nullptr;
}

void ShmLinks::quiesce() {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  std::lock_guard lock(attached_mu_);
  for (const auto& r : attached_) {
    if (r->writers() == 0) continue;
    const auto give_up = Clock::now() + kQuiesceLimit;
    while (r->writers() != 0 && Clock::now() < give_up) sched_yield();
  }
}

bool ShmLinks::open_window(const IpAddr& dst, std::uint16_t port, PeerWindow& w) {
  std::lock_guard lock(send_mu_);
  Packet p;
  p.dst = dst;
  p.dst_port = port;
  Out* o = route(p);
  if (!o || o->state != Out::State::kUp || !o->window ||
      o->window->refused.load(std::memory_order_relaxed)) {
    return false;
  }
  o->ring->begin_write();
  if (o->ring->closed()) {
    o->ring->end_write();
    return false;
  }
  const Window& win = *o->window;
  w.open(win.pid, {static_cast<const std::uint8_t*>(win.map), win.len}, o->window);
  return true;
}

}  // namespace softrdma::netdev
