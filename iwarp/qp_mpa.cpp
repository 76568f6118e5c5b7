// MPA negotiation of a QP (RFC 5044 §7.1, RFC 6581): the request or reply it sends, the
// reply it reads, CRC and marker choices, IRD/ORD, and the peer-to-peer RTR exchange.
#include <algorithm>
#include <array>
#include <cerrno>

#include "iwarp/device.h"
#include "iwarp/qp.h"

namespace softrdma::iwarp {

namespace {

bool valid_params(const MpaParams& p) {
  return (p.revision == 1 || p.revision == 2) &&
         p.private_data.size() <= max_private_data(p.revision) && p.ird <= 0x3FFF &&
         p.ord <= 0x3FFF;
}

void set_rtr_bits(wire::MpaIrdOrd& w, RtrType t) {
  w.zero_write_rtr = t == RtrType::kZeroWrite;
  w.zero_read_rtr = t == RtrType::kZeroRead;
  w.zero_send_rtr = t == RtrType::kZeroSend;
}

// Writes a small frame on a fresh connection (it always fits the socket buffer).
int send_all(ByteStream& s, wire::Bytes b) {
  std::size_t off = 0;
  while (off < b.size()) {
    const StreamIo r = s.send_buffer(b.data() + off, b.size() - off);
    if (r.bytes == 0) return r.error ? r.error : EIO;
    off += r.bytes;
  }
  return 0;
}

}  // namespace

int Qp::send_mpa(ByteStream& s, const wire::MpaFrame& f, bool active, wire::Bytes received) {
  std::array<std::uint8_t, wire::kMpaHeaderLen + wire::kMpaMaxPrivateData> buf{};
  const auto n = wire::build_mpa(buf, f);
  if (!n) return EINVAL;
  const wire::Bytes frame(buf.data(), *n);
  if (const int rc = send_all(s, frame)) return rc;
  if (dev_.cfg_.trace && !s.traced_below()) {
    TcpEndpoint a, b;
    if (s.endpoints(a, b)) {
      trace_ = std::make_unique<StreamTrace>(dev_.cfg_.trace, dev_.trace_iface_, dev_.name(), a, b,
                                             active);
      if (!received.empty()) trace_->rx(received);
      trace_->tx(frame);
    }
  }
  return 0;
}

int Qp::start_active(std::unique_ptr<ByteStream>& stream, const MpaParams& local,
                     ConnectCallback cb) {
  if (phase_ != Phase::kIdle || stream_ || !valid_params(local)) return EINVAL;
  if (state_ != QpState::kReset && state_ != QpState::kInit && state_ != QpState::kRtr) {
    return EINVAL;
  }
  wire::MpaFrame f;
  f.kind = wire::MpaKind::kRequest;
  f.markers = local.markers;
  f.crc = local.crc;
  f.revision = local.revision;
  f.enhanced = local.revision == 2;
  f.ird_ord.ird = local.ird;
  f.ird_ord.ord = local.ord;
  f.ird_ord.peer_to_peer = f.enhanced && local.rtr != RtrType::kNone;
  if (f.ird_ord.peer_to_peer) set_rtr_bits(f.ird_ord, local.rtr);
  f.private_data = local.private_data;
  if (const int rc = send_mpa(*stream, f, true, {})) return rc;
  stream_ = std::move(stream);
  local_ = local;
  connect_cb_ = std::move(cb);
  mss_ = stream_->mss();
  hs_buf_.clear();
  phase_ = Phase::kWaitReply;
  deadline_ = Clock::now() + local.timeout;
  sync_epoll();
  return 0;
}

// Reads exactly the reply (header, then PD_Length bytes) so that FPDUs behind it stay in
// the socket for the FPDU parser.
void Qp::read_reply() {
  while (phase_ == Phase::kWaitReply) {
    std::size_t need = wire::kMpaHeaderLen;
    if (hs_buf_.size() >= wire::kMpaHeaderLen) {
      if (!wire::mpa_key_prefix(hs_buf_, wire::MpaKind::kReply)) {
        fail_connect(EPROTO);
        return;
      }
      need += wire::load16(&hs_buf_[18]);
      if (need > wire::kMpaHeaderLen + wire::kMpaMaxPrivateData) {
        fail_connect(EPROTO);
        return;
      }
    }
    if (hs_buf_.size() == need) {
      auto f = wire::parse_mpa(hs_buf_);
      if (!f || f->kind != wire::MpaKind::kReply) {
        fail_connect(EPROTO);
        return;
      }
      if (trace_) trace_->rx(hs_buf_);
      finish_active(*f);
      return;
    }
    const std::size_t have = hs_buf_.size();
    hs_buf_.resize(need);
    const StreamIo r = stream_->recv(std::span(hs_buf_).subspan(have));
    if (r.bytes > 0) {
      hs_buf_.resize(have + r.bytes);
      continue;
    }
    hs_buf_.resize(have);
    if (r.error == 0) {
      fail_connect(ECONNRESET);
      return;
    }
    if (r.error != EAGAIN) fail_connect(r.error);
    return;
  }
}

void Qp::finish_active(const wire::MpaFrame& reply) {
  ConnectResult res;
  res.private_data.assign(reply.private_data.begin(), reply.private_data.end());
  if (reply.reject) {
    res.kind = ConnectResult::Kind::kRejected;
    if (connect_cb_) callbacks_.push_back([cb = std::move(connect_cb_), res] { cb(res); });
    connect_cb_ = nullptr;
    release_stream();  // the CM closes it
    trace_.reset();
    phase_ = Phase::kIdle;
    dev_.kick();
    return;
  }
  if (reply.revision > local_.revision) {
    fail_connect(EPROTO);
    return;
  }
  revision_ = reply.revision;
  crc_ = local_.crc || reply.crc;
  markers_tx_ = reply.markers;
  markers_rx_ = local_.markers;
  ird_ = local_.ird;
  ord_ = local_.ord;
  rtr_ = RtrType::kNone;
  if (reply.enhanced) {
    res.peer_ird = reply.ird_ord.ird;
    res.peer_ord = reply.ird_ord.ord;
    ord_ = std::min(local_.ord, reply.ird_ord.ird);
    if (local_.rtr != RtrType::kNone && reply.ird_ord.peer_to_peer) {
      rtr_ = reply.ird_ord.zero_read_rtr    ? RtrType::kZeroRead
             : reply.ird_ord.zero_write_rtr ? RtrType::kZeroWrite
             : reply.ird_ord.zero_send_rtr  ? RtrType::kZeroSend
                                            : local_.rtr;
    }
  }
  res.kind = ConnectResult::Kind::kAccepted;
  phase_ = Phase::kRunning;
  state_ = QpState::kRts;
  // RFC 6581: the initiator's RTR is its first FPDU; the responder sends nothing before it.
  wire::DdpHeader h;
  switch (rtr_) {
    case RtrType::kNone:
      break;
    case RtrType::kZeroWrite:
      h.tagged = true;
      h.opcode = static_cast<std::uint8_t>(wire::RdmapOpcode::kWrite);
      queue_control(h, {});
      break;
    case RtrType::kZeroRead: {
      h.opcode = static_cast<std::uint8_t>(wire::RdmapOpcode::kReadRequest);
      h.qn = wire::kQnReadRequest;
      h.msn = msn_tx_[wire::kQnReadRequest]++;
      std::array<std::uint8_t, wire::kReadRequestLen> body{};
      (void)wire::build_read_request(body, wire::ReadRequest{});
      rtr_read_pending_ = true;
      queue_control(h, body);
      break;
    }
    case RtrType::kZeroSend:
      h.opcode = static_cast<std::uint8_t>(wire::RdmapOpcode::kSend);
      h.qn = wire::kQnSend;
      h.msn = msn_tx_[wire::kQnSend]++;
      queue_control(h, {});
      break;
  }
  if (connect_cb_) callbacks_.push_back([cb = std::move(connect_cb_), res] { cb(res); });
  connect_cb_ = nullptr;
  established();
  pump_tx();
}

int Qp::start_passive(std::unique_ptr<ByteStream>& stream, const MpaParams& local,
                      const wire::MpaFrame& request, std::span<const std::uint8_t> request_bytes,
                      AcceptCallback cb) {
  if (phase_ != Phase::kIdle || stream_ || !valid_params(local)) return EINVAL;
  if (state_ != QpState::kReset && state_ != QpState::kInit && state_ != QpState::kRtr) {
    return EINVAL;
  }
  revision_ = std::min(request.revision, local.revision);
  wire::MpaFrame f;
  f.kind = wire::MpaKind::kReply;
  f.markers = local.markers;
  f.crc = local.crc || request.crc;
  f.revision = revision_;
  f.enhanced = revision_ == 2 && request.enhanced;
  ird_ = local.ird;
  ord_ = local.ord;
  rtr_ = RtrType::kNone;
  if (f.enhanced) {
    ord_ = std::min(local.ord, request.ird_ord.ird);
    f.ird_ord.ird = local.ird;
    f.ird_ord.ord = ord_;
    if (request.ird_ord.peer_to_peer && local.rtr != RtrType::kNone) {
      const auto& r = request.ird_ord;
      const bool offered[4] = {false, r.zero_write_rtr, r.zero_read_rtr, r.zero_send_rtr};
      RtrType pick = RtrType::kNone;
      if (offered[static_cast<int>(local.rtr)]) {
        pick = local.rtr;
      } else if (r.zero_read_rtr) {
        pick = RtrType::kZeroRead;
      } else if (r.zero_write_rtr) {
        pick = RtrType::kZeroWrite;
      } else if (r.zero_send_rtr) {
        pick = RtrType::kZeroSend;
      }
      if (pick != RtrType::kNone) {
        f.ird_ord.peer_to_peer = true;
        set_rtr_bits(f.ird_ord, pick);
        rtr_ = pick;
      }
    }
  }
  f.private_data = local.private_data;
  if (const int rc = send_mpa(*stream, f, false, request_bytes)) return rc;
  stream_ = std::move(stream);
  local_ = local;
  crc_ = f.crc;
  markers_tx_ = request.markers;
  markers_rx_ = local.markers;
  mss_ = stream_->mss();
  accept_cb_ = std::move(cb);
  if (rtr_ != RtrType::kNone) {
    phase_ = Phase::kWaitRtr;
    state_ = QpState::kRtr;
    deadline_ = Clock::now() + local.timeout;
  } else {
    phase_ = Phase::kRunning;
    state_ = QpState::kRts;
    established();
  }
  sync_epoll();
  return 0;
}

bool Qp::handle_rtr(const wire::DdpHeader& h, wire::Bytes hdr, wire::Bytes body) {
  using wire::RdmapOpcode;
  const auto op = static_cast<RdmapOpcode>(h.opcode);
  bool ok = false;
  switch (rtr_) {
    case RtrType::kZeroWrite:
      ok = op == RdmapOpcode::kWrite && body.empty();
      break;
    case RtrType::kZeroRead: {
      auto rr = wire::parse_read_request(body);
      ok = op == RdmapOpcode::kReadRequest && rr && rr->size == 0 &&
           h.msn == msn_rx_[wire::kQnReadRequest];
      if (ok) {
        ++msn_rx_[wire::kQnReadRequest];
        inbound_.push_back(InboundRead{*rr, 0});
      }
      break;
    }
    case RtrType::kZeroSend:
      ok = op == RdmapOpcode::kSend && body.empty() && h.msn == msn_rx_[wire::kQnSend];
      if (ok) ++msn_rx_[wire::kQnSend];
      break;
    case RtrType::kNone:
      break;
  }
  if (!ok) {
    if (accept_cb_) callbacks_.push_back([cb = std::move(accept_cb_)] { cb(EPROTO); });
    accept_cb_ = nullptr;
    return fail_rx(RxError::kNoMatchingRtr, hdr);
  }
  phase_ = Phase::kRunning;
  state_ = QpState::kRts;
  established();
  pump_tx();
  return true;
}

void Qp::established() {
  if (accept_cb_) callbacks_.push_back([cb = std::move(accept_cb_)] { cb(0); });
  accept_cb_ = nullptr;
  QpEvent ev;
  ev.kind = QpEvent::Kind::kEstablished;
  event(ev);
}

void Qp::fail_connect(int err) {
  if (connect_cb_) {
    ConnectResult res;
    res.kind = ConnectResult::Kind::kError;
    res.error = err;
    callbacks_.push_back([cb = std::move(connect_cb_), res] { cb(res); });
  }
  if (accept_cb_) callbacks_.push_back([cb = std::move(accept_cb_), err] { cb(err); });
  connect_cb_ = nullptr;
  accept_cb_ = nullptr;
  release_stream();  // the CM closes it
  phase_ = Phase::kIdle;
  to_error(WcStatus::kWrFlushErr);
  dev_.kick();
}

void Qp::on_timer(Clock::time_point now) {
  if ((phase_ == Phase::kWaitReply || phase_ == Phase::kWaitRtr) && now >= deadline_) {
    fail_connect(ETIMEDOUT);
  }
}

std::optional<Clock::time_point> Qp::deadline() const {
  if (phase_ == Phase::kWaitReply || phase_ == Phase::kWaitRtr) return deadline_;
  return std::nullopt;
}

}  // namespace softrdma::iwarp
