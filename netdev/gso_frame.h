// Received Ethernet frames that carry a RoCEv2 datagram: the datagram with its addressing, and
// the segment size of a UDP GSO frame that reached us whole without one (generic XDP on a veth
// whose peer kept its offloads hands such a frame over as one datagram longer than the MTU).
#pragma once

#include <cstdint>

#include "netdev/netdev.h"
#include "wire/frame.h"

namespace softrdma::netdev {

// The UDP datagram of a parsed frame (v.udp set), with its addressing, traffic class and hop
// limit; it points into the frame.
Packet datagram_view(const wire::FrameView& v);

// The segment size of `frame` (Ethernet, `len` bytes) when its UDP datagram is several RoCEv2
// datagrams back to back (a UDP GSO frame that came whole without its size): the first length
// after which a BTH of the same P_Key starts and for which the first datagram's ICRC checks (for
// the frame's IPv4 ID); for a datagram longer than an IP packet of `mtu` bytes carries, failing
// that, the first length whose ICRC checks. 0 for one datagram, a frame that is not RoCEv2, or
// one where no length checks. Costs a scan of the datagram's first `mtu` bytes, and a CRC only
// where a BTH may start.
std::uint32_t uncut_segment_size(const std::uint8_t* frame, std::uint32_t len, std::uint32_t mtu);

}  // namespace softrdma::netdev
