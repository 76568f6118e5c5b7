#include "iwarp/stream_trace.h"

#include <cstring>
#include <string>

#include "pcap/pcapng_writer.h"
#include "wire/net.h"

namespace softrdma::iwarp {

namespace {

constexpr std::size_t kMaxSegment = 65535 - wire::kIpv4MinLen - wire::kTcpMinLen;
constexpr std::size_t kHeaders = wire::kEthernetLen + wire::kIpv4MinLen + wire::kTcpMinLen;

wire::MacAddr mac_of(std::uint32_t addr) {
  return {0x02,
          0x00,
          static_cast<std::uint8_t>(addr >> 24),
          static_cast<std::uint8_t>(addr >> 16),
          static_cast<std::uint8_t>(addr >> 8),
          static_cast<std::uint8_t>(addr)};
}

// The ISN a direction's trace starts at: a hash of its 4-tuple (the real one is not visible
// from userspace). Both ends of a connection -- two processes, or two QPs of one -- thus
// write the same sequence numbers, and their traces merge into one consistent stream, each
// segment seen twice (sent and received), as a retransmission to a reader.
std::uint32_t initial_seq(const TcpEndpoint& from, const TcpEndpoint& to) {
  std::uint32_t h = 2166136261u;  // FNV-1a
  for (const std::uint32_t v :
       {from.addr, std::uint32_t{from.port}, to.addr, std::uint32_t{to.port}}) {
    for (int i = 0; i < 4; ++i) {
      h ^= (v >> (8 * i)) & 0xFF;
      h *= 16777619u;
    }
  }
  return h;
}

}  // namespace

StreamTrace::StreamTrace(std::shared_ptr<pcap::PcapngWriter> writer, std::uint32_t iface,
                         std::string_view dev, TcpEndpoint local, TcpEndpoint remote, bool active)
    : writer_(std::move(writer)), iface_(iface), dev_(dev), local_(local), remote_(remote) {
  next_local_ = initial_seq(local, remote);
  next_remote_ = initial_seq(remote, local);
  frame_.resize(kHeaders + kMaxSegment);
  if (active) {
    segment(true, wire::kTcpSyn, {}, {});
    segment(false, wire::kTcpSyn | wire::kTcpAck, {}, {});
    segment(true, wire::kTcpAck, {}, {});
  } else {
    segment(false, wire::kTcpSyn, {}, {});
    segment(true, wire::kTcpSyn | wire::kTcpAck, {}, {});
    segment(false, wire::kTcpAck, {}, {});
  }
}

void StreamTrace::tx(wire::Bytes pdu, std::string_view fault) {
  while (!pdu.empty()) {
    const std::size_t n = std::min(pdu.size(), kMaxSegment);
    segment(true, wire::kTcpPsh | wire::kTcpAck, pdu.first(n), fault);
    pdu = pdu.subspan(n);
  }
}

void StreamTrace::rx(wire::Bytes pdu) {
  while (!pdu.empty()) {
    const std::size_t n = std::min(pdu.size(), kMaxSegment);
    segment(false, wire::kTcpPsh | wire::kTcpAck, pdu.first(n), {});
    pdu = pdu.subspan(n);
  }
}

void StreamTrace::tx_fin() {
  segment(true, wire::kTcpFin | wire::kTcpAck, {}, {});
}

void StreamTrace::rx_fin() {
  segment(false, wire::kTcpFin | wire::kTcpAck, {}, {});
}

void StreamTrace::segment(bool tx, std::uint8_t flags, wire::Bytes payload,
                          std::string_view fault) {
  using namespace wire;
  const TcpEndpoint& src = tx ? local_ : remote_;
  const TcpEndpoint& dst = tx ? remote_ : local_;
  std::uint32_t& seq = tx ? next_local_ : next_remote_;
  const std::uint32_t ack = tx ? next_remote_ : next_local_;
  MutBytes f(frame_);
  Ethernet eth;
  eth.src = mac_of(src.addr);
  eth.dst = mac_of(dst.addr);
  eth.ethertype = kEthertypeIpv4;
  std::size_t off = *build_ethernet(f, eth);
  Ipv4 ip;
  ip.total_len = static_cast<std::uint16_t>(kIpv4MinLen + kTcpMinLen + payload.size());
  ip.id = tx ? ip_id_local_++ : ip_id_remote_++;
  ip.protocol = kIpProtoTcp;
  ip.src = src.addr;
  ip.dst = dst.addr;
  off += *build_ipv4(f.subspan(off), ip);
  const std::size_t tcp_off = off;
  Tcp tcp;
  tcp.src_port = src.port;
  tcp.dst_port = dst.port;
  tcp.seq = seq;
  tcp.ack = (flags & kTcpAck) != 0 ? ack : 0;
  tcp.flags = flags;
  tcp.window = 0xFFFF;
  off += *build_tcp(f.subspan(tcp_off), tcp);
  if (!payload.empty()) std::memcpy(&frame_[off], payload.data(), payload.size());
  off += payload.size();
  store16(&frame_[tcp_off + 16],
          l4_checksum_ipv4(ip.src, ip.dst, kIpProtoTcp, Bytes(&frame_[tcp_off], off - tcp_off)));
  seq += static_cast<std::uint32_t>(payload.size());
  if ((flags & (kTcpSyn | kTcpFin)) != 0) ++seq;
  pcap::Annotation a;
  a.tx = tx;
  a.dev = dev_;
  a.fault = fault;
  char comment[128];
  const std::size_t clen = pcap::format_annotation(a, comment, sizeof comment);
  writer_->write(iface_, pcap::PcapngWriter::now_ns(), Bytes(frame_.data(), off),
                 static_cast<std::uint32_t>(off), tx ? pcap::kEpbOutbound : pcap::kEpbInbound,
                 std::string_view(comment, clen));
}

}  // namespace softrdma::iwarp
