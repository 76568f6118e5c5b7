// What a UDP socket does not show of a received IPv4 datagram (its ID and flags, which the ICRC
// covers), read from a packet socket beside it. Needs CAP_NET_RAW; used from the receive path
// only (one thread at a time). See docs/backends.md, "What the ICRC check covers".
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>

#include "netdev/netdev.h"
#include "wire/icrc.h"
#include "wire/roce_opcode.h"

namespace softrdma::netdev {

class Ipv4HeaderView {
 public:
  // A view of the IPv4/UDP datagrams to addr:port (IHL 5, unfragmented); null when no packet
  // socket can be had (no CAP_NET_RAW).
  static std::unique_ptr<Ipv4HeaderView> open(const IpAddr& addr, std::uint16_t port);
  ~Ipv4HeaderView();
  Ipv4HeaderView(const Ipv4HeaderView&) = delete;
  Ipv4HeaderView& operator=(const Ipv4HeaderView&) = delete;

  // The ID and flags of the datagram `p` (as the UDP socket gave it), matched by source
  // address, port, length and BTH; nullopt when the view did not see it. The packet socket
  // holds a datagram's header before the UDP socket delivers the datagram (packet taps run
  // first), so a datagram read after open() is found unless the view's queue overflowed.
  std::optional<wire::Ipv4IdFlags> find(const Packet& p);

 private:
  Ipv4HeaderView() = default;
  void drain();
  struct Record {
    std::uint32_t src = 0;
    std::uint16_t sport = 0;
    std::uint16_t udp_len = 0;
    std::array<std::uint8_t, wire::kBthLen> bth{};
    wire::Ipv4IdFlags id_flags;
    bool used = true;
  };
  static constexpr std::size_t kRecords = 2048;
  int fd_ = -1;
  std::array<Record, kRecords> ring_{};
  std::size_t next_ = 0;  // where the next record goes
};

}  // namespace softrdma::netdev
