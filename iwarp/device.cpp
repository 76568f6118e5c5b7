#include "iwarp/device.h"

#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>

#include "iwarp/kernel_tcp_stream.h"
#include "pcap/pcapng_writer.h"

namespace softrdma::iwarp {

namespace {

constexpr std::uint64_t kKickTag = 0;
constexpr std::uint64_t kUserTcpTag = 1;  // below the first QP number
constexpr std::uint32_t kRequestEvents = EPOLLIN | EPOLLRDHUP;

}  // namespace

Device::Device(DeviceConfig cfg) : cfg_(std::move(cfg)) {
  attr_.max_sge_rd = 1;
  attr_.atomic_glob = false;
  attr_.max_mw = 0;  // no memory windows, no address handles
  attr_.max_ah = 0;
  if (cfg_.trace) trace_iface_ = cfg_.trace->add_interface(cfg_.name, 1 /* Ethernet */, 0);
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  kick_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  watch(kick_fd_, kKickTag, 0, EPOLLIN);
  if (cfg_.user_tcp) watch(cfg_.user_tcp->wait_fd(), kUserTcpTag, 0, EPOLLIN);
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "softrdma-iwarp");  // as top -H and perf show it
    progress_loop();
  });
}

Device::~Device() {
  stop_ = true;
  kick();
  if (thread_.joinable()) thread_.join();
  {
    std::lock_guard lock(progress_mu_);
    qps_.clear();
    for (auto& [tag, p] : pending_) watch(p.stream->wait_fd(), tag, kRequestEvents, 0);
  }
  if (cfg_.trace) cfg_.trace->flush();
  ::close(kick_fd_);
  ::close(epoll_fd_);
}

core::Gid Device::gid() const {
  // fe80::MAC-derived interface identifier is siw's choice; we keep the MAC in the GID as
  // its first six bytes, zero-padded, exactly as the kernel's siw reports it.
  core::Gid g{};
  std::copy(cfg_.mac.begin(), cfg_.mac.end(), g.begin());
  return g;
}

void Device::watch(int fd, std::uint64_t tag, std::uint32_t was, std::uint32_t want) {
  if (want == 0) {
    epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
    return;
  }
  epoll_event ev{};
  ev.events = want;
  ev.data.u64 = tag;
  epoll_ctl(epoll_fd_, was == 0 ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, fd, &ev);
}

void Device::kick() {
  const std::uint64_t one = 1;
  [[maybe_unused]] const ssize_t n = ::write(kick_fd_, &one, sizeof one);
}

// ---- objects (core::Objects asks)

void Device::set_object_event_handler(ObjectEventHandler fn) {
  std::lock_guard lock(object_event_mu_);
  object_event_handler_ = std::move(fn);
}

void Device::object_event(core::AsyncEventType type, Cq* cq, Srq* srq) {
  std::lock_guard lock(object_event_mu_);
  if (object_event_handler_) object_event_handler_(type, cq, srq);
}

bool Device::qp_uses(const Pd* pd, const Cq* cq, const Srq* srq) const {
  std::lock_guard lock(progress_mu_);
  for (const auto& [n, qp] : qps_) {
    if ((pd && qp->pd() == pd) || (cq && (qp->send_cq() == cq || qp->recv_cq() == cq)) ||
        (srq && qp->srq() == srq)) {
      return true;
    }
  }
  return false;
}

Qp* Device::create_qp(Pd* pd, core::QpType type, Cq* send_cq, Cq* recv_cq, Srq* srq,
                      core::QpCap& cap, bool sq_sig_all, int* err) {
  auto fail = [&](int e) {
    if (err) *err = e;
    return nullptr;
  };
  if (type != core::QpType::kRc) return fail(EOPNOTSUPP);
  if (const int e = admit_qp(pd, send_cq, recv_cq, srq, cap)) return fail(e);
  std::lock_guard lock(progress_mu_);
  const std::uint32_t qpn = next_qpn_++;
  auto qp = std::make_unique<Qp>(*this, qpn, pd, send_cq, recv_cq, srq, cap, sq_sig_all);
  Qp* raw = qp.get();
  qps_[qpn] = std::move(qp);
  return raw;
}

