// What a kernel RDMA device would show of softrdma's devices under /dev and /sys: the
// character devices and sysfs files that programs look at directly instead of through verbs
// (UCX: /dev/infiniband/uverbsN and ports/N/gid_attrs; Open MPI: ibv_get_sysfs_path()).
// Only what every process of one `softrdma run` shares is in it: no GID, GUID or LID, which
// are each process's own (ports/1/gids/N is in a process's own view, for ibv_read_sysfs_file).
// See docs/middleware.md.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "verbs/engine.h"

namespace softrdma::verbs {

// The uverbs numbers behind each device's ibv_device.dev_name ("uverbs0", "uverbs1").
inline constexpr int kRoceUverbs = 0;
inline constexpr int kIwarpUverbs = 1;

struct ViewEntry {
  enum class Kind { kDir, kFile, kCharDevice };
  Kind kind;
  std::string path;     // absolute: "/sys/class/infiniband/softroce0/node_type"
  std::string content;  // kFile: the text, ending in a newline
};

// The entries for the devices of `cfg`, parents before children: /dev/infiniband (uverbsN and
// rdma_cm), /sys/class/infiniband/NAME/… and /sys/class/infiniband_verbs/….
// With `roce_gids` (a process's softroce0 GID table) it also has ports/1/gids/N, and
// gid_attrs/types/N and ndevs/N for exactly those N; without, for N < kRoceGidEntries.
std::vector<ViewEntry> kernel_view(const Config& cfg,
                                   const std::vector<core::Gid>* roce_gids = nullptr);

// The kernel interface softroce0's address is on (gid_attrs/ndevs/N), or "" (DPDK).
std::string interface_name(const Config& cfg);

// The content of the view's sysfs file dir/file ("/sys/class/infiniband/softroce0",
// "ports/1/link_layer"), for ibv_read_sysfs_file; nullopt when the view has no such file.
std::optional<std::string> view_file(const Config& cfg, const std::string& dir,
                                     const std::string& file,
                                     const std::vector<core::Gid>* roce_gids = nullptr);

}  // namespace softrdma::verbs
