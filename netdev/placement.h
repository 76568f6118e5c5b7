// Direct placement, an optional capability of a backend (Netdev::placement()): the sender writes a
// payload straight into the receiver's memory inside a PeerWindow on the receiver's directory.
#pragma once

#include <memory>
#include <span>

#include "netdev/netdev.h"

namespace softrdma::netdev {

// Direct placement. Where a backend reaches another process of this host (the udp backend's
// rings), the sending transport may write a datagram's payload straight into the receiving
// process's memory (process_vm_writev) and mark the datagram `placed`. What may be written is the
// receiver's business: its transport shares a directory (a memfd in a format of its own) that the
// sender reads inside a window. The receiver waits for open windows before it narrows its
// directory (Placement::quiesce_peer_writes), so nothing is written after a region is withdrawn.
class PeerWindow {
 public:
  struct Link {  // the backend's side of a window
    virtual ~Link() = default;
    virtual void end_write() = 0;
    virtual void refuse() = 0;  // writes to this peer are not permitted: open no more windows
  };
  PeerWindow() = default;
  ~PeerWindow() { close(); }
  PeerWindow(const PeerWindow&) = delete;
  PeerWindow& operator=(const PeerWindow&) = delete;
  void open(int pid, std::span<const std::uint8_t> directory, std::shared_ptr<Link> link) {
    close();
    pid_ = pid;
    directory_ = directory;
    link_ = std::move(link);
  }
  void close() {
    if (link_) link_->end_write();
    link_.reset();
    pid_ = 0;
    directory_ = {};
  }
  void refuse() {
    if (link_) link_->refuse();
  }
  int pid() const { return pid_; }
  std::span<const std::uint8_t> directory() const { return directory_; }  // read-only, shared

 private:
  int pid_ = 0;
  std::span<const std::uint8_t> directory_;
  std::shared_ptr<Link> link_;
};

// What a backend that reaches other processes' memory offers (the udp backend's host-local rings).
class Placement {
 public:
  virtual ~Placement() = default;
  // Receiver: offers `fd` (a memfd sealed against resizing; the backend keeps a duplicate) to the
  // senders that attach from now on. False when it cannot (e.g. offered before).
  virtual bool share_directory(int fd) = 0;
  // Receiver, after withdrawing or narrowing a directory entry: returns once no window opened
  // before is still open.
  virtual void quiesce_peer_writes() = 0;
  // Sender: opens a window on dst's process when the path to dst reaches its memory and it shared
  // a directory (never with faults configured). Any thread; close it soon.
  virtual bool open_peer_window(const IpAddr& dst, PeerWindow& w) = 0;
};

}  // namespace softrdma::netdev
