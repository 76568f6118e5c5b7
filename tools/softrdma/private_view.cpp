#include "tools/softrdma/private_view.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/nsfs.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <sstream>

namespace softrdma::tools {

namespace {

using verbs::ViewEntry;

std::string fail(const std::string& what) {
  return what + ": " + std::strerror(errno);
}

bool write_file(const std::string& path, const std::string& text) {
  const int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  close(fd);
  return ok;
}

// The user namespace the views of this user's runs share. Processes in different user
// namespaces may not write into each other's memory (process_vm_writev), which direct placement
// needs, so every non-root `softrdma run` of a user joins the one a live earlier run made. A run
// that makes one names it with an abstract socket "softrdma-view/UID/PID" that its program keeps
// open (across exec) for as long as it lives.
constexpr const char* kViewSocketPrefix = "softrdma-view/";

// An abstract socket's name in /proc/net/unix, "@softrdma-view/UID/PID": the PID, or 0.
pid_t holder_of(const std::string& line, uid_t uid) {
  const std::string want = "@" + std::string(kViewSocketPrefix) + std::to_string(uid) + "/";
  const auto at = line.find(want);
  if (at == std::string::npos) return 0;
  return static_cast<pid_t>(std::atol(line.c_str() + at + want.size()));
}

// Joins the view namespace of a live run of this user; false when there is none to join.
bool join_shared_userns(uid_t uid, gid_t gid) {
  std::FILE* f = std::fopen("/proc/net/unix", "re");
  if (!f) return false;
  std::vector<pid_t> holders;
  char line[512];
  while (std::fgets(line, sizeof line, f)) {
    if (const pid_t p = holder_of(line, uid); p > 0) holders.push_back(p);
  }
  std::fclose(f);
  // Its maps must be ours exactly: our uid and our gid, each to itself.
  const std::string uid_map = std::to_string(uid) + " " + std::to_string(uid) + " 1";
  const std::string gid_map = std::to_string(gid) + " " + std::to_string(gid) + " 1";
  auto map_is = [](pid_t p, const char* which, const std::string& want) {
    std::FILE* m = std::fopen(("/proc/" + std::to_string(p) + "/" + which).c_str(), "re");
    if (!m) return false;
    char buf[128] = {};
    const bool got = std::fgets(buf, sizeof buf, m) != nullptr;
    std::fclose(m);
    unsigned long in = 0, out = 0, n = 0;
    std::istringstream words(got ? buf : "");
    words >> in >> out >> n;
    return std::to_string(in) + " " + std::to_string(out) + " " + std::to_string(n) == want;
  };
  for (pid_t p : holders) {
    if (!map_is(p, "uid_map", uid_map) || !map_is(p, "gid_map", gid_map)) continue;
    const int ns = open(("/proc/" + std::to_string(p) + "/ns/user").c_str(), O_RDONLY | O_CLOEXEC);
    if (ns < 0) continue;
    uid_t owner = 0;
    const bool ours = ioctl(ns, NS_GET_OWNER_UID, &owner) == 0 && owner == uid;
    const bool joined = ours && setns(ns, CLONE_NEWUSER) == 0;
    close(ns);
    if (joined) return true;
  }
  return false;
}

// Names the user namespace just made, through a socket the exec'd program inherits.
void name_shared_userns(uid_t uid) {
  const int fd = socket(AF_UNIX, SOCK_DGRAM, 0);  // no CLOEXEC: the program holds it
  if (fd < 0) return;
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  const std::string name = kViewSocketPrefix + std::to_string(uid) + "/" + std::to_string(getpid());
  std::memcpy(a.sun_path + 1, name.data(), std::min(name.size(), sizeof a.sun_path - 2));
  const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), len) != 0) close(fd);
}

