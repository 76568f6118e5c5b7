// XRC domains (ibv_open_xrcd, IBTA annex A14): the object XRC SRQs and XRC target QPs belong
// to. A domain is private (no file) or keyed by a file's inode, so that opening the same file
// again finds it, in this device and in every other of the host (core/xrcd_registry.h); it
// counts its opens and lives until the last one is closed.
#pragma once

#include <cstdint>
#include <memory>

#include "core/xrcd_registry.h"

namespace softrdma::core {

struct Xrcd {
  std::uint32_t handle = 0;
  bool keyed = false;  // opened with a file: dev and ino name it
  std::uint64_t dev = 0, ino = 0;
  std::uint32_t opens = 0;  // under the owner's (core::Objects') lock
  // A keyed domain's membership of the host-wide domain: its XRC SRQ numbers are the host's.
  std::unique_ptr<XrcdRegistry> shared;
};

}  // namespace softrdma::core
