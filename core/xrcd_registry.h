// A keyed XRC domain as every device of the host sees it, so that ibv_open_xrcd's file
// semantics hold across processes (the kernel's: one domain per inode): a shared-memory segment
// named after the file's device and inode lists the devices that have the domain open and which
// of them holds each XRC SRQ number, so that an XRCETH names one SRQ whichever device reads it.
// Changed under an flock on the segment; a member that died without leaving is dropped by the
// next change. Threads: any; each change locks, held_elsewhere() reads without a lock.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace softrdma::core {

class XrcdRegistry {
 public:
  static constexpr std::uint32_t kMembers = 256;     // devices with the domain open at once
  static constexpr std::uint32_t kSrqSlots = 16384;  // SRQ numbers, by number modulo this

  // Joins the domain of the file (dev, ino) as a new member: O_CREAT makes it when no live
  // member has it open, O_EXCL (with O_CREAT) refuses it when one has, as the kernel does
  // (EINVAL). nullptr and *err (EINVAL, ENOMEM when kMembers have it open, or the OS's error
  // for the segment) otherwise.
  // `channel`: the member's relay channel (rxe/xrc_relay.h), which other members reach it by.
  static std::unique_ptr<XrcdRegistry> join(std::uint64_t dev, std::uint64_t ino, int oflags,
                                            std::uint64_t channel, int* err);
  ~XrcdRegistry();  // leaves: frees this member's SRQ numbers; the last member removes the segment
  XrcdRegistry(const XrcdRegistry&) = delete;
  XrcdRegistry& operator=(const XrcdRegistry&) = delete;

  // A number for a new XRC SRQ of this member: the first from `from` on (0 skipped) that
  // `free_here` accepts and no live member of the domain holds; 0 when there is none.
  std::uint32_t claim_srqn(std::uint32_t from, const std::function<bool(std::uint32_t)>& free_here);
  void release_srqn(std::uint32_t srqn);
  // Whether another live member of the domain holds SRQ number `srqn`.
  bool held_elsewhere(std::uint32_t srqn) const { return owner_of(srqn, nullptr, nullptr); }
  // The same, with that member's process and relay channel.
  bool owner_of(std::uint32_t srqn, std::int32_t* pid, std::uint64_t* channel) const;
  // The segment's name under /dev/shm (for docs and tests).
  static std::string segment_name(std::uint64_t dev, std::uint64_t ino);

  struct Shared;

 private:
  XrcdRegistry(int fd, Shared* shared, std::string name, std::uint32_t member);
  void lock() const;
  void unlock() const;

  int fd_;
  Shared* shared_;
  std::string name_;
  std::uint32_t member_;  // this member's slot
};

}  // namespace softrdma::core
