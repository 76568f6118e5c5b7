// A receive window wider than Debian's lwIP is built with (TCP_WND 64 KiB, window scale shift 1,
// both compiled in): a bandwidth into lwIP of one window per round trip. The SYN and SYN-ACK
// lwIP sends offer shift kWindowShift instead (rewritten as they leave), and once the handshake
// has agreed on scaling, the connection's scale and window are set here and grown with
// open_window() as the application reads, up to kWindow. Without scaling (a peer that does not
// offer it), lwIP's own 64 KiB stays.
#pragma once

#include <cstdint>

struct tcp_pcb;  // lwIP's (lwip/tcp.h)

namespace softrdma::lwtcp {

inline constexpr std::uint8_t kWindowShift = 7;     // Linux's usual shift
inline constexpr std::uint32_t kWindow = 1u << 20;  // bytes received and not yet read, at most

// Rewrites the window scale option of an outgoing TCP SYN or SYN-ACK frame (IPv4 or IPv6) to
// `shift`, its TCP checksum updated; false (frame untouched) for a frame that is no such SYN or
// carries no such option. Options are walked as RFC 9293 lays them out; a malformed list is left
// alone.
bool offer_window_shift(std::uint8_t* frame, std::uint32_t len, std::uint8_t shift);

// After the handshake (connected or accepted, mu held): when both sides agreed on scaling, the
// connection receives with kWindowShift and a kWindow window.
void widen_receive_window(tcp_pcb* pcb);

// The application read `len` bytes (tcp_recved's job, with this module's cap): the window grows
// back and an update goes out when it grew by enough (mu held).
void open_window(tcp_pcb* pcb, std::uint32_t len);

}  // namespace softrdma::lwtcp
