// UDP socket backend: RoCEv2 datagrams over the host's UDP/IP stack (port 4791), with per-QP
// source ports, DF set, traffic class and hop limit per packet, sendmmsg/recvmmsg and UDP GRO.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "netdev/faults.h"
#include "netdev/ipv4_header_view.h"
#include "netdev/netdev.h"
#include "netdev/placement.h"
#include "netdev/shm_link.h"

namespace softrdma::netdev {

class UdpNetdev : public Netdev, private Placement {
 public:
  // Binds local:port. nullptr with `error` set (e.g. "udp:127.0.0.1:4791: Address already in
  // use") when the socket cannot be set up. With `host_local` (the default), datagrams between
  // softrdma devices of this host go through shared-memory rings instead of the kernel
  // (netdev/shm_link.h); without, and toward every other address, through the kernel.
  static std::unique_ptr<UdpNetdev> open(IpAddr local, std::string& error, FaultConfig faults = {},
                                         std::uint16_t port = kRoceV2Port, bool host_local = true);
  ~UdpNetdev() override;
  UdpNetdev(const UdpNetdev&) = delete;
  UdpNetdev& operator=(const UdpNetdev&) = delete;

  std::string name() const override;
  std::string backend() const override { return "udp"; }
  std::uint32_t mtu() const override { return mtu_; }
  std::span<const IpAddr> addresses() const override { return addrs_; }

  // Sets each packet's src to the local address and src_port to the port actually used (the
  // receive port when no socket could be bound to the one asked for), fills the ICRC, applies
  // faults and sends. Stops at (refuses) a packet that is too short, too long for the MTU or of
  // the other address family. A datagram the OS will not take is lost like on a wire: it is
  // counted in tx_errors but still accepted.
  std::size_t send_batch(std::span<Packet* const> pkts) override;
  std::size_t recv_batch(std::span<Packet* const> pkts) override;
  // rx_dropped includes the datagrams the kernel dropped at the receive socket (buffer full).
  Counters counters() const override;
  int wait_fd() const override { return epfd_; }
  int next_timeout_ms() const override;
  void service() override;
  bool prepare_sleep(bool wake_me = true) override;
  void require_icrc() override { icrc_always_ = true; }
  // Direct placement over the host-local rings (none without them; no windows with faults
  // configured: an injected loss must lose the payload too).
  Placement* placement() override { return shm_ ? this : nullptr; }
  void set_fault_observer(FaultObserver observer) override;
  // IPv4 (224.0.0.0/4) or IPv6 (ff00::/8) groups, on the interface that owns the local address:
  // one more socket per group, bound to group:port with SO_REUSEADDR and SO_REUSEPORT (several
  // processes may join one group), read by recv_batch like the main socket. Fails with the OS's
  // errno when the interface cannot join the group or has no route to send to it (e.g.
  // ENETUNREACH for IPv6 groups on lo); see docs/sharing-a-host.md.
  int join_group(const IpAddr& group) override;
  int leave_group(const IpAddr& group) override;
  static constexpr std::size_t kMaxGroups = 256;
  std::size_t groups() const;

  std::uint16_t port() const { return port_; }
  std::uint16_t roce_port() const override { return port_; }
  bool gro() const { return gro_; }  // the kernel may hand us coalesced datagrams
  // Send sockets kept open, one per source port; datagrams asking for a port beyond these share
  // one of them (and carry its port). Closing and making sockets as ports come and go cost a
  // receiver of 1,024 QPs so much time that it fell behind and its socket buffer overflowed.
  static constexpr std::size_t kMaxSendSockets = 64;
  std::size_t send_sockets() const;
  // The host-local path: null when off (or when its socket could not be set up).
  const ShmLinks* host_local() const { return shm_.get(); }

 private:
  bool share_directory(int fd) override { return shm_->share_directory(fd); }
  void quiesce_peer_writes() override { shm_->quiesce(); }
  bool open_peer_window(const IpAddr& dst, PeerWindow& w) override {
    return !faults_ && shm_->open_window(dst, port_, w);
  }