namespace {
void add(QpCounters& to, const QpCounters& c) {
  to.tx_fpdus += c.tx_fpdus;
  to.rx_fpdus += c.rx_fpdus;
  to.tx_bytes += c.tx_bytes;
  to.rx_bytes += c.rx_bytes;
  to.sendmsg_calls += c.sendmsg_calls;
  to.crc_errors += c.crc_errors;
  to.terminates_sent += c.terminates_sent;
  to.terminates_received += c.terminates_received;
  to.faults_injected += c.faults_injected;
  to.rx_direct_bytes += c.rx_direct_bytes;
}
}  // namespace

int Device::destroy_qp(Qp* qp) {
  // Passes push a QP's completions at once, under progress_mu_, and what they leave for after
  // it (callbacks) holds no pointer to the QP: once this returns nothing of it appears.
  std::lock_guard lock(progress_mu_);
  auto it = qps_.find(qp->qpn());
  if (it == qps_.end()) return EINVAL;
  add(retired_, it->second->counters());
  qps_.erase(it);
  return 0;
}

std::vector<std::pair<std::string, std::uint64_t>> Device::hw_counters() {
  QpCounters t;
  {
    std::lock_guard lock(progress_mu_);
    t = retired_;
    for (auto& [n, qp] : qps_) add(t, qp->counters());
  }
  std::vector<std::pair<std::string, std::uint64_t>> out = {
      {"tx_fpdus", t.tx_fpdus},
      {"rx_fpdus", t.rx_fpdus},
      {"tx_bytes", t.tx_bytes},
      {"rx_bytes", t.rx_bytes},
      {"rx_direct_bytes", t.rx_direct_bytes},
      {"sendmsg_calls", t.sendmsg_calls},
      {"crc_errors", t.crc_errors},
      {"terminates_sent", t.terminates_sent},
      {"terminates_received", t.terminates_received},
      {"faults_injected", t.faults_injected}};
  if (!cfg_.user_tcp) return out;
  for (auto& c : cfg_.user_tcp->counters()) out.push_back(std::move(c));
  return out;
}

// ---- connection management

int Device::open_stream(int fd, std::unique_ptr<ByteStream>& out) {
  if (cfg_.user_tcp && (out = cfg_.user_tcp->stream(fd))) return 0;
  return open_kernel_tcp_stream(fd, out);
}

int Device::connect(Qp* qp, int fd, const MpaParams& local, ConnectCallback cb) {
  std::unique_ptr<ByteStream> stream;
  if (const int rc = open_stream(fd, stream)) return rc;
  std::lock_guard lock(progress_mu_);
  Qp::AppLock qlock(*qp);
  const int rc = qp->start_active(stream, local, std::move(cb));
  kick();  // the progress thread recomputes its sleep (the reply's deadline)
  return rc;
}

int Device::read_request(int fd, std::chrono::milliseconds timeout, RequestCallback cb) {
  std::unique_ptr<ByteStream> stream;
  if (const int rc = open_stream(fd, stream)) return rc;
  std::lock_guard lock(progress_mu_);
  const std::uint64_t tag = next_tag_++;
  PendingRequest& p = pending_[tag];
  p.fd = fd;
  p.stream = std::move(stream);
  p.deadline = Clock::now() + timeout;
  p.cb = std::move(cb);
  watch(p.stream->wait_fd(), tag, 0, kRequestEvents);
  kick();  // the progress thread recomputes its sleep
  return 0;
}

