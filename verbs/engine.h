// The process-wide softrdma device behind the drop-in libraries: configuration
// (environment and optional file), the per-process address and LID, and the
// RoCEv2 engine. Created on first use; see docs/sharing-a-host.md.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "iwarp/device.h"
#include "lwtcp/raw_port.h"
#include "netdev/netdev.h"
#include "rxe/device.h"
#include "verbs/gid_table.h"
#include "wire/net.h"

namespace softrdma::verbs {

inline constexpr const char* kIwarpDeviceName = "softiwarp0";

struct Config {
  // The RoCE device's name; softiwarp0, the iWARP device's, selects iWARP (resolve_device).
  std::string device_name = "softroce0";
  std::string netdev;                // "udp:ADDRESS"; empty: a per-process loopback address
  std::string faults;                // netdev fault spec, e.g. "drop=0.01,seed=3"
  std::optional<std::uint32_t> mtu;  // link MTU override (bytes)
  std::string pcap;                  // trace file, see docs/tracing.md ("%p": the pid)
  std::string pcap_filter;           // trace filter spec, e.g. "qp=0x11;class=send,ack;snaplen=128"
  std::string transport = "roce";    // "iwarp": softiwarp0 is listed first and rdma_cm uses it
  std::string mpa;                   // iWARP MPA settings, see iwarp/mpa_spec.h
  std::string tcp = "auto";          // softiwarp0's TCP: auto | kernel | user (lwtcp/raw_port.h)
  std::string cc;                    // congestion control: "dcqcn" (default) or "none" (rxe/cc.h)
  std::string switch_port;  // an emulated switch port in front of receives (netdev/switch_port.h)
  std::optional<std::uint16_t> vlan;         // raw backends: tag frames with this 802.1Q VLAN ID
  std::uint32_t dpdk_qps = 64;               // DPDK: the QPs its mbuf pool is sized for
  std::vector<std::uint16_t> pkeys{0xFFFF};  // softroce0's P_Key table ("0xffff,0x8001")
  // udp, toward softrdma devices of this host: shared-memory rings and direct placement of RDMA
  // WRITEs ("direct"), the rings only ("rings"), or the kernel's UDP path ("kernel").
  enum class Local { kDirect, kRings, kKernel } local = Local::kDirect;
  bool stats = false;  // print the device's counters on stderr when the program exits
  // softrdma run: show the devices under /dev/infiniband and /sys/class/infiniband in a private
  // mount namespace (docs/middleware.md): where it can ("auto"), or else fail ("on"), or not.
  enum class View { kAuto, kOn, kOff } view = View::kAuto;
  bool device_given = false, transport_given = false;  // set by a variable or the file
};

// Reads SOFTRDMA_* variables, then the file named by SOFTRDMA_CONFIG (key=value lines: device,
// netdev, faults, mtu, pcap, pcap_filter, transport, mpa, tcp, vlan, dpdk_qps, pkeys, local,
// stats, view, cc, switch); the environment wins. False and a message on a bad value.
bool load_config(Config& cfg, std::string& error);
// What load_config does last: a device named softiwarp0 (the iWARP device's name) selects
// transport iwarp and leaves the RoCE device its default name; softiwarp0 with transport roce,
// or another name with transport iwarp, is a clash: false and a message naming the options.
bool resolve_device(Config& cfg, std::string& error);

class Engine {
 public:
  // The process's engine, created on first call; nullptr (and a message on
  // stderr, once) when it cannot start, e.g. a bad SOFTRDMA_NETDEV. After fork() the child
  // gets an engine of its own (own address, own threads) on its first call.
  static Engine* get();
  // Counts the forks this process descends from: objects made under an earlier generation
  // belong to the parent and are refused here (verbs/objects.h: inherited()).
  static unsigned generation();
  rxe::Device& device() { return *device_; }
  // The iWARP device (softiwarp0), created on first use; it traces to the same file.
  iwarp::Device& iwarp_device();
  // The userspace TCP softiwarp0 runs on (over af_packet, see docs/iwarp.md), or null.
  std::shared_ptr<iwarp::UserTcp> open_user_tcp(const std::shared_ptr<pcap::PcapngWriter>& trace);
  // The iWARP device if something started it, else nullptr (never starts it).
  iwarp::Device* iwarp_if_started() const { return iwarp_ready_.load(std::memory_order_acquire); }
  const Config& config() const { return cfg_; }
  std::uint16_t lid() const { return lid_; }
  const netdev::IpAddr& address() const { return address_; }
  // softroce0's port GID table (verbs/gid_table.h): 0 = the link-local default GID, 1 = address().
  const std::vector<PortGid>& gid_table() const { return gids_; }
  const wire::MacAddr& mac() const { return mac_; }
  // The peer address a LID-only address vector (no GRH) stands for.
  netdev::IpAddr address_for_lid(std::uint16_t lid) const;
  // stats=1: the device's and its netdev's counters, one line on stderr (at exit).
  void print_stats();

 private:
  Engine() = default;
  bool start(std::string& error);
  Config cfg_;
  lwtcp::TcpChoice tcp_choice_ = lwtcp::TcpChoice::kAuto;  // cfg_.tcp
  netdev::IpAddr address_;
  wire::MacAddr mac_{};
  std::vector<PortGid> gids_;
  std::uint16_t lid_ = 0;
  std::unique_ptr<rxe::Device> device_;
  std::once_flag iwarp_once_;
  std::unique_ptr<iwarp::Device> iwarp_;
  std::atomic<iwarp::Device*> iwarp_ready_{nullptr};
};

}  // namespace softrdma::verbs
