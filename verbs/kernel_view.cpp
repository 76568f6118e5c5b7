#include "verbs/kernel_view.h"

#include <unistd.h>

#include <cstdio>

#include "netdev/netdev.h"
#include "verbs/gid_table.h"

namespace softrdma::verbs {

// The kernel interface the device's address is on, as gid_attrs/ndevs/N names it: the one
// named in af_packet:/af_xdp:, the one holding a udp: address, lo for the per-process
// default; empty for DPDK, whose port has no kernel interface.
std::string interface_name(const Config& cfg) {
  const std::string& n = cfg.netdev;
  if (n.empty()) return "lo";
  if (n.rfind("af_packet:", 0) == 0 || n.rfind("af_xdp:", 0) == 0) {
    const std::string rest = n.substr(n.find(':') + 1);
    return rest.substr(0, rest.find(':'));
  }
  netdev::IpAddr a;
  if (n.rfind("udp:", 0) == 0 && netdev::IpAddr::parse(n.substr(4), a)) {
    return netdev::interface_of(a);
  }
  return "";
}

namespace {

std::string node_desc(const std::string& device) {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  return std::string(host) + " " + device;
}

// As sysfs prints a GID: eight groups of four hex digits ("fe80:0000:…").
std::string gid_text(const core::Gid& g) {
  std::string out;
  char buf[8];
  for (std::size_t i = 0; i < g.size(); i += 2) {
    std::snprintf(buf, sizeof buf, "%s%02x%02x", i ? ":" : "", g[i], g[i + 1]);
    out += buf;
  }
  return out;
}

// One device as sysfs shows it: its transport's node type and GID type, and its GIDs (the
// process's own table, when given) or just how many entries the port has.
struct Device {
  std::string name;
  int uverbs;
  const char* node_type;
  const char* gid_type;
  const std::vector<core::Gid>* gids;
  std::size_t gid_entries;
};

// The files of one device under /sys/class/infiniband/NAME, relative to it.
std::vector<std::pair<std::string, std::string>> device_files(const Device& d,
                                                              const std::string& ndev) {
  std::vector<std::pair<std::string, std::string>> f = {
      {"node_type", d.node_type},
      {"node_desc", node_desc(d.name)},
      {"fw_ver", "0.1.0"},
      {"hw_rev", "1"},
      {"board_id", "SOFTRDMA"},
      {"ports/1/state", "4: ACTIVE"},
      {"ports/1/phys_state", "5: LinkUp"},
      {"ports/1/link_layer", "Ethernet"},
      {"ports/1/rate", "100 Gb/sec (4X EDR)"},
  };
  for (std::size_t i = 0; i < d.gid_entries; ++i) {
    const std::string ix = std::to_string(i);
    if (d.gids) f.emplace_back("ports/1/gids/" + ix, gid_text((*d.gids)[i]));
    f.emplace_back("ports/1/gid_attrs/types/" + ix, d.gid_type);
    if (!ndev.empty()) f.emplace_back("ports/1/gid_attrs/ndevs/" + ix, ndev);
  }
  for (auto& [path, text] : f) text += "\n";
  return f;
}

// Each GID's type: RoCE v2 for every entry of softroce0's table (verbs/gid_table.h), and
// what the kernel shows for an iWARP port's one GID. The GIDs themselves are each process's.
std::vector<Device> devices(const Config& cfg, const std::vector<core::Gid>* roce_gids) {
  const std::size_t roce_entries = roce_gids ? roce_gids->size() : kRoceGidEntries;
  return {{cfg.device_name, kRoceUverbs, "1: CA", "RoCE v2", roce_gids, roce_entries},
          {kIwarpDeviceName, kIwarpUverbs, "4: RNIC", "IB/RoCE v1", nullptr, 1}};
}

}  // namespace

std::vector<ViewEntry> kernel_view(const Config& cfg, const std::vector<core::Gid>* roce_gids) {
  using K = ViewEntry::Kind;
  std::vector<ViewEntry> v;
  const std::string ndev = interface_name(cfg);
  v.push_back({K::kDir, "/dev/infiniband", ""});
  for (const Device& d : devices(cfg, roce_gids)) {
    v.push_back({K::kCharDevice, "/dev/infiniband/uverbs" + std::to_string(d.uverbs), ""});
  }
  v.push_back({K::kCharDevice, "/dev/infiniband/rdma_cm", ""});
  v.push_back({K::kDir, "/sys/class/infiniband", ""});
  for (const Device& d : devices(cfg, roce_gids)) {
    const std::string root = "/sys/class/infiniband/" + d.name;
    v.push_back({K::kDir, root, ""});
    for (const auto& [rel, text] : device_files(d, ndev)) {
      // Each parent directory once, before the file.
      for (auto slash = rel.find('/'); slash != std::string::npos;
           slash = rel.find('/', slash + 1)) {
        const std::string dir = root + "/" + rel.substr(0, slash);
        bool have = false;
        for (const ViewEntry& e : v) have = have || (e.kind == K::kDir && e.path == dir);
        if (!have) v.push_back({K::kDir, dir, ""});
      }
      v.push_back({K::kFile, root + "/" + rel, text});
    }
  }
  v.push_back({K::kDir, "/sys/class/infiniband_verbs", ""});
  v.push_back({K::kFile, "/sys/class/infiniband_verbs/abi_version", "6\n"});
  for (const Device& d : devices(cfg, roce_gids)) {
    const std::string dir = "/sys/class/infiniband_verbs/uverbs" + std::to_string(d.uverbs);
    v.push_back({K::kDir, dir, ""});
    v.push_back({K::kFile, dir + "/ibdev", d.name + "\n"});
  }
  return v;
}

std::optional<std::string> view_file(const Config& cfg, const std::string& dir,
                                     const std::string& file,
                                     const std::vector<core::Gid>* roce_gids) {
  std::string path = dir;
  while (!path.empty() && path.back() == '/') path.pop_back();
  path += "/" + file;
  for (const ViewEntry& e : kernel_view(cfg, roce_gids)) {
    if (e.kind == ViewEntry::Kind::kFile && e.path == path) return e.content;
  }
  return std::nullopt;
}

}  // namespace softrdma::verbs
