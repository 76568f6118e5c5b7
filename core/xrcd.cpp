// core::Objects' XRC verbs (core/objects.h): opening and closing XRC domains and the checks of
// a new XRC QP.
#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>

#include "core/objects.h"

namespace softrdma::core {

Xrcd* Objects::open_xrcd(int fd, int oflags, int* err) {
  const auto fail = [err](int e) -> Xrcd* {
    if (err) *err = e;
    return nullptr;
  };
  struct stat st {};
  if (fd != -1 && fstat(fd, &st) != 0) return fail(EBADF);
  std::lock_guard lock(objects_mutex_);
  if (fd != -1) {
    auto it = std::find_if(xrcds_.begin(), xrcds_.end(), [&](const auto& x) {
      return x->keyed && x->dev == st.st_dev && x->ino == st.st_ino;
    });
    if (it != xrcds_.end()) {
      if ((oflags & O_CREAT) && (oflags & O_EXCL)) return fail(EINVAL);
      ++(*it)->opens;
      if (err) *err = 0;
      return it->get();
    }
  }
  // New to this device: the host's domain for the file decides (O_CREAT, O_EXCL).
  std::unique_ptr<XrcdRegistry> shared;
  if (fd != -1) {
    int e = 0;
    shared = XrcdRegistry::join(st.st_dev, st.st_ino, oflags, xrc_channel(), &e);
    if (!shared) return fail(e);
  }
  auto x = std::make_unique<Xrcd>();
  x->shared = std::move(shared);
  x->handle = next_xrcd_++;
  x->keyed = fd != -1;
  x->dev = st.st_dev;
  x->ino = st.st_ino;
  x->opens = 1;
  xrcds_.push_back(std::move(x));
  if (err) *err = 0;
  return xrcds_.back().get();
}

int Objects::close_xrcd(Xrcd* xrcd) {
  const bool used_by_qp = qp_uses_xrcd(xrcd);
  std::lock_guard lock(objects_mutex_);
  auto it =
      std::find_if(xrcds_.begin(), xrcds_.end(), [xrcd](const auto& x) { return x.get() == xrcd; });
  if (it == xrcds_.end()) return EINVAL;
  if (xrcd->opens > 1) {
    --xrcd->opens;
    return 0;
  }
  if (used_by_qp) return EBUSY;
  for (const auto& s : srqs_) {
    if (s->xrcd() == xrcd) return EBUSY;
  }
  xrcds_.erase(it);
  return 0;
}

int Objects::admit_xrc_qp(QpType type, const Pd* pd, const Cq* send_cq, const Xrcd* xrcd,
                          QpCap& cap) const {
  if (type == QpType::kXrcSend) {
    if (!pd || !send_cq || cap.max_send_wr > attr_.max_qp_wr || cap.max_send_sge > attr_.max_sge ||
        cap.max_inline_data > attr_.max_inline_data) {
      return EINVAL;
    }
    cap.max_send_wr = std::max<std::uint32_t>(cap.max_send_wr, 1);
    cap.max_send_sge = std::max<std::uint32_t>(cap.max_send_sge, 1);
    cap.max_inline_data = attr_.max_inline_data;
  } else {
    if (type != QpType::kXrcRecv || !xrcd) return EINVAL;
    cap = QpCap{};
  }
  cap.max_recv_wr = 0;
  cap.max_recv_sge = 0;
  return 0;
}

}  // namespace softrdma::core