// A mount namespace of our own: plain for root (or anyone with CAP_SYS_ADMIN), else inside a
// user namespace in which we keep our uid and gid (so the program still runs as itself).
bool new_namespace(std::string& why) {
  if (unshare(CLONE_NEWNS) == 0) return true;
  const std::string plain = fail("mount namespace");
  const uid_t uid = geteuid();
  const gid_t gid = getegid();
  if (join_shared_userns(uid, gid)) {
    if (unshare(CLONE_NEWNS) == 0) return true;
    why = fail("mount namespace in the shared user namespace");
    return false;
  }
  if (unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) {
    why = plain + "; " + fail("user namespace");
    return false;
  }
  if (!write_file("/proc/self/setgroups", "deny") ||
      !write_file("/proc/self/uid_map", std::to_string(uid) + " " + std::to_string(uid) + " 1") ||
      !write_file("/proc/self/gid_map", std::to_string(gid) + " " + std::to_string(gid) + " 1")) {
    why = fail("user namespace id maps");
    return false;
  }
  name_shared_userns(uid);
  return true;
}

std::string parent_of(const std::string& path) {
  return path.substr(0, path.rfind('/'));
}
std::string base_of(const std::string& path) {
  return path.substr(path.rfind('/') + 1);
}

bool exists(const std::string& path) {
  struct stat st;
  return lstat(path.c_str(), &st) == 0;
}

class Builder {
 public:
  ~Builder() {
    for (int fd : fds_) close(fd);
  }

  bool build(const std::vector<ViewEntry>& entries, std::string& why) {
    null_ = open("/dev/null", O_PATH | O_CLOEXEC);
    if (null_ < 0) return (why = fail("/dev/null"), false);
    fds_.push_back(null_);
    // The view's top directories (/dev/infiniband, /sys/class/infiniband, ...): a tmpfs on each
    // that exists, else on its parent, which then shows its old entries again beside it.
    std::map<std::string, std::set<std::string>> tops;  // parent -> the top names in it
    for (const ViewEntry& e : entries) {
      if (e.kind == ViewEntry::Kind::kDir && !has_dir(entries, parent_of(e.path))) {
        tops[parent_of(e.path)].insert(base_of(e.path));
      }
    }
    std::set<std::string> covered_parents;
    for (const auto& [parent, names] : tops) {
      bool all = true;
      for (const std::string& n : names) all = all && exists(parent + "/" + n);
      if (all) {
        for (const std::string& n : names) {
          if (!mount_tmpfs(parent + "/" + n, 0755, why)) return false;
        }
      } else {
        if (!cover_keeping(parent, names, why)) return false;
        covered_parents.insert(parent);
      }
    }
    for (const ViewEntry& e : entries) {
      if (!make(e, covered_parents, why)) return false;
    }
    // Read-only from here: the view is what the devices show, not a place to write.
    for (const std::string& m : tmpfs_) {
      if (mount(nullptr, m.c_str(), nullptr,
                MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, nullptr) != 0) {
        return (why = fail("read-only " + m), false);
      }
    }
    return true;
  }

  // Back to the view as it was, after a failure part-way.
  void undo() {
    for (auto m = mounts_.rbegin(); m != mounts_.rend(); ++m) umount2(m->c_str(), MNT_DETACH);
  }

 private:
  static bool has_dir(const std::vector<ViewEntry>& entries, const std::string& path) {
    for (const ViewEntry& e : entries) {
      if (e.kind == ViewEntry::Kind::kDir && e.path == path) return true;
    }
    return false;
  }

  bool mount_tmpfs(const std::string& at, mode_t mode, std::string& why) {
    char opts[64];
    std::snprintf(opts, sizeof opts, "mode=%o,size=1m", static_cast<unsigned>(mode & 07777));
    if (mount("softrdma", at.c_str(), "tmpfs", MS_NOSUID, opts) != 0) {
      return (why = fail("tmpfs on " + at), false);
    }
    mounts_.push_back(at);
    tmpfs_.push_back(at);
    return true;
  }

