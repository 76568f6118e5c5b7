// The shared half of the raw Ethernet backends (AF_PACKET, AF_XDP, DPDK): softrdma builds whole
// Ethernet (optionally 802.1Q-tagged)/IPv4-or-IPv6/UDP frames itself — the interface's MAC, IPv4
// ID 0 with DF and a header checksum, DSCP/ECN from the traffic class, TTL / hop limit from the
// packet, UDP checksum 0 over IPv4 and computed over IPv6 (RFC 8200 requires one) — resolves
// neighbours (NeighbourTable, ARP or ND), applies faults, and turns received frames
// back into checked Packets. A backend only moves frames: put_frames() and put_frame() send,
// and its recv_batch() hands each received frame to take_frame().
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "netdev/faults.h"
#include "netdev/neighbours.h"
#include "netdev/netdev.h"
#include "netdev/packet_tx.h"
#include "wire/net.h"

namespace softrdma::netdev {

// The link a raw backend runs on.
struct RawLink {
  std::string ifname;  // the kernel's interface, or empty (a DPDK port on a NIC)
  int ifindex = 0;
  wire::MacAddr mac{};
  std::uint32_t mtu = 1500;               // IP MTU
  std::string driver;                     // its driver (ETHTOOL_GDRVINFO), "" when not said
  std::optional<std::uint16_t> vlan_tci;  // tag every frame we send with this 802.1Q TCI
};

// The first IPv4 address configured on `ifname` (getifaddrs); false with `error` set (prefixed
// with `where`) when the interface does not exist or has none.
bool interface_ipv4(const std::string& where, const std::string& ifname, IpAddr& out,
                    std::string& error);
// The interface `ip` is configured on, or "" when it is on none (then the kernel does not answer
// ARP or neighbour solicitations for it).
std::string interface_with(const IpAddr& ip);
// Fills the MAC, MTU, driver and index of the Ethernet interface `ifname`; false with `error` set.
bool read_link(const std::string& where, const std::string& ifname, RawLink& link,
               std::string& error);

class RawEthNetdev : public Netdev {
 public:
  ~RawEthNetdev() override;
  std::uint32_t mtu() const override { return link_.mtu; }
  std::span<const IpAddr> addresses() const override { return addrs_; }

  // Sets each packet's src to our address, fills the ICRC, applies faults and sends whole
  // frames (to the group MAC for a multicast dst). Refuses (stops at) a packet that is too
  // short, too long for the MTU or of the other address family. Packets to an unresolved neighbour
  // are queued.
  std::size_t send_batch(std::span<Packet* const> pkts) override;
  int next_timeout_ms() const override;
  // Releases delayed packets, retries resolutions and drops packets whose resolution failed.
  void service() override;
  void set_fault_observer(FaultObserver observer) override;
  // Multicast receive is not supported (EOPNOTSUPP); sending to a group works (01:00:5e MAC).

  const RawLink& link() const { return link_; }
  const wire::MacAddr& mac() const { return link_.mac; }
  // Whether `ip` has a live entry in our neighbour cache (for tests).
  bool resolved(const IpAddr& ip) const;

 protected:
  // Ethernet (+ tag) + IPv6 (or the shorter IPv4) + UDP.
  static constexpr std::size_t kMaxHdrLen =
      wire::kEthernetLen + wire::kVlanTagLen + wire::kIpv6Len + wire::kUdpLen;
  using TxFrame = netdev::TxFrame;  // our headers and the datagram (packet_tx.h)

