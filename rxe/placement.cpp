// Direct placement, the sending side, and switching it on (rxe/directory.h).
#include "netdev/placement.h"

#include <sys/uio.h>

#include <cerrno>

#include "rxe/device.h"

namespace softrdma::rxe {

bool Device::enable_direct_placement() {
  std::string error;
  netdev::Placement* placement = netdev_->placement();
  if (!placement) return false;
  auto d = Directory::create(error);
  if (!d || !placement->share_directory(d->fd())) return false;
  d->set_quiesce([placement] { placement->quiesce_peer_writes(); });
  dir_ = std::move(d);
  mrs_.set_watcher(dir_.get());
  return true;
}

bool Device::place_write(const netdev::IpAddr& dst, std::uint32_t dest_qpn, QpType type,
                         std::uint32_t src_qpn, const netdev::IpAddr& src, std::uint32_t rkey,
                         std::uint64_t msg_va, std::uint64_t msg_len, std::uint64_t off,
                         const std::uint8_t* data, std::uint32_t n, std::uint16_t pkey) {
  netdev::PeerWindow win;
  netdev::Placement* placement = netdev_->placement();
  if (!placement || !placement->open_peer_window(dst, win)) return false;
  std::uint64_t host = 0;
  if (!DirectoryView(win.directory())
           .writable(dest_qpn, type, src_qpn, src, rkey, msg_va, msg_len, host, pkey)) {
    return false;
  }
  iovec local{const_cast<std::uint8_t*>(data), n};
  iovec remote{reinterpret_cast<void*>(host + off), n};
  const ssize_t k = process_vm_writev(win.pid(), &local, 1, &remote, 1, 0);
  if (k == static_cast<ssize_t>(n)) return true;
  if (k < 0 && (errno == EPERM || errno == ESRCH || errno == ENOSYS)) {
    // Not permitted (ptrace rules, another user) or gone: that peer gets copies from now on.
    win.refuse();
    placement_refused_.fetch_add(1, std::memory_order_relaxed);
  }
  return false;  // the receiver copies the payload as usual
}

}  // namespace softrdma::rxe
