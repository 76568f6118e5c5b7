#include "lwtcp/jumbo_mss.h"

#include <algorithm>

#include "lwip/priv/tcp_priv.h"
#include "lwip/tcp.h"
#include "lwtcp/segment_check.h"
#include "wire/bytes.h"
#include "wire/net.h"

namespace softrdma::lwtcp {

namespace {

constexpr std::uint8_t kOptMss = 2, kOptMssLen = 4;

}  // namespace

std::uint16_t link_mss(std::uint32_t mtu, bool v4) {
  const std::uint32_t headers = (v4 ? wire::kIpv4MinLen : wire::kIpv6Len) + wire::kTcpMinLen;
  return static_cast<std::uint16_t>(
      std::min<std::uint32_t>(mtu > headers ? mtu - headers : 0, 0xFFFF));
}

bool offer_mss(std::uint8_t* frame, std::uint32_t len, std::uint16_t mss) {
  const std::size_t opt = syn_option_at(frame, len, kOptMss, kOptMssLen);
  if (opt == 0) return false;
  const std::size_t tcp = tcp_header_at(frame, len);
  set_tcp_byte(frame, tcp, opt + 2, static_cast<std::uint8_t>(mss >> 8));
  set_tcp_byte(frame, tcp, opt + 3, static_cast<std::uint8_t>(mss & 0xFF));
  return true;
}

std::uint16_t syn_mss(const std::uint8_t* frame, std::uint32_t len) {
  const std::size_t opt = syn_option_at(frame, len, kOptMss, kOptMssLen);
  return opt == 0 ? 0 : wire::load16(frame + opt + 2);
}

void PeerMss::note(const std::uint8_t* frame, std::uint32_t len) {
  const std::uint16_t mss = syn_mss(frame, len);
  if (mss == 0) return;
  const PeerKey conn = peer_key(frame, tcp_header_at(frame, len), false);
  Entry* e = find(conn);  // a SYN sent again: its entry
  if (!e) {
    e = &entries_[next_];
    next_ = (next_ + 1) % kEntries;
  }
  *e = Entry{conn, mss};
}

std::uint16_t PeerMss::take(const PeerKey& conn) {
  Entry* e = find(conn);
  if (!e) return 0;
  const std::uint16_t mss = e->mss;
  e->mss = 0;
  return mss;
}

PeerMss::Entry* PeerMss::find(const PeerKey& conn) {
  for (Entry& e : entries_) {
    if (e.mss != 0 && e.conn == conn) return &e;
  }
  return nullptr;
}

void raise_mss(tcp_pcb* pcb, std::uint16_t mss) {
  if (mss <= pcb->mss) return;
  pcb->mss = mss;
  // RFC 5681's initial window, as lwIP sets it when the handshake ends.
  const tcpwnd_size_t initial = std::min(4u * mss, std::max(2u * mss, 4380u));
  if (pcb->cwnd < initial) pcb->cwnd = initial;
}

}  // namespace softrdma::lwtcp
