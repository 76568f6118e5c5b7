// Direct placement (docs/sharing-a-host.md): the device's directory of what senders of this host
// may write into its memory themselves — the QPs that receive RDMA WRITEs and the MRs open to
// them — kept in a sealed memfd that the netdev shares with them (netdev::PeerWindow). Entries
// are seqlocked; after withdrawing or changing one, the owner waits out the windows open on it, so
// nothing is written through an entry once its change has returned.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>

#include "core/mr.h"
#include "core/types.h"
#include "netdev/netdev.h"
#include "rxe/uses_core.h"

namespace softrdma::rxe {

// A QP as senders see it: published while it receives (RTR, RTS, SQD, SQE).
struct DirQp {
  std::uint32_t pd = 0;  // Pd::handle
  QpType type = QpType::kRc;
  bool remote_write = false;  // its access flags allow RDMA WRITE
  std::uint32_t dest_qpn = 0;
  netdev::IpAddr peer;
  std::uint16_t pkey = 0xFFFF;  // its P_Key: a sender's must match (types.h pkey_match)
};

// A memory region as senders see it: published while valid and open to remote writes.
struct DirMr {
  std::uint32_t rkey = 0;
  std::uint32_t pd = 0;
  std::uint64_t iova = 0, length = 0;
  std::uint64_t addr = 0;  // host address of iova
};

// It watches the device's MR table (core::RegionWatcher): open regions come and go with it.
class Directory : public core::RegionWatcher {
 public:
  // nullptr with `error` set when the memfd cannot be had.
  static std::unique_ptr<Directory> create(std::string& error);
  ~Directory();
  Directory(const Directory&) = delete;
  Directory& operator=(const Directory&) = delete;
  int fd() const { return fd_; }
  // Called after a change that narrows an entry (the netdev's quiesce_peer_writes).
  void set_quiesce(std::function<void()> fn) { quiesce_ = std::move(fn); }

  // Any thread. An entry that finds no free slot is not published (its writes take the normal
  // path). Changing or removing an entry waits out open windows.
  void set_qp(std::uint32_t qpn, const DirQp& q);
  void remove_qp(std::uint32_t qpn);
  void set_mr(const DirMr& m);
  void remove_mr(std::uint32_t rkey);
  void region_open(const core::Mr& mr) override {
    set_mr(DirMr{mr.rkey, mr.pd ? mr.pd->handle : 0, mr.iova, mr.length,
                 reinterpret_cast<std::uint64_t>(mr.addr)});
  }
  void region_closed(std::uint32_t rkey) override { remove_mr(rkey); }

 private:
  Directory() = default;
  int fd_ = -1;
  void* map_ = nullptr;
  std::size_t len_ = 0;
  std::mutex mu_;
  std::function<void()> quiesce_;
};

// A sender's reading of a peer's directory (untrusted bytes of another process: every read is
// bounds-checked, a torn or malformed entry is a "no").
class DirectoryView {
 public:
  explicit DirectoryView(std::span<const std::uint8_t> bytes);
  // Whether a WRITE of the message [msg_va, msg_va+msg_len) through rkey, from `src` QP `src_qpn`
  // of `type` with P_Key `pkey` to QP `qpn`, would be accepted; then *host is the host address
  // of msg_va.
  bool writable(std::uint32_t qpn, QpType type, std::uint32_t src_qpn, const netdev::IpAddr& src,
                std::uint32_t rkey, std::uint64_t msg_va, std::uint64_t msg_len,
                std::uint64_t& host, std::uint16_t pkey = 0xFFFF) const;

 private:
  std::span<const std::uint8_t> bytes_;
};

}  // namespace softrdma::rxe
