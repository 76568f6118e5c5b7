// What the CM layer and the iWARP transport exchange: MPA negotiation parameters, the
// outcomes of connect / read_request / accept, and per-QP connection events.
// Values follow RFC 5044 §7.1 (MPA request/reply) and RFC 6581 (revision 2, IRD/ORD, RTR).
#pragma once

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <functional>
#include <vector>

namespace softrdma::iwarp {

// The RFC 6581 ready-to-receive message of peer-to-peer mode (revision 2 only).
enum class RtrType : std::uint8_t { kNone, kZeroWrite, kZeroRead, kZeroSend };

struct MpaParams {
  std::uint8_t revision = 2;         // 1 or 2 (2: enhanced IRD/ORD words)
  bool crc = false;                  // require CRC (set C); a peer's C is always honoured
  bool markers = false;              // ask for markers on the stream we receive (set M); a peer's M
                                     // is always honoured by inserting them on the stream we send
  std::uint16_t ird = 16;            // inbound RDMA Read Requests we accept at once
  std::uint16_t ord = 16;            // outbound RDMA Read Requests we issue at once
  RtrType rtr = RtrType::kZeroRead;  // revision 2: peer-to-peer RTR; kNone: no P2P mode
  std::vector<std::uint8_t> private_data;  // with the IRD/ORD words, at most 512 bytes
  // Active side: how long to wait for the reply (siw: 10 s). Passive read_request takes its
  // own timeout (siw: 5 s).
  std::chrono::milliseconds timeout{10000};
};

// Maximum user private data for a revision (512 less the IRD/ORD words of revision 2).
inline std::size_t max_private_data(std::uint8_t revision) {
  return revision == 2 ? 508 : 512;
}

// What the passive side learnt from an MPA request.
struct MpaRequest {
  std::uint8_t revision = 1;
  bool crc = false;      // the initiator requires CRC
  bool markers = false;  // the initiator wants markers on the stream it receives
  bool enhanced = false;
  bool peer_to_peer = false;
  RtrType rtr = RtrType::kNone;  // the RTR types offered (one is chosen)
  std::uint16_t ird = 0, ord = 0;
  std::vector<std::uint8_t> private_data;
};

// What the active side learnt from the reply.
struct ConnectResult {
  enum class Kind : std::uint8_t { kAccepted, kRejected, kError } kind = Kind::kError;
  int error = 0;  // kError: ETIMEDOUT, ECONNRESET, EPROTO, ...
  std::vector<std::uint8_t> private_data;
  std::uint16_t peer_ird = 0, peer_ord = 0;
};

struct RequestResult {
  int error = 0;  // 0: `request` is valid; else ETIMEDOUT, ECONNRESET, EPROTO, ...
  MpaRequest request;
};

// A Terminate's identification: layer (0 RDMAP, 1 DDP, 2 MPA), error type and code.
struct TermInfo {
  std::uint8_t layer = 0, etype = 0, code = 0;
};

struct QpEvent {
  enum class Kind : std::uint8_t {
    kEstablished,     // full operation (after the RTR exchange when there is one)
    kDisconnected,    // the peer closed its side (orderly) or we completed a graceful close
    kTermSent,        // fatal: we detected an error and sent a TERMINATE (term says which)
    kTermReceived,    // fatal: the peer sent a TERMINATE
    kConnError,       // fatal: the TCP connection failed (error: errno)
    kLastWqeReached,  // a QP of an SRQ entered the error state: it takes no more of its WQEs
  } kind = Kind::kEstablished;
  TermInfo term;
  int error = 0;
};

using ConnectCallback = std::function<void(const ConnectResult&)>;
using RequestCallback = std::function<void(const RequestResult&)>;
using AcceptCallback = std::function<void(int error)>;  // 0: established
using QpEventCallback = std::function<void(const QpEvent&)>;

}  // namespace softrdma::iwarp
