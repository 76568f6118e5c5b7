// Two iWARP connections built from wire/ alone. The first (192.0.2.1:40001 ->
// 192.0.2.2:40002) negotiates MPA revision 2 with the RFC 6581 IRD/ORD words and
// CRC, then carries a Send, a three-segment RDMA Write, a Read Request with its
// Read Response and a Send with Invalidate. The second (40003 -> 40004) uses
// revision 1 with CRC and markers in both directions. Every FPDU travels in its
// own TCP segment, as an MPA-aware sender aligns them; the handshake, sequence and
// acknowledgement numbers and the IPv4/TCP checksums are all consistent.
#include "tools/softrdma/sample_iwarp.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "wire/ddp_rdmap.h"
#include "wire/ddp_segment.h"
#include "wire/fpdu.h"
#include "wire/mpa.h"
#include "wire/net.h"

namespace softrdma::tools {

namespace {

using namespace wire;

// One TCP connection; side 0 is the initiator (active opener, MPA requester).
class Conn {
 public:
  Conn(const std::function<void(Bytes)>& emit, std::uint16_t port0, std::uint16_t port1,
       std::uint32_t isn0, std::uint32_t isn1)
      : emit_(emit), port_{port0, port1}, next_{isn0, isn1} {}

  int frames() const { return frames_; }

  // SYN, SYN-ACK, ACK.
  void open() {
    send(0, kTcpSyn, {});
    send(1, kTcpSyn | kTcpAck, {});
    send(0, kTcpAck, {});
  }
  // FIN from each side, then the last ACK.
  void close() {
    send(0, kTcpFin | kTcpAck, {});
    send(1, kTcpFin | kTcpAck, {});
    send(0, kTcpAck, {});
  }
  void data(int side, Bytes payload) { send(side, kTcpPsh | kTcpAck, payload); }
  void ack(int side) { send(side, kTcpAck, {}); }

 private:
  void send(int side, std::uint8_t flags, Bytes payload) {
    static constexpr std::uint32_t kAddr[2] = {0xC0000201, 0xC0000202};  // 192.0.2.1, .2
    static constexpr MacAddr kMac[2] = {{0x02, 0, 0, 0, 0, 1}, {0x02, 0, 0, 0, 0, 2}};
    const int peer = 1 - side;
    std::size_t off = 0;
    Ethernet eth;
    eth.dst = kMac[peer];
    eth.src = kMac[side];
    eth.ethertype = kEthertypeIpv4;
    off += *build_ethernet(frame_, eth);
    const std::size_t ip_off = off;
    Ipv4 ip;
    ip.total_len = static_cast<std::uint16_t>(kIpv4MinLen + kTcpMinLen + payload.size());
    ip.id = ip_id_[side]++;
    ip.protocol = kIpProtoTcp;
    ip.src = kAddr[side];
    ip.dst = kAddr[peer];
    off += *build_ipv4(MutBytes(frame_).subspan(ip_off), ip);
    const std::size_t tcp_off = off;
    Tcp tcp;
    tcp.src_port = port_[side];
    tcp.dst_port = port_[peer];
    tcp.seq = next_[side];
    tcp.ack = (flags & kTcpAck) != 0 ? next_[peer] : 0;
    tcp.flags = flags;
    tcp.window = 0xFFFF;
    off += *build_tcp(MutBytes(frame_).subspan(tcp_off), tcp);
    std::copy(payload.begin(), payload.end(), frame_.begin() + static_cast<std::ptrdiff_t>(off));
    off += payload.size();
    const Bytes segment(&frame_[tcp_off], off - tcp_off);
    store16(&frame_[tcp_off + 16], l4_checksum_ipv4(ip.src, ip.dst, kIpProtoTcp, segment));
    next_[side] += static_cast<std::uint32_t>(payload.size());
    if ((flags & (kTcpSyn | kTcpFin)) != 0) ++next_[side];
    emit_(Bytes(frame_.data(), off));
    ++frames_;
  }

  const std::function<void(Bytes)>& emit_;
  std::uint16_t port_[2];
  std::uint32_t next_[2];  // next sequence number each side sends
  std::uint16_t ip_id_[2] = {0x100, 0x200};
  std::array<std::uint8_t, 1514> frame_{};
  int frames_ = 0;
};

// MPA and FPDU framing for one connection on top of Conn.
class Iwarp {
 public:
  Iwarp(Conn& conn, bool crc, bool markers) : conn_(conn), crc_(crc), markers_(markers) {}

  void mpa(int side, const MpaFrame& f) {
    std::array<std::uint8_t, kMpaHeaderLen + kMpaMaxPrivateData> buf{};
    const auto n = build_mpa(buf, f);
    conn_.data(side, Bytes(buf.data(), *n));
  }

  // One DDP segment (header + payload) as one FPDU in one TCP segment.
  void segment(int side, const DdpHeader& h, Bytes body) {
    const std::vector<std::uint8_t> plain = ddp_segment_fpdu(h, body, crc_);
    if (!markers_) {
      conn_.data(side, plain);
      return;
    }
    std::vector<std::uint8_t> wire(ins_[side].wire_len(plain.size()));
    (void)ins_[side].put_fpdu(wire, plain, crc_);
    conn_.data(side, wire);
  }

  void send(int side, std::uint8_t opcode, std::uint32_t inv_stag, Bytes payload) {
    DdpHeader h;
    h.opcode = opcode;
    h.qn = kQnSend;
    h.msn = msn_[side][kQnSend]++;
    h.inv_stag = inv_stag;
    segment(side, h, payload);
  }

