// rxe::XrcRelay (rxe/xrc_relay.h): a message is a fixed header (magic, kind, the fields of a
// request or an answer) and, for a request, the packet as it arrived (BTH to ICRC).
#include "rxe/xrc_relay.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <type_traits>

namespace softrdma::rxe {

namespace {

constexpr std::uint32_t kMagic = 0x58524C31;  // "XRL1"
enum : std::uint8_t { kRequestKind = 1, kAnswerKind = 2 };

struct Head {
  std::uint32_t magic;
  std::uint8_t kind;
  std::uint8_t pad[3];
};
struct RequestMsg {
  Head head;
  RelayRequest rq;
};
struct AnswerMsg {
  Head head;
  RelayAnswer a;
};
static_assert(std::is_trivially_copyable_v<RequestMsg> && std::is_trivially_copyable_v<AnswerMsg>);

std::atomic<std::uint64_t> next_channel{1};

sockaddr_un address(std::int32_t pid, std::uint64_t channel, socklen_t* len) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  // Abstract: sun_path[0] is NUL, the name follows, unterminated.
  const int n = std::snprintf(a.sun_path + 1, sizeof a.sun_path - 1, "softrdma-xrc/%d/%llu",
                              static_cast<int>(pid), static_cast<unsigned long long>(channel));
  *len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
  return a;
}

}  // namespace

std::unique_ptr<XrcRelay> XrcRelay::open(int* err) {
  const int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    if (err) *err = errno;
    return nullptr;
  }
  const std::uint64_t channel = next_channel.fetch_add(1);
  socklen_t len = 0;
  const std::int32_t pid = getpid();
  const sockaddr_un a = address(pid, channel, &len);
  if (bind(fd, reinterpret_cast<const sockaddr*>(&a), len) != 0) {
    if (err) *err = errno;
    close(fd);
    return nullptr;
  }
  // Room for a burst of full-size requests: a target passes one at a time per QP.
  const int size = 4 << 20;
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
  if (err) *err = 0;
  return std::unique_ptr<XrcRelay>(new XrcRelay(fd, channel, pid));
}

XrcRelay::~XrcRelay() {
  close(fd_);
}

int XrcRelay::send_to(std::int32_t pid, std::uint64_t channel, const void* head,
                      std::size_t head_len, const void* body, std::size_t body_len) {
  socklen_t alen = 0;
  sockaddr_un a = address(pid, channel, &alen);
  iovec iov[2] = {{const_cast<void*>(head), head_len}, {const_cast<void*>(body), body_len}};
  msghdr m{};
  m.msg_name = &a;
  m.msg_namelen = alen;
  m.msg_iov = iov;
  m.msg_iovlen = body_len ? 2 : 1;
  ssize_t n;
  do {
    n = sendmsg(fd_, &m, MSG_DONTWAIT | MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return errno;
  return n == static_cast<ssize_t>(head_len + body_len) ? 0 : EMSGSIZE;
}

int XrcRelay::send_request(std::int32_t pid, std::uint64_t channel, const RelayRequest& rq,
                           const std::uint8_t* packet, std::size_t len) {
  if (len > kMaxPacket) return EMSGSIZE;
  RequestMsg m{};
  m.head.magic = kMagic;
  m.head.kind = kRequestKind;
  m.rq = rq;
  return send_to(pid, channel, &m, sizeof m, packet, len);
}

int XrcRelay::send_answer(std::int32_t pid, std::uint64_t channel, const RelayAnswer& a) {
  AnswerMsg m{};
  m.head.magic = kMagic;
  m.head.kind = kAnswerKind;
  m.a = a;
  return send_to(pid, channel, &m, sizeof m, nullptr, 0);
}

XrcRelay::Message XrcRelay::receive() {
  Message out;
  for (;;) {
    const ssize_t n = recv(fd_, buf_.data(), buf_.size(), MSG_DONTWAIT | MSG_TRUNC);
    if (n < 0) {
      if (errno == EINTR) continue;
      return out;  // EAGAIN: nothing waits
    }
    const auto len = static_cast<std::size_t>(n);
    Head h{};
    if (len < sizeof h || len > buf_.size()) {
      ++malformed_;
      continue;
    }
    std::memcpy(&h, buf_.data(), sizeof h);
    if (h.magic != kMagic) {
      ++malformed_;
      continue;
    }
    if (h.kind == kRequestKind && len > sizeof(RequestMsg)) {
      RequestMsg m;
      std::memcpy(&m, buf_.data(), sizeof m);
      out.kind = Message::Kind::kRequest;
      out.request = m.rq;
      out.packet = buf_.data() + sizeof m;
      out.len = len - sizeof m;
      return out;
    }
    if (h.kind == kAnswerKind && len == sizeof(AnswerMsg)) {
      AnswerMsg m;
      std::memcpy(&m, buf_.data(), sizeof m);
      if (m.a.count > m.a.responses.size()) {
        ++malformed_;
        continue;
      }
      out.kind = Message::Kind::kAnswer;
      out.answer = m.a;
      return out;
    }
    ++malformed_;
  }
}

}  // namespace softrdma::rxe
