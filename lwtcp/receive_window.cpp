#include "lwtcp/receive_window.h"

#include <algorithm>

#include "lwip/priv/tcp_priv.h"
#include "lwip/tcp.h"
#include "lwtcp/segment_check.h"
#include "wire/bytes.h"
#include "wire/net.h"

namespace softrdma::lwtcp {

namespace {

constexpr std::uint8_t kOptWindowScale = 3;

// Whether `pcb` receives with this module's window (scaling agreed, and its shift set here).
bool widened(const tcp_pcb* pcb) {
  return (pcb->flags & TF_WND_SCALE) != 0 && pcb->rcv_scale == kWindowShift;
}

}  // namespace

bool offer_window_shift(std::uint8_t* frame, std::uint32_t len, std::uint8_t shift) {
  const std::size_t opt = syn_option_at(frame, len, kOptWindowScale, 3);
  if (opt == 0) return false;
  set_tcp_byte(frame, tcp_header_at(frame, len), opt + 2, shift);
  return true;
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
