// Test helpers for netdev: valid RoCEv2 datagrams with a recognisable payload, receive
// buffers, and whether a descriptor is readable. A test takes them all with `using namespace
// test;`.
#pragma once

#include <gtest/gtest.h>
#include <poll.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "netdev/netdev.h"
#include "wire/roce_headers.h"
#include "wire/roce_opcode.h"

namespace softrdma::netdev::test {

// The address in `s` (IPv4 or IPv6); a bad string fails the test.
inline IpAddr ip(const char* s) {
  IpAddr a;
  EXPECT_TRUE(IpAddr::parse(s, a)) << s;
  return a;
}

// An RC SEND Only datagram (BTH, payload, pad, zero ICRC) carrying `seq` as its PSN and a
// payload of `payload_len` bytes derived from `seq`.
inline std::vector<std::uint8_t> make_datagram(std::uint32_t seq, std::size_t payload_len) {
  wire::RoceHeaders h;
  h.bth.opcode = wire::op::kRcSendOnly;
  h.bth.dest_qp = 0x12;
  h.bth.psn = seq & wire::kPsnMask;
  std::vector<std::uint8_t> payload(payload_len);
  for (std::size_t i = 0; i < payload_len; ++i) {
    payload[i] = static_cast<std::uint8_t>(seq * 131 + i * 7);
  }
  std::vector<std::uint8_t> out(payload_len + 64);
  auto n = wire::build_roce(wire::MutBytes(out), h, wire::Bytes(payload));
  out.resize(n.ok() ? *n : 0);
  return out;
}

// The PSN of a datagram built by make_datagram.
inline std::uint32_t seq_of(const std::uint8_t* data) {
  return (std::uint32_t{data[9]} << 16) | (std::uint32_t{data[10]} << 8) | data[11];
}

// A packet whose data is owned by the holder.
struct OwnedPacket {
  std::vector<std::uint8_t> buf;
  Packet pkt;
  explicit OwnedPacket(std::size_t cap = kMaxDatagram) : buf(cap) {
    pkt.data = buf.data();
    pkt.cap = static_cast<std::uint32_t>(cap);
  }
  OwnedPacket(const std::vector<std::uint8_t>& bytes, IpAddr src, IpAddr dst,
              std::uint16_t sport = 0xC000)
      : buf(bytes) {
    pkt.src = src;
    pkt.dst = dst;
    pkt.src_port = sport;
    pkt.data = buf.data();
    pkt.len = static_cast<std::uint32_t>(buf.size());
    pkt.cap = pkt.len;
  }
};

// True when `fd` becomes readable within `timeout_ms` (0: is now).
inline bool readable(int fd, int timeout_ms = 0) {
  pollfd p{fd, POLLIN, 0};
  return poll(&p, 1, timeout_ms) == 1 && (p.revents & POLLIN);
}

// Receive buffers for a batch of `n` packets.
struct RecvBatch {
  std::vector<OwnedPacket> owned;
  std::vector<Packet*> ptrs;
  explicit RecvBatch(std::size_t n, std::size_t cap = kMaxDatagram) {
    owned.reserve(n);
    for (std::size_t i = 0; i < n; ++i) owned.emplace_back(cap);
    for (auto& o : owned) ptrs.push_back(&o.pkt);
  }
  std::span<Packet* const> span() { return ptrs; }
};

}  // namespace softrdma::netdev::test
