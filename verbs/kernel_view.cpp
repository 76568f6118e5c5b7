#include "verbs/kernel_view.h"

#include <unistd.h>

#include "netdev/netdev.h"

namespace softrdma::verbs {

namespace {

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

std::string node_desc(const std::string& device) {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  return std::string(host) + " " + device;
}

struct Device {
  std::string name;
  int uverbs;
  bool iwarp;
};

// The files of one device under /sys/class/infiniband/NAME, relative to it.
std::vector<std::pair<std::string, std::string>> device_files(const Device& d,
                                                              const std::string& ndev) {
  std::vector<std::pair<std::string, std::string>> f = {
      {"node_type", d.iwarp ? "4: RNIC" : "1: CA"},
      {"node_desc", node_desc(d.name)},
      {"fw_ver", "0.1.0"},
      {"hw_rev", "1"},
      {"board_id", "SOFTRDMA"},
      {"ports/1/state", "4: ACTIVE"},
      {"ports/1/phys_state", "5: LinkUp"},
      {"ports/1/link_layer", "Ethernet"},
      {"ports/1/rate", "100 Gb/sec (4X EDR)"},
      // The one GID's type: RoCE v2, and what the kernel shows for an iWARP port's.
      {"ports/1/gid_attrs/types/0", d.iwarp ? "IB/RoCE v1" : "RoCE v2"},
  };
  if (!ndev.empty()) f.emplace_back("ports/1/gid_attrs/ndevs/0", ndev);
  for (auto& [path, text] : f) text += "\n";
  return f;
}

std::vector<Device> devices(const Config& cfg) {
  return {{cfg.device_name, kRoceUverbs, false}, {kIwarpDeviceName, kIwarpUverbs, true}};
}

}  // namespace

std::vector<ViewEntry> kernel_view(const Config& cfg) {
  using K = ViewEntry::Kind;
  std::vector<ViewEntry> v;
  const std::string ndev = interface_name(cfg);
  v.push_back({K::kDir, "/dev/infiniband", ""});
  for (const Device& d : devices(cfg)) {
    v.push_back({K::kCharDevice, "/dev/infiniband/uverbs" + std::to_string(d.uverbs), ""});
  }
  v.push_back({K::kCharDevice, "/dev/infiniband/rdma_cm", ""});
  v.push_back({K::kDir, "/sys/class/infiniband", ""});
  for (const Device& d : devices(cfg)) {
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
  for (const Device& d : devices(cfg)) {
    const std::string dir = "/sys/class/infiniband_verbs/uverbs" + std::to_string(d.uverbs);
    v.push_back({K::kDir, dir, ""});
    v.push_back({K::kFile, dir + "/ibdev", d.name + "\n"});
  }
  return v;
}

std::optional<std::string> view_file(const Config& cfg, const std::string& dir,
                                     const std::string& file) {
  std::string path = dir;
  while (!path.empty() && path.back() == '/') path.pop_back();
  path += "/" + file;
  for (const ViewEntry& e : kernel_view(cfg)) {
    if (e.kind == ViewEntry::Kind::kFile && e.path == path) return e.content;
  }
  return std::nullopt;
}

}  // namespace softrdma::verbs
