// Every packet backend this build has: the in-memory fabric, udp and AF_PACKET always, AF_XDP
// and DPDK where their libraries were found (SOFTRDMA_HAVE_AF_XDP, SOFTRDMA_HAVE_DPDK).
#pragma once

#include "netdev/af_packet.h"
#ifdef SOFTRDMA_HAVE_AF_XDP
#include "netdev/af_xdp.h"
#endif
#ifdef SOFTRDMA_HAVE_DPDK
#include "netdev/dpdk.h"
#endif
#include "netdev/memory.h"
#include "netdev/udp.h"
