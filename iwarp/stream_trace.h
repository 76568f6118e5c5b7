// The trace of one iWARP connection: its TCP byte stream written to a pcapng file as the
// Ethernet/IPv4/TCP frames a NIC would have carried -- a synthesized three-way handshake,
// then one segment per MPA frame or FPDU (split at 64 KiB), with consistent sequence and
// acknowledgement numbers and valid checksums -- so that tshark decodes MPA, DDP and
// RDMAP and `softrdma lint` follows the stream. Sequence numbers start at a hash of the
// 4-tuple, so both ends' traces agree. Not thread-safe: the QP's lock covers it.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "iwarp/tcp_endpoint.h"
#include "wire/bytes.h"

namespace softrdma::pcap {
class PcapngWriter;
}

namespace softrdma::iwarp {

class StreamTrace {
 public:
  // `local` initiated the connection when `active`; the handshake is written at once.
  StreamTrace(std::shared_ptr<pcap::PcapngWriter> writer, std::uint32_t iface, std::string_view dev,
              TcpEndpoint local, TcpEndpoint remote, bool active);
  // Bytes of one PDU (MPA frame or FPDU, as on the wire) we sent / received.
  void tx(wire::Bytes pdu, std::string_view fault = {});
  void rx(wire::Bytes pdu);
  // Our FIN (graceful close) / the peer's.
  void tx_fin();
  void rx_fin();

 private:
  void segment(bool tx, std::uint8_t flags, wire::Bytes payload, std::string_view fault);

  std::shared_ptr<pcap::PcapngWriter> writer_;
  std::uint32_t iface_;
  std::string dev_;
  TcpEndpoint local_, remote_;
  std::uint32_t next_local_, next_remote_;  // next sequence number each side sends
  std::uint16_t ip_id_local_ = 1, ip_id_remote_ = 1;
  std::vector<std::uint8_t> frame_;
};

}  // namespace softrdma::iwarp
