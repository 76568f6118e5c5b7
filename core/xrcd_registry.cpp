// core::XrcdRegistry (core/xrcd_registry.h). A member is a device (one per process, more in
// tests) named by its process's pid and start time, which outlive a reused pid, and a token of
// its own. Every change takes the flock, first drops the members whose process is gone, and a
// last member's leave unlinks the segment under the lock: a device that opened the segment
// meanwhile finds it unlinked once it holds the lock, and opens it afresh. A join also removes
// the segments of other domains that only dead members held.
#include "core/xrcd_registry.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

namespace softrdma::core {

struct XrcdRegistry::Shared {
  struct Member {
    std::atomic<std::int32_t> pid;  // 0: a free slot
    std::atomic<std::uint64_t> start;
    std::atomic<std::uint64_t> token;
    std::atomic<std::uint64_t> channel;
  };
  struct SrqOwner {
    std::atomic<std::uint32_t> srqn;
    std::atomic<std::uint32_t> member;  // the member's slot + 1; 0: free
  };
  Member members[kMembers];
  SrqOwner srqs[kSrqSlots];
};

namespace {

static_assert(std::atomic<std::int32_t>::is_always_lock_free &&
                  std::atomic<std::uint64_t>::is_always_lock_free,
              "the segment's atomics are shared by processes");

// The start time of process `pid` in clock ticks since boot (/proc/PID/stat, field 22); 0 when
// it is gone.
std::uint64_t start_time(std::int32_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) return 0;
  const auto paren = line.rfind(')');  // the command name may hold spaces and parentheses
  if (paren == std::string::npos) return 0;
  std::istringstream fields(line.substr(paren + 2));
  std::string f;
  for (int i = 3; i <= 22 && fields >> f; ++i) {
    if (i == 22) return std::strtoull(f.c_str(), nullptr, 10);
  }
  return 0;
}

// This process's start time, read again in a child made by fork.
std::uint64_t own_start() {
  static std::atomic<std::int32_t> pid{0};
  static std::atomic<std::uint64_t> start{0};
  const std::int32_t me = getpid();
  if (pid.load() != me) {
    start.store(start_time(me));
    pid.store(me);
  }
  return start.load();
}

std::atomic<std::uint64_t> next_token{1};

bool alive(const XrcdRegistry::Shared::Member& m) {
  const std::int32_t pid = m.pid.load();
  if (pid == 0) return false;
  if (pid == getpid()) return m.start.load() == own_start();
  if (kill(pid, 0) != 0 && errno != EPERM) return false;
  return start_time(pid) == m.start.load();
}

// Drops the members whose process is gone, and the SRQ numbers they held. Under the lock.
void drop_dead(XrcdRegistry::Shared* s) {
  for (std::uint32_t i = 0; i < XrcdRegistry::kMembers; ++i) {
    auto& m = s->members[i];
    if (m.pid.load() == 0 || alive(m)) continue;
    for (auto& o : s->srqs) {
      if (o.member.load() == i + 1) o.member.store(0);
    }
    m.pid.store(0);
  }
}

// Removes the segments of other domains whose members all died without closing them (the last
// close removes a segment; a killed process cannot): each is looked at under its lock, skipped
// when another device holds that.
void sweep(const std::string& keep) {
  DIR* d = opendir("/dev/shm");
  if (!d) return;
  while (const dirent* e = readdir(d)) {
    const std::string name = std::string("/") + e->d_name;
    if (name.rfind("/softrdma-xrcd-", 0) != 0 || name == keep) continue;
    const int fd = shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0);
    if (fd < 0) continue;
    struct stat st {};
    if (flock(fd, LOCK_EX | LOCK_NB) == 0 && fstat(fd, &st) == 0 && st.st_nlink > 0 &&
        static_cast<std::size_t>(st.st_size) >= sizeof(XrcdRegistry::Shared)) {
      void* p =
          mmap(nullptr, sizeof(XrcdRegistry::Shared), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      if (p != MAP_FAILED) {
        auto* s = static_cast<XrcdRegistry::Shared*>(p);
        drop_dead(s);
        bool empty = true;
        for (const auto& m : s->members) empty = empty && m.pid.load() == 0;
        if (empty) shm_unlink(name.c_str());
        munmap(p, sizeof(XrcdRegistry::Shared));
      }
    }
    close(fd);
  }
  closedir(d);
}

}  // namespace

std::string XrcdRegistry::segment_name(std::uint64_t dev, std::uint64_t ino) {
  char name[64];
  std::snprintf(name, sizeof name, "/softrdma-xrcd-%" PRIx64 "-%" PRIx64, dev, ino);
  return name;
}