  bool bind(const std::string& from, const std::string& to, std::string& why) {
    if (mount(from.c_str(), to.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0) {
      return (why = fail("bind " + to), false);
    }
    mounts_.push_back(to);
    return true;
  }

  // A tmpfs on `dir` that shows dir's entries (but those in `hide`) as before: directories and
  // files bound from the covered originals, symbolic links copied.
  bool cover_keeping(const std::string& dir, const std::set<std::string>& hide, std::string& why) {
    struct stat st;
    if (stat(dir.c_str(), &st) != 0) return (why = fail(dir), false);
    const int old = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (old < 0) return (why = fail(dir), false);
    fds_.push_back(old);
    struct Item {
      std::string name;
      mode_t mode;
      std::string link;
    };
    std::vector<Item> items;
    DIR* d = fdopendir(dup(old));
    if (!d) return (why = fail(dir), false);
    while (dirent* de = readdir(d)) {
      const std::string name = de->d_name;
      if (name == "." || name == ".." || hide.count(name)) continue;
      struct stat es;
      if (fstatat(old, de->d_name, &es, AT_SYMLINK_NOFOLLOW) != 0) continue;  // gone meanwhile
      Item it{name, es.st_mode, ""};
      if (S_ISLNK(es.st_mode)) {
        char target[4096];
        const ssize_t n = readlinkat(old, de->d_name, target, sizeof target - 1);
        if (n < 0) continue;
        it.link.assign(target, static_cast<std::size_t>(n));
      }
      items.push_back(std::move(it));
    }
    closedir(d);
    if (!mount_tmpfs(dir, st.st_mode, why)) return false;
    const std::string via = "/proc/self/fd/" + std::to_string(old) + "/";
    for (const Item& it : items) {
      const std::string to = dir + "/" + it.name;
      if (S_ISLNK(it.mode)) {
        if (symlink(it.link.c_str(), to.c_str()) != 0) return (why = fail("symlink " + to), false);
      } else if (S_ISDIR(it.mode)) {
        if (mkdir(to.c_str(), it.mode & 07777) != 0) return (why = fail("mkdir " + to), false);
        if (!bind(via + it.name, to, why)) return false;
      } else {
        const int fd = open(to.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
        if (fd < 0) return (why = fail("create " + to), false);
        close(fd);
        if (!bind(via + it.name, to, why)) return false;
      }
    }
    return true;
  }

  bool make(const ViewEntry& e, const std::set<std::string>& covered, std::string& why) {
    switch (e.kind) {
      case ViewEntry::Kind::kDir:
        // A top directory is a tmpfs already, unless it was made in its covered parent.
        if (exists(e.path) && !covered.count(parent_of(e.path))) return true;
        if (mkdir(e.path.c_str(), 0755) != 0) return (why = fail("mkdir " + e.path), false);
        return true;
      case ViewEntry::Kind::kFile: {
        const int fd = open(e.path.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0444);
        if (fd < 0) return (why = fail("create " + e.path), false);
        const bool ok =
            write(fd, e.content.data(), e.content.size()) == static_cast<ssize_t>(e.content.size());
        close(fd);
        if (!ok) return (why = fail("write " + e.path), false);
        return true;
      }
      case ViewEntry::Kind::kCharDevice: {
        // A character device anyone may open, as uverbs nodes are: the null device. Programs
        // only check that it is there; verbs never reach it.
        const int fd = open(e.path.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0666);
        if (fd < 0) return (why = fail("create " + e.path), false);
        close(fd);
        return bind("/proc/self/fd/" + std::to_string(null_), e.path, why);
      }
    }
    return false;
  }

  int null_ = -1;
  std::vector<int> fds_;
  std::vector<std::string> mounts_;  // in the order mounted
  std::vector<std::string> tmpfs_;
};

}  // namespace

bool enter_private_view(const std::vector<ViewEntry>& entries, std::string& why) {
  if (!new_namespace(why)) return false;
  // Nothing mounted from here on reaches the namespace we came from.
  if (mount(nullptr, "/", nullptr, MS_REC | MS_SLAVE, nullptr) != 0) {
    why = fail("private mounts");
    return false;
  }
  Builder b;
  if (!b.build(entries, why)) {
    b.undo();
    return false;
  }
  return true;
}

}  // namespace softrdma::tools
