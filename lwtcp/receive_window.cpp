#include "lwtcp/receive_window.h"

#include <algorithm>

#include "lwip/priv/tcp_priv.h"
#include "lwip/tcp.h"
#include "lwtcp/segment_check.h"
#include "wire/bytes.h"
#include "wire/net.h"

namespace softrdma::lwtcp {

namespace {

constexpr std::uint8_t kOptEnd = 0, kOptNop = 1, kOptWindowScale = 3;

// Whether `pcb` receives with this module's window (scaling agreed, and its shift set here).
bool widened(const tcp_pcb* pcb) {
  return (pcb->flags & TF_WND_SCALE) != 0 && pcb->rcv_scale == kWindowShift;
}

}  // namespace

bool offer_window_shift(std::uint8_t* frame, std::uint32_t len, std::uint8_t shift) {
  const std::size_t l4 = tcp_header_at(frame, len);
  if (l4 == 0) return false;
  std::uint8_t* tcp = frame + l4;
  const std::size_t doff = static_cast<std::size_t>(tcp[12] >> 4) * 4;
  if ((tcp[13] & wire::kTcpSyn) == 0 || doff < 20 || len < l4 + doff) return false;
  for (std::size_t at = 20; at < doff;) {
    const std::uint8_t kind = tcp[at];
    if (kind == kOptEnd) return false;
    if (kind == kOptNop) {
      ++at;
      continue;
    }
    if (at + 1 >= doff || tcp[at + 1] < 2 || at + tcp[at + 1] > doff) return false;
    if (kind == kOptWindowScale && tcp[at + 1] == 3) {
      std::uint8_t* byte = tcp + at + 2;
      if (*byte == shift) return true;
      // RFC 1624: HC' = ~(~HC + ~m + m') over the 16-bit word holding the byte.
      const std::size_t word = (at + 2) & ~std::size_t{1};
      const std::uint32_t old_word = wire::load16(tcp + word);
      *byte = shift;
      const std::uint32_t new_word = wire::load16(tcp + word);
      std::uint32_t sum = (~wire::load16(tcp + 16) & 0xFFFFu) + (~old_word & 0xFFFFu) + new_word;
      sum = (sum & 0xFFFF) + (sum >> 16);
      sum = (sum & 0xFFFF) + (sum >> 16);
      wire::store16(tcp + 16, static_cast<std::uint16_t>(~sum & 0xFFFF));
      return true;
    }
    at += tcp[at + 1];
  }
  return false;
}

void widen_receive_window(tcp_pcb* pcb) {
  if ((pcb->flags & TF_WND_SCALE) == 0 || pcb->rcv_scale == kWindowShift) return;
  pcb->rcv_scale = kWindowShift;  // what our SYN or SYN-ACK offered (offer_window_shift)
  pcb->rcv_wnd += kWindow - TCP_WND;
  tcp_update_rcv_ann_wnd(pcb);
}

void open_window(tcp_pcb* pcb, std::uint32_t len) {
  if (!widened(pcb)) {
    while (len > 0) {  // lwIP's own window
      const auto n = static_cast<u16_t>(std::min<std::uint32_t>(len, 0xFFFF));
      tcp_recved(pcb, n);
      len -= n;
    }
    return;
  }
  pcb->rcv_wnd = std::min<std::uint32_t>(pcb->rcv_wnd + len, kWindow);
  if (tcp_update_rcv_ann_wnd(pcb) >= TCP_WND_UPDATE_THRESHOLD) {
    tcp_ack_now(pcb);
    tcp_output(pcb);
  }
}

}  // namespace softrdma::lwtcp