std::unique_ptr<XrcdRegistry> XrcdRegistry::join(std::uint64_t dev, std::uint64_t ino, int oflags,
                                                 std::uint64_t channel, int* err) {
  const std::string name = segment_name(dev, ino);
  sweep(name);
  const auto fail = [err](int e) -> std::unique_ptr<XrcdRegistry> {
    if (err) *err = e;
    return nullptr;
  };
  int fd = -1;
  for (;;) {
    fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) return fail(errno);
    struct stat st {};
    if (flock(fd, LOCK_EX) != 0 || fstat(fd, &st) != 0) {
      const int e = errno;
      close(fd);
      return fail(e);
    }
    if (st.st_nlink > 0) {
      if (static_cast<std::size_t>(st.st_size) < sizeof(Shared) &&
          ftruncate(fd, sizeof(Shared)) != 0) {
        const int e = errno;
        close(fd);
        return fail(e);
      }
      break;
    }
    close(fd);  // the last member removed it while we waited for the lock: open it afresh
  }
  void* p = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    const int e = errno;
    close(fd);
    return fail(e);
  }
  auto* s = static_cast<Shared*>(p);
  drop_dead(s);
  std::uint32_t live = 0, free_slot = kMembers;
  for (std::uint32_t i = 0; i < kMembers; ++i) {
    if (s->members[i].pid.load() != 0) {
      ++live;
    } else if (free_slot == kMembers) {
      free_slot = i;
    }
  }
  int e = 0;
  if (live == 0 && !(oflags & O_CREAT)) {
    e = EINVAL;  // no such domain
  } else if (live > 0 && (oflags & O_CREAT) && (oflags & O_EXCL)) {
    e = EINVAL;  // it exists
  } else if (free_slot == kMembers) {
    e = ENOMEM;
  }
  if (e != 0) {
    if (live == 0) shm_unlink(name.c_str());  // made only to look
    munmap(p, sizeof(Shared));
    close(fd);  // and the lock with it
    return fail(e);
  }
  auto& m = s->members[free_slot];
  m.start.store(own_start());
  m.token.store(next_token.fetch_add(1));
  m.channel.store(channel);
  m.pid.store(getpid());
  flock(fd, LOCK_UN);
  if (err) *err = 0;
  return std::unique_ptr<XrcdRegistry>(new XrcdRegistry(fd, s, name, free_slot));
}

XrcdRegistry::XrcdRegistry(int fd, Shared* shared, std::string name, std::uint32_t member)
    : fd_(fd), shared_(shared), name_(std::move(name)), member_(member) {}

XrcdRegistry::~XrcdRegistry() {
  lock();
  for (auto& o : shared_->srqs) {
    if (o.member.load() == member_ + 1) o.member.store(0);
  }
  shared_->members[member_].pid.store(0);
  drop_dead(shared_);
  bool last = true;
  for (const auto& m : shared_->members) last = last && m.pid.load() == 0;
  if (last) shm_unlink(name_.c_str());
  munmap(shared_, sizeof(Shared));
  close(fd_);  // drops the lock
}

void XrcdRegistry::lock() const {
  while (flock(fd_, LOCK_EX) != 0 && errno == EINTR) {
  }
}

void XrcdRegistry::unlock() const {
  flock(fd_, LOCK_UN);
}

std::uint32_t XrcdRegistry::claim_srqn(std::uint32_t from,
                                       const std::function<bool(std::uint32_t)>& free_here) {
  lock();
  drop_dead(shared_);
  std::uint32_t n = from & 0xFFFFFF;
  std::uint32_t got = 0;
  for (std::uint32_t tries = 0; tries <= kSrqSlots; ++tries, n = (n + 1) & 0xFFFFFF) {
    if (n == 0) continue;
    auto& o = shared_->srqs[n % kSrqSlots];
    if (o.member.load() != 0 || !free_here(n)) continue;
    o.srqn.store(n);
    o.member.store(member_ + 1);
    got = n;
    break;
  }
  unlock();
  return got;
}

void XrcdRegistry::release_srqn(std::uint32_t srqn) {
  lock();
  auto& o = shared_->srqs[srqn % kSrqSlots];
  if (o.srqn.load() == srqn && o.member.load() == member_ + 1) o.member.store(0);
  unlock();
}

bool XrcdRegistry::owner_of(std::uint32_t srqn, std::int32_t* pid, std::uint64_t* channel) const {
  const auto& o = shared_->srqs[srqn % kSrqSlots];
  const std::uint32_t owner = o.member.load();
  if (owner == 0 || owner == member_ + 1 || owner > kMembers || o.srqn.load() != srqn) return false;
  const auto& m = shared_->members[owner - 1];
  if (!alive(m)) return false;
  if (pid) *pid = m.pid.load();
  if (channel) *channel = m.channel.load();
  return true;
}

}  // namespace softrdma::core