  RawEthNetdev() = default;
  // Called once by the backend's open(), after link_ is known: fills in the neighbour table's
  // link fields and binds a UDP socket to local:4791 that reads nothing, so that the kernel
  // neither answers our datagrams with ICMP port unreachable nor gives the port to another
  // process. False with `error` set when the port is taken (an address not configured here is
  // no error: the socket then stays unbound). Without `hold_roce_port` (a link for a userspace
  // TCP, which carries no RoCE) there is no such socket.
  bool start(const std::string& where, const IpAddr& local, NeighbourTable::Config neighbours,
             const FaultConfig& faults, std::string& error, bool hold_roce_port = true);
  // Sends the frames, counting tx_packets and tx_bytes (tx_dropped, tx_errors for those lost).
  virtual void put_frames(std::span<const TxFrame> frames) = 0;
  // Counts the first `sent` frames as sent and the rest as dropped (a full queue or ring).
  void count_sent(std::span<const TxFrame> frames, std::size_t sent);
  // Sends one whole frame (ARP, or a datagram frame that waited for its neighbour).
  virtual bool put_frame(const std::uint8_t* frame, std::size_t len) = 0;
  // Whether put_udp_segments() works: the backend can hand the kernel (and through it the NIC) a
  // UDP GSO frame to cut. Off by default.
  virtual bool udp_segmentation() const { return false; }
  // Sends `segs` (their data: equal-sized datagrams of `seg_size` bytes, the last no longer) as
  // one UDP GSO frame behind `hdr` (headers for all of them, the UDP checksum seeded with the
  // pseudo-header sum), which leaves as segs.size() frames numbered on from hdr's IPv4 ID; counts
  // them as sent or dropped. False when the kernel refused the frame (nothing sent or counted:
  // udp_segmentation() is then off and the caller sends the datagrams a frame each).
  virtual bool put_udp_segments(const std::uint8_t* hdr, std::span<const TxFrame> segs,
                                std::uint16_t seg_size);
  // Releases packets the fault injector still holds; every backend's destructor calls it first,
  // while put_frames() still works.
  void flush_faults();

  // Handles one received Ethernet frame: frames of another VLAN are ignored (not ours); ARP and
  // ND go to the neighbour table; a RoCEv2 datagram for us (of our family) with a good header and
  // ICRC is copied into `out` with its addressing, traffic class and hop limit (true); anything
  // else is a counted drop. `orig_len` is the frame's length on the
  // wire (a truncated frame is malformed). A UDP GSO frame of `gso_size`-byte segments comes
  // out one segment per call, with `more` set while segments remain.
  bool take_frame(const std::uint8_t* frame, std::uint32_t len, std::uint32_t orig_len,
                  std::uint32_t gso_size, Packet& out, bool& more);
  std::size_t hdr_len() const { return hdr_len_; }

  // Whether the frames handed to take_frame() come untagged from our VLAN (checked below us,
  // the tag moved out of the frame); otherwise a tag in the frame must name our VLAN.
  bool vlan_checked_below_ = false;
  // Whether a frame with this 802.1Q tag (none: untagged) is of our VLAN, or of none as we are.
  bool vlan_ours(const std::optional<std::uint16_t>& tci) const;
  RawLink link_;
  std::unique_ptr<NeighbourTable> neighbours_;
  std::array<IpAddr, 1> addrs_;
  std::uint32_t local4_ = 0;  // when addrs_[0] is IPv4

 private:
  // Sends packets whose ICRCs are filled (the fault injector's), a frame each.
  void transmit(std::span<const Packet> pkts);
  // Sends packets without faults: runs of equal-sized datagrams to one resolved neighbour as UDP
  // GSO frames when the backend has udp_segmentation() (each segment's ICRC for the IPv4 ID it
  // will carry), the rest a frame each; fills the ICRCs and IDs.
  void send_frames(std::span<Packet* const> pkts);
  // Our headers for p's frame into `frame` (when `dst` is known) or the whole frame queued for
  // its neighbour (false: nothing to send now).
  bool frame_for(const Packet& p, NeighbourTable::Clock::time_point now, std::uint8_t* hdr,
                 TxFrame& frame);
  // Headers for p to `dst`. With `offload`, the UDP checksum holds only the pseudo-header sum
  // (for the kernel or NIC to complete); otherwise 0 over IPv4 and complete over IPv6.
  void build_headers(const Packet& p, const wire::MacAddr& dst, std::uint8_t* hdr,
                     bool offload = false) const;
  void put_queued(const std::uint8_t* frame, std::size_t len, bool data);
  // Hands an ICMPv6 neighbour solicitation or advertisement for us to the neighbour table.
  void take_nd(const wire::Ethernet& eth, const std::uint8_t* frame, std::size_t len);
  void drop_rx(FaultEvent ev, std::atomic<std::uint64_t>& counter, const Packet& view);

  std::size_t hdr_len_ = 0;
  int udp_fd_ = -1;  // holds local:4791
  std::unique_ptr<FaultInjector> faults_;
  FaultObserver observer_;
  std::uint32_t seg_next_ = 0;  // offset in the current GSO frame's payload of its next segment
};

}  // namespace softrdma::netdev
