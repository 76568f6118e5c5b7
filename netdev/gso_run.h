// Runs of datagrams that can leave as one UDP GSO message (the udp backend's UDP_SEGMENT, the
// raw backends' virtio_net_hdr): the kernel or the NIC cuts such a message into datagrams of the
// first's size, so a run is consecutive datagrams of that size (the last may be shorter) with
// one destination, the same ports, traffic class and hop limit.
#pragma once

#include <cstddef>
#include <span>

#include "netdev/netdev.h"

namespace softrdma::netdev {

// The end of the run that starts at pkts[i]: at most `max_segments` datagrams and `max_bytes`
// of them in all (pkts[i] alone may be longer). Always more than i.
std::size_t gso_run_end(std::span<Packet* const> pkts, std::size_t i, std::size_t max_segments,
                        std::size_t max_bytes);

}  // namespace softrdma::netdev