  struct Sock {
    int fd = -1;
    ~Sock();
  };
  struct SendEntry {
    std::shared_ptr<Sock> sock;  // null: binding failed, the receive socket sends instead
    std::uint16_t port = 0;      // the source port it sends from (the receive port when null)
  };
  struct Pending {  // a received segment waiting for room in the caller's batch
    Packet view;
    IpAddr expect;         // the address the socket it came from was bound to
    bool follows = false;  // a GRO buffer's second or later segment
  };
  struct LastOk {  // the last datagram whose ICRC passed (receive path)
    IpAddr src;
    std::uint16_t sport = 0;
    wire::Ipv4IdFlags id_flags;
    bool valid = false;
  };
  struct Group {
    IpAddr addr;
    std::unique_ptr<Sock> sock;
  };
  UdpNetdev() = default;
  // Where datagrams asking for source port `src_port` leave from: a socket bound to that port
  // while fewer than kMaxSendSockets are open, else one of those (src_port modulo their number;
  // none is ever closed, so a flow keeps its port), whose port the datagrams then carry.
  SendEntry send_socket(std::uint16_t src_port);
  std::shared_ptr<Sock> make_send_socket(std::uint16_t src_port) const;
  // Sends the packets (ICRCs computed here when no faults are configured, IDs and DF set).
  void transmit(std::span<Packet* const> pkts);
  void transmit_copies(std::span<const Packet> pkts);  // the fault injector's
  void send_chunk(int fd, Packet* const* pkts, std::size_t n);
  class RingsSocket;  // the unicast socket and deliver(), as the host-local rings see them
  // icrc_filled false: a host-local datagram whose sender left the ICRC out (not checked; filled
  // in when tracing asks for it).
  bool deliver(const Packet& view, const IpAddr& expect, Packet& out, bool icrc_filled = true,
               bool follows = false);
  // The ICRC check of a datagram from the kernel. `seen` gets the ID and flags it carried: ID 0
  // with DF, or one past the last good datagram's from the same source (tried first for a GRO
  // buffer's later segments, `follows`); else as a packet socket beside ours saw them (all 32
  // bits checked; opened, where CAP_NET_RAW allows, after the first datagram that needed
  // solving); else as solved from the ICRC (16 bits checked).
  bool check_icrc_full(const Packet& view, bool follows, wire::Ipv4IdFlags& seen);
  // Reads datagrams from `fd` (bound to `bound`) while pending_ is empty and the batch has room.
  void read_socket(int fd, const IpAddr& bound, std::span<Packet* const> pkts, std::size_t& n);
  void set_multicast_send_options(int fd) const;
  void set_pending_signal(bool on);

  std::array<IpAddr, 1> addrs_;
  std::uint16_t port_ = kRoceV2Port;
  std::uint32_t mtu_ = 1500;
  std::uint32_t scope_id_ = 0;  // for IPv6 link-local addresses
  bool v4_ = true;
  bool gro_ = false;
  bool gso_ = true;  // UDP_SEGMENT on send; off after the kernel refuses it
  int rx_fd_ = -1;
  int epfd_ = -1;
  int pend_efd_ = -1;
  std::unique_ptr<FaultInjector> faults_;
  FaultObserver observer_;  // receive drops; set before traffic starts
  std::unique_ptr<ShmLinks> shm_;
  bool icrc_always_ = false;                 // require_icrc(): tracing
  std::unique_ptr<Ipv4HeaderView> v4_view_;  // receive path only
  LastOk last_ok_;
  bool v4_view_tried_ = false;

  mutable std::mutex send_mu_;
  std::map<std::uint16_t, SendEntry> send_socks_;  // by the port asked for when it was made
  std::vector<std::uint16_t> send_order_;          // those ports, in the order they came

  // Multicast groups joined (any thread joins and leaves; recv_batch reads them).
  mutable std::mutex group_mu_;
  std::vector<Group> groups_;
  std::atomic<bool> have_groups_{false};

  // Receive state (one receiving thread at a time).
  std::size_t buf_size_ = 0;
  std::vector<std::uint8_t> rx_bufs_;
  std::deque<Pending> pending_;
  bool pending_signaled_ = false;
  // An empty read of the device's socket leaves it alone for a few microseconds: passes that
  // follow each other closely (a program polling several CQs) pay one system call, not one
  // each. Datagrams from this host come through the rings; a datagram arriving meanwhile
  // waits at most that long (the progress thread's epoll sees it at once).
  std::int64_t socket_quiet_until_ns_ = 0;
};

}  // namespace softrdma::netdev