  // A tagged message (RDMA Write or Read Response) cut into DDP segments of `mss`.
  void tagged(int side, RdmapOpcode op, std::uint32_t stag, std::uint64_t to, Bytes payload,
              std::size_t mss) {
    std::size_t off = 0;
    do {
      const std::size_t n = std::min(mss, payload.size() - off);
      DdpHeader h;
      h.tagged = true;
      h.opcode = static_cast<std::uint8_t>(op);
      h.stag = stag;
      h.to = to + off;
      h.last = off + n == payload.size();
      segment(side, h, payload.subspan(off, n));
      off += n;
    } while (off < payload.size());
  }

  void read_request(int side, const ReadRequest& r) {
    std::array<std::uint8_t, kReadRequestLen> body{};
    (void)build_read_request(body, r);
    DdpHeader h;
    h.opcode = static_cast<std::uint8_t>(RdmapOpcode::kReadRequest);
    h.qn = kQnReadRequest;
    h.msn = msn_[side][kQnReadRequest]++;
    segment(side, h, body);
  }

 private:
  Conn& conn_;
  bool crc_;
  bool markers_;
  MarkerInserter ins_[2];  // stream offsets count from each side's first FPDU
  std::uint32_t msn_[2][3] = {{1, 1, 1}, {1, 1, 1}};
};

constexpr auto op(RdmapOpcode o) {
  return static_cast<std::uint8_t>(o);
}

std::vector<std::uint8_t> pattern(std::size_t n, std::uint8_t seed) {
  std::vector<std::uint8_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::uint8_t>(seed + i * 7);
  return v;
}

// Revision 2, enhanced IRD/ORD, CRC, no markers.
int crc_connection(const std::function<void(Bytes)>& emit) {
  Conn c(emit, 40001, 40002, 0x1000'0000, 0x2000'0000);
  Iwarp iw(c, true, false);
  c.open();
  static constexpr std::uint8_t kReqPd[] = {'s', 'o', 'f', 't', 'r', 'd',
                                            'm', 'a', ' ', 'r', 'e', 'q'};
  static constexpr std::uint8_t kRepPd[] = {'o', 'k'};
  MpaFrame req;
  req.kind = MpaKind::kRequest;
  req.crc = true;
  req.enhanced = true;
  req.revision = 2;
  req.ird_ord.ird = 16;
  req.ird_ord.ord = 8;
  req.private_data = kReqPd;
  iw.mpa(0, req);
  MpaFrame rep = req;
  rep.kind = MpaKind::kReply;
  rep.ird_ord.ird = 8;  // the responder's IRD answers the initiator's ORD
  rep.ird_ord.ord = 16;
  rep.private_data = kRepPd;
  iw.mpa(1, rep);

  const auto hello = pattern(64, 1);
  iw.send(0, op(RdmapOpcode::kSend), 0, hello);
  c.ack(1);
  const auto block = pattern(3000, 2);
  iw.tagged(0, RdmapOpcode::kWrite, 0x0000'1a01, 0x7f00'0000'1000, block, 1024);
  c.ack(1);
  iw.read_request(0, ReadRequest{0x0000'1b02, 0x7f00'0000'8000, 2000, 0x0000'2c03, 0x5500'0000});
  iw.tagged(1, RdmapOpcode::kReadResponse, 0x0000'1b02, 0x7f00'0000'8000, pattern(2000, 3), 1024);
  c.ack(0);
  iw.send(1, op(RdmapOpcode::kSendInvalidate), 0x0000'1a01, pattern(37, 4));
  c.ack(0);
  c.close();
  return c.frames();
}

// Revision 1, CRC and markers in both directions; FPDUs large enough to carry
// several markers; in each direction the first FPDU begins on a marker (FPDUPTR 0).
int marker_connection(const std::function<void(Bytes)>& emit) {
  Conn c(emit, 40003, 40004, 0xFFFF'FF00, 0x3000'0000);  // the initiator's sequence wraps
  Iwarp iw(c, true, true);
  c.open();
  MpaFrame req;
  req.kind = MpaKind::kRequest;
  req.crc = true;
  req.markers = true;
  req.revision = 1;
  iw.mpa(0, req);
  MpaFrame rep = req;
  rep.kind = MpaKind::kReply;
  iw.mpa(1, rep);

  // No FPDU after the first ends exactly on a marker position: tshark 4.0 frames such
  // an FPDU wrongly (it counts the following FPDU's leading marker into it), so that
  // case is left to the unit tests.
  iw.send(0, op(RdmapOpcode::kSend), 0, pattern(488, 5));
  iw.send(0, op(RdmapOpcode::kSendSe), 0, pattern(1000, 6));
  c.ack(1);
  iw.tagged(0, RdmapOpcode::kWrite, 0x0000'3d04, 0x10'0000, pattern(4000, 7), 1400);
  c.ack(1);
  iw.read_request(0, ReadRequest{0x0000'3e05, 0x20'0000, 1500, 0x0000'4f06, 0x30'0000});
  iw.tagged(1, RdmapOpcode::kReadResponse, 0x0000'3e05, 0x20'0000, pattern(1500, 8), 1400);
  c.ack(0);
  iw.send(1, op(RdmapOpcode::kSendSeInvalidate), 0x0000'3d04, pattern(900, 9));
  c.ack(0);
  c.close();
  return c.frames();
}

}  // namespace

int write_sample_iwarp(const std::function<void(wire::Bytes)>& emit) {
  return crc_connection(emit) + marker_connection(emit);
}

}  // namespace softrdma::tools