void Device::read_pending(std::uint64_t tag) {
  auto it = pending_.find(tag);
  if (it == pending_.end()) return;
  PendingRequest& p = it->second;
  int err = 0;
  bool done = false;
  while (!done && !err) {
    std::size_t need = wire::kMpaHeaderLen;
    if (p.buf.size() >= wire::kMpaHeaderLen) {
      if (!wire::mpa_key_prefix(p.buf, wire::MpaKind::kRequest)) {
        err = EPROTO;
        break;
      }
      need += wire::load16(&p.buf[18]);
      if (need > wire::kMpaHeaderLen + wire::kMpaMaxPrivateData) {
        err = EPROTO;
        break;
      }
    }
    if (p.buf.size() == need) {
      done = true;
      break;
    }
    const std::size_t have = p.buf.size();
    p.buf.resize(need);
    const StreamIo r = p.stream->recv(std::span(p.buf).subspan(have));
    if (r.bytes > 0) {
      p.buf.resize(have + r.bytes);
      continue;
    }
    p.buf.resize(have);
    if (r.error == 0) {
      err = ECONNRESET;
    } else if (r.error != EAGAIN) {
      err = r.error;
    } else {
      return;  // wait for more
    }
  }
  RequestResult res;
  if (done) {
    auto f = wire::parse_mpa(p.buf);
    if (!f || f->kind != wire::MpaKind::kRequest) {
      err = EPROTO;
    } else {
      MpaRequest& r = res.request;
      r.revision = f->revision;
      r.crc = f->crc;
      r.markers = f->markers;
      r.enhanced = f->enhanced;
      r.peer_to_peer = f->enhanced && f->ird_ord.peer_to_peer;
      r.rtr = f->ird_ord.zero_read_rtr    ? RtrType::kZeroRead
              : f->ird_ord.zero_write_rtr ? RtrType::kZeroWrite
              : f->ird_ord.zero_send_rtr  ? RtrType::kZeroSend
                                          : RtrType::kNone;
      r.ird = f->ird_ord.ird;
      r.ord = f->ird_ord.ord;
      r.private_data.assign(f->private_data.begin(), f->private_data.end());
    }
  }
  res.error = err;
  watch(p.stream->wait_fd(), tag, kRequestEvents, 0);
  if (err == 0) requests_[p.fd] = ReadRequestDone{std::move(p.buf), std::move(p.stream)};
  callbacks_.push_back([cb = std::move(p.cb), res] { cb(res); });
  pending_.erase(it);
}

int Device::accept(Qp* qp, int fd, const MpaParams& local, AcceptCallback cb) {
  std::lock_guard lock(progress_mu_);
  auto it = requests_.find(fd);
  if (it == requests_.end()) return EINVAL;
  auto f = wire::parse_mpa(it->second.bytes);
  if (!f) return EINVAL;
  int rc;
  {
    Qp::AppLock qlock(*qp);
    rc = qp->start_passive(it->second.stream, local, *f, it->second.bytes, std::move(cb));
  }
  if (rc == 0) requests_.erase(it);
  kick();
  return rc;
}

int Device::reject(int fd, std::span<const std::uint8_t> private_data) {
  std::lock_guard lock(progress_mu_);
  auto it = requests_.find(fd);
  if (it == requests_.end()) return EINVAL;
  auto req = wire::parse_mpa(it->second.bytes);
  if (!req) return EINVAL;
  wire::MpaFrame f;
  f.kind = wire::MpaKind::kReply;
  f.reject = true;
  f.revision = req->revision;
  f.enhanced = req->enhanced;
  if (private_data.size() > max_private_data(f.revision)) return EINVAL;
  f.private_data = private_data;
  std::array<std::uint8_t, wire::kMpaHeaderLen + wire::kMpaMaxPrivateData> buf{};
  const auto n = wire::build_mpa(buf, f);
  if (!n) return EINVAL;
  const std::unique_ptr<ByteStream> stream = std::move(it->second.stream);
  requests_.erase(it);
  const StreamIo r = stream->send_buffer(buf.data(), *n);
  return r.bytes == *n ? 0 : (r.error ? r.error : EIO);
}

int Device::disconnect(Qp* qp) {
  Qp::AppLock qlock(*qp);
  if (!qp->stream_) return EINVAL;
  qp->close_graceful();
  qp->sync_epoll();
  return 0;
}

int Device::abort(Qp* qp) {
  Qp::AppLock qlock(*qp);
  if (!qp->stream_) return EINVAL;
  qp->close_abortive();
  return 0;
}

// ---- progress

