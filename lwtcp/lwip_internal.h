// The parts of lwtcp's stack that its stream (lwip_stream.cpp) shares with it (lwip_stack.cpp):
// one connection's state, and the lock over all of lwIP. Every lwIP call is made with mu held.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "iwarp/user_tcp.h"
#include "lwtcp/segment_check.h"

struct tcp_pcb;
struct pbuf;

namespace softrdma::lwtcp {

class Stack;

// One socket: a listener, or a connection (connecting, established or closed by the peer).
struct Conn {
  Stack* stack = nullptr;
  int fd = -1;             // the eventfd handle
  tcp_pcb* pcb = nullptr;  // null once lwIP has freed it (after an error) or we closed it
  bool listener = false;
  bool connecting = false;
  bool peer_fin = false;
  bool send_blocked = false;  // the last send found no room: tcp_sent signals
  // Its eventfd holds a count (readable) until a reader quiets it: signalling again meanwhile
  // would only cost a system call (a write per received segment once; and a read per quiet).
  bool signalled = false;
  std::uint16_t held_port = 0;  // a port the stack holds in the kernel for it (PortHolds)
  std::uint16_t wire_mss = 0;   // large segments: lwIP's are cut at this MSS (0: not large)
  PeerKey large_key;            // its key among the stack's large-segment connections
  int error = 0;                // the connection failed (errno value)
  // Received, not yet read: lwIP's chains as its receive callback gave them, in order (each
  // under 64 KiB; joined, a chain's 16-bit length would wrap under a wider window).
  std::deque<pbuf*> rx;
  std::deque<int> ready;               // a listener's accepted connections, not yet taken
  sockaddr_storage local{}, remote{};  // sockaddr_in or sockaddr_in6, the stack's family
};

// The lwIP stack as the stream sees it.
class Stack {
 public:
  std::mutex mu;
  // The connection of `handle`, or null (mu held).
  Conn* find(int handle);
  // Makes the handle readable (mu held).
  static void signal(Conn& c);
  // Makes it unreadable again, for a reader that found nothing (mu held).
  static void quiet(Conn& c);
  // Ends the connection: FIN (close) or RST (abort), frees what it holds, closes the handle
  // (mu held).
  void end(int handle, bool reset);
  // Data segments lwIP sends between begin_batch and end_batch may leave joined, for the port's
  // segmentation offload, or wait in the port (FramePort::hold_sends); end_batch sends what is
  // held (mu held for both).
  virtual void begin_batch() = 0;
  virtual void end_batch() = 0;
  // The connection no longer uses the port the stack held for it in the kernel (mu held).
  virtual void release_port(std::uint16_t port) = 0;
  // The connection ends: the stack forgets what it keeps of it (mu held).
  virtual void forget(const Conn& c) = 0;

 protected:
  std::unordered_map<int, std::unique_ptr<Conn>> conns_;
};

std::unique_ptr<iwarp::ByteStream> make_stream(Stack& stack, int handle);

}  // namespace softrdma::lwtcp
