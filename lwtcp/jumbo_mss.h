// Jumbo frames under lwIP. Debian's lwIP is built with TCP_MSS 1460: the MSS its SYNs offer and
// the most it takes of a peer's offer. On a link whose MTU carries more, the SYNs lwIP sends offer
// the link's MSS instead (rewritten as they leave: offer_mss), the peers' offers are noted as
// their SYNs arrive (PeerMss), and once the handshake is done the connection's MSS is raised to
// the smaller of the two (raise_mss). With no offer noted (a peer that made none, or one pushed
// out by a flood of newer SYNs) a connection keeps lwIP's MSS.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "lwtcp/segment_check.h"

struct tcp_pcb;  // lwIP's (lwip/tcp.h)

namespace softrdma::lwtcp {

// The MSS a link of IP MTU `mtu` carries: IPv4 or IPv6 and TCP headers without options.
std::uint16_t link_mss(std::uint32_t mtu, bool v4);

// Rewrites the MSS option of an outgoing SYN or SYN-ACK frame to `mss`, its TCP checksum updated;
// false (frame untouched) for a frame that is no such SYN or carries no MSS option.
bool offer_mss(std::uint8_t* frame, std::uint32_t len, std::uint16_t mss);

// The MSS a SYN or SYN-ACK frame offers; 0 for another frame or one without the option.
std::uint16_t syn_mss(const std::uint8_t* frame, std::uint32_t len);

// The MSS offered by the last kEntries SYNs and SYN-ACKs that arrived, by connection (the
// peer's address and port, ours). Bounded: a newer offer pushes out the oldest.
class PeerMss {
 public:
  static constexpr std::size_t kEntries = 64;

  // Notes the offer of an arriving frame if it is a SYN or SYN-ACK with one.
  void note(const std::uint8_t* frame, std::uint32_t len);
  // The offer noted for a connection, 0 if none; taken (forgotten).
  std::uint16_t take(const PeerKey& conn);

 private:
  struct Entry {
    PeerKey conn;
    std::uint16_t mss = 0;  // 0: a free entry
  };
  Entry* find(const PeerKey& conn);

  std::array<Entry, kEntries> entries_{};
  std::size_t next_ = 0;  // the entry a new connection's offer takes
};

// After the handshake (lwIP's lock held): the connection's MSS raised to `mss` when that is
// larger, and its congestion window at least lwIP's initial one for the new MSS.
void raise_mss(tcp_pcb* pcb, std::uint16_t mss);

}  // namespace softrdma::lwtcp