int Device::next_timeout_ms() {
  std::lock_guard lock(progress_mu_);
  std::optional<Clock::time_point> next;
  for (auto& [tag, p] : pending_) {
    if (!next || p.deadline < *next) next = p.deadline;
  }
  for (auto& [n, qp] : qps_) {
    std::lock_guard qlock(qp->mu_);
    const auto d = qp->deadline();
    if (d && (!next || *d < *next)) next = *d;
  }
  const int tcp_ms = cfg_.user_tcp ? cfg_.user_tcp->next_timeout_ms() : -1;
  if (!next) return tcp_ms;
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(*next - Clock::now()).count();
  const int own = static_cast<int>(std::clamp<std::int64_t>(ms, 0, 60000));
  return tcp_ms < 0 ? own : std::min(own, tcp_ms);
}

void Device::run_timers() {
  const auto now = Clock::now();
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (it->second.deadline <= now) {
      RequestResult res;
      res.error = ETIMEDOUT;
      watch(it->second.stream->wait_fd(), it->first, kRequestEvents, 0);
      callbacks_.push_back([cb = std::move(it->second.cb), res] { cb(res); });
      it = pending_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto& [n, qp] : qps_) {
    std::lock_guard qlock(qp->mu_);
    qp->on_timer(now);
    qp->sync_epoll();
  }
}

void Device::service_qp(Qp* qp, bool readable, bool writable) {
  // An application thread waits for this QP: let it in first (the event stays pending).
  if (qp->app_waiting_.load(std::memory_order_relaxed) > 0) {
    std::this_thread::yield();
    return;
  }
  std::lock_guard qlock(qp->mu_);
  if (qp->stream_ && qp->stream_->readiness_signalled()) readable = writable = true;
  if (writable) qp->on_writable();
  if (readable) qp->on_readable();
  qp->sync_epoll();
}

std::vector<std::function<void()>> Device::collect_callbacks() {
  std::vector<std::function<void()>> out = std::move(callbacks_);
  callbacks_.clear();
  for (auto& [n, qp] : qps_) {
    auto cbs = qp->take_callbacks();
    for (auto& c : cbs) out.push_back(std::move(c));
  }
  return out;
}

void Device::progress_loop() {
  std::array<epoll_event, 64> evs;
  while (!stop_.load()) {
    const int n =
        epoll_wait(epoll_fd_, evs.data(), static_cast<int>(evs.size()), next_timeout_ms());
    std::vector<std::function<void()>> cbs;
    // The userspace TCP first: its frames and timers signal the streams that the QPs then read.
    if (cfg_.user_tcp) cfg_.user_tcp->poll();
    {
      std::lock_guard lock(progress_mu_);
      for (int i = 0; i < n; ++i) {
        const std::uint64_t tag = evs[i].data.u64;
        if (tag == kUserTcpTag) continue;  // polled above
        if (tag == kKickTag) {
          std::uint64_t v;
          [[maybe_unused]] const ssize_t r = ::read(kick_fd_, &v, sizeof v);
          continue;
        }
        if (tag >= (1ull << 32)) {
          read_pending(tag);
          continue;
        }
        auto it = qps_.find(static_cast<std::uint32_t>(tag));
        if (it == qps_.end()) continue;
        const std::uint32_t e = evs[i].events;
        service_qp(it->second.get(), (e & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0,
                   (e & (EPOLLOUT | EPOLLERR | EPOLLHUP)) != 0);
      }
      run_timers();
      cbs = collect_callbacks();
    }
    for (auto& cb : cbs) cb();
  }
}

bool Device::poll_progress() {
  std::unique_lock lock(progress_mu_, std::try_to_lock);
  if (!lock.owns_lock()) return false;
  for (auto& [n, qp] : qps_) {
    std::unique_lock qlock(qp->mu_, std::try_to_lock);
    if (!qlock.owns_lock()) continue;
    if (qp->phase_ == Qp::Phase::kRunning || qp->phase_ == Qp::Phase::kClosing) {
      qp->on_readable();
      qp->sync_epoll();
    }
  }
  auto cbs = collect_callbacks();
  lock.unlock();
  for (auto& cb : cbs) cb();
  return true;
}

}  // namespace softrdma::iwarp
