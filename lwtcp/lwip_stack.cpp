// lwIP under softiwarp0: one netif over a FramePort, the raw TCP API behind iwarp::UserTcp's
// sockets, and the callbacks that turn lwIP's events into signalled handles.
#include "lwtcp/lwip_stack.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "lwip/etharp.h"
#include "lwip/ethip6.h"
#include "lwip/init.h"
#include "lwip/netif.h"
#include "lwip/pbuf.h"
#include "lwip/priv/tcp_priv.h"  // tcp_abandon
#include "lwip/tcp.h"
#include "lwip/timeouts.h"
#include "lwtcp/ephemeral_port.h"
#include "lwtcp/jumbo_mss.h"
#include "lwtcp/lwip_internal.h"
#include "lwtcp/lwip_loader.h"
#include "lwtcp/port_hold.h"
#include "lwtcp/receive_window.h"
#include "lwtcp/rx_pbufs.h"
#include "lwtcp/segment_batch.h"
#include "lwtcp/segment_check.h"
#include "lwtcp/tcp_address.h"
#include "netdev/frame_port.h"
#include "netif/ethernet.h"
#include "pcap/pcapng_writer.h"
#include "wire/bytes.h"

namespace softrdma::lwtcp {
namespace {

std::atomic<bool> g_running{false};  // lwIP's state is global: one stack per process
constexpr std::size_t kFramesPerPoll = 256;
// Half-open connections (SYN received, handshake not finished) the stack keeps at most, over all
// its listeners: lwIP's own backlog is compiled out of Debian's build, and each SYN of a flood
// from an address that never answers would keep a connection for 20 s (TCP_SYN_RCVD_TIMEOUT),
// sending SYN-ACKs. A connection request beyond them pushes out the oldest, without a reset (its
// source may be forged): a real client's request is pushed out only by this many later ones
// within its round trip.
constexpr std::size_t kMaxHalfOpen = 256;
// At exit a process's connections die with it, where the kernel would go on sending what they
// hold: a closed connection's last data or FIN that a loss made lwIP keep for a retransmission
// would never reach the peer (which then waits for it forever). The process's exit waits, at
// most this long, until lwIP holds nothing unsent or unacknowledged; the progress thread, still
// running, retransmits meanwhile.
constexpr auto kLingerAtExit = std::chrono::seconds(5);
std::atomic<std::mutex*> g_stack_mu{nullptr};  // the running stack's lock (null: none)

bool holds_unacknowledged() {
  for (tcp_pcb* p = lwip_active_pcbs(); p; p = p->next) {
    if (p->unsent || p->unacked) return true;
  }
  return false;
}

void linger_at_exit() {
  const auto until = std::chrono::steady_clock::now() + kLingerAtExit;
  while (std::chrono::steady_clock::now() < until) {
    {
      std::mutex* mu = g_stack_mu.load();
      if (!mu) return;
      std::lock_guard lock(*mu);
      if (!holds_unacknowledged()) return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

// Debian's lwIP is built with a 64 KiB send buffer (TCP_SND_BUF) and slow-start threshold: a
// sender that idles for an acknowledgement's round trip after each 64 KiB. Its segment queue
// allows four times that (TCP_SND_QUEUELEN, a pbuf a segment here), and the buffer is a count on
// the pcb that acknowledgements only add to: a connection starts with nearly four times the
// built-in size (a full queue is a short write, as a full buffer is). The receive window is
// receive_window.h's.
constexpr tcpwnd_size_t kSendBuffer = 4 * TCP_SND_BUF - 8 * TCP_MSS;
void widen_send_buffer(tcp_pcb* pcb) {
  if (pcb->snd_buf < kSendBuffer) pcb->snd_buf = kSendBuffer;
  if (pcb->ssthresh < kSendBuffer) pcb->ssthresh = kSendBuffer;
}

// Large segments: on a port with TCP segmentation offload, an IPv4 connection's lwIP builds
// segments of up to kLargeSegment wire segments (its pcb's MSS raised after the handshake, as a
// kernel with TSO sizes its segments by the offload's limit), and link_output cuts them at the
// connection's own MSS through the offload (or by hand where that fails). lwIP's segment queue
// (TCP_SND_QUEUELEN, a pbuf a segment) then holds kLargeSendBuffer, and the QP's FPDUs, sized by
// the stream's MSS, span wire segments as siw's do under GSO (its try_gso).
constexpr std::size_t kLargeSegment = 16;
constexpr tcpwnd_size_t kLargeSendBuffer = tcpwnd_size_t{1} << 20;

// lwIP's error as the errno a socket would report.
int errno_of(err_t e) {
  switch (e) {
    case ERR_RST:
      return ECONNRESET;
    case ERR_ABRT:
      return ECONNABORTED;
    case ERR_TIMEOUT:
      return ETIMEDOUT;
    case ERR_MEM:
    case ERR_BUF:
      return ENOMEM;
    case ERR_USE:
      return EADDRINUSE;
    case ERR_RTE:
      return EHOSTUNREACH;
    case ERR_VAL:
      return EINVAL;
    default:
      return EIO;
  }
}

// An address between lwIP's form and ours (IPv4 as IPv4-mapped IPv6).
ip_addr_t to_lwip(const netdev::IpAddr& a) {
  if (a.is_v4()) {
    ip_addr_t r = IPADDR4_INIT(htonl(a.v4_host()));
    return r;
  }
  ip_addr_t r = IPADDR6_INIT(0, 0, 0, 0);
  std::memcpy(ip_2_ip6(&r)->addr, a.bytes.data(), 16);
  return r;
}

netdev::IpAddr from_lwip(const ip_addr_t& a) {
  if (IP_IS_V4_VAL(a)) return netdev::IpAddr::v4(ntohl(ip_2_ip4(&a)->addr));
  netdev::IpAddr r;
  std::memcpy(r.bytes.data(), ip_2_ip6(&a)->addr, 16);
  return r;
}

sockaddr_storage endpoint(const ip_addr_t& a, u16_t port) {
  return to_sockaddr(from_lwip(a), port);
}

class LwipStack final : public Stack, public iwarp::UserTcp {
 public:
  LwipStack(std::unique_ptr<netdev::FramePort> port, const StackConfig& cfg)
      : port_(std::move(port)), cfg_(cfg) {
    std::lock_guard lock(mu);
    lwip_init_unpredictably();
    ip4_addr_t ip, mask, gw;
    ip.addr = v4_ ? htonl(cfg_.address.v4_host()) : 0;
    mask.addr = 0;  // every peer on the link: ARP for each, no gateway
    gw.addr = 0;
    netif_add(&netif_, &ip, &mask, &gw, this, &LwipStack::netif_init, ethernet_input);
    if (!v4_) {
      // A link-local address (index 0: lwIP's rule) from the MAC, and ours as the first global
      // one: lwIP takes as on the link every peer in its /64 (no router here). Both preferred at
      // once, without duplicate address detection: the address is the user's to give.
      netif_create_ip6_linklocal_address(&netif_, 1);
      ip6_addr_t ours;
      std::memcpy(ours.addr, cfg_.address.bytes.data(), 16);
      ip6_addr_clear_zone(&ours);
      netif_ip6_addr_set(&netif_, 1, &ours);
      netif_ip6_addr_set_state(&netif_, 0, IP6_ADDR_PREFERRED);
      netif_ip6_addr_set_state(&netif_, 1, IP6_ADDR_PREFERRED);
    }
    if (large_ok_ && link_mss_ >= 536) {
      // Large segments (go_large) leave lwIP's IP whole, to be cut by TCP rather than
      // fragmented by lwIP: every other packet it sends is smaller than the wire's MTU (the MSS
      // its SYNs offer is the link's, rewritten as they leave, and settle_mss keeps every
      // connection's at or below it).
      netif_.mtu = static_cast<u16_t>(SegmentBatch::kMaxFrame - 14);
#if LWIP_ND6_ALLOW_RA_UPDATES
      netif_.mtu6 = netif_.mtu;
#endif
    }
    netif_set_default(&netif_);
    netif_set_up(&netif_);
    netif_set_link_up(&netif_);
    if (cfg_.trace) trace_iface_ = cfg_.trace->add_interface(cfg_.trace_name + " tcp", 1, 0);
    g_stack_mu = &mu;
    static std::once_flag once;
    std::call_once(once, [] { std::atexit(linger_at_exit); });
  }

  ~LwipStack() override {
    std::lock_guard lock(mu);
    while (!conns_.empty()) end(conns_.begin()->first, true);
    netif_remove(&netif_);
    g_stack_mu = nullptr;
    g_running = false;
  }

  // ---- the progress loop
  int wait_fd() const override {
    return port_->frame_fd();
  }

  int next_timeout_ms() override {
    std::lock_guard lock(mu);
    const u32_t ms = sys_timeouts_sleeptime();
    const int lwip =
        ms == SYS_TIMEOUTS_SLEEPTIME_INFINITE ? -1 : static_cast<int>(std::min<u32_t>(ms, 60000));
    const int port = port_->frame_timeout_ms();  // frames the faults hold
    if (lwip < 0 || port < 0) return std::max(lwip, port);
    return std::min(lwip, port);
  }

  void poll() override {
    std::lock_guard lock(mu);
    begin_batch();  // what the acknowledgements let out leaves joined
    port_->recv_frames(
        [this](const std::uint8_t* f, std::uint32_t len, bool checksum_good) {
          trace(f, len, false);
          ++counts_.rx_frames;
          const SegmentKind k = classify(f, len, checksum_good);
          if (k == SegmentKind::kTcpRst) ++counts_.rx_rst;
          if (k == SegmentKind::kMalformed || len > 0xFFFF) {
            ++counts_.rx_malformed;  // lwIP would drop it too: counted here
            return;
          }
          if (holds_ && k != SegmentKind::kOther && !holds_->held(tcp_dst_port(f, len))) {
            ++counts_.rx_kernels;  // a port of the kernel's: its TCP answers, not lwIP
            return;
          }
          if (k == SegmentKind::kTcpSyn) {
            ++counts_.rx_syn;
            make_room_for_syn();
          }
          if (link_mss_ > TCP_MSS && k != SegmentKind::kOther) peer_mss_.note(f, len);
          // Data segments that continue one another join (receive offload), the rest keep
          // their place after what was joined before them.
          if (k == SegmentKind::kTcp) {
            if (rx_join_.append(f, len)) return;
            flush_rx_join();
            if (rx_join_.append(f, len)) return;
          } else {
            flush_rx_join();
          }
          input(f, len, k != SegmentKind::kOther);
        },
        kFramesPerPoll);
    flush_rx_join();
    if (rx_joined_now_) ack_joined();
    sys_check_timeouts();
    if (holds_) holds_->expire();
    end_batch();
  }

  // One frame into lwIP (a copy in a pbuf of its own, rx_pbufs.h), mu held.
  // `checked`: a TCP segment whose checksum is known good (classify checked it, or it was completed
  // here), which lwIP's own check then does not sum again.
  void input(const std::uint8_t* f, std::size_t len, bool checked) {
    pbuf* p = rx_pbuf(f, len);
    if (!p) {
      ++counts_.rx_dropped;  // out of memory: lost, TCP sends it again
      return;
    }
    const std::size_t tcp = checked ? tcp_header_at(f, static_cast<std::uint32_t>(len)) : 0;
    if (tcp != 0) {
      const TcpPseudo ph = tcp_pseudo(f, tcp);
      note_checked_segment(static_cast<std::uint8_t*>(p->payload) + tcp,
                           static_cast<int>(ph.segment_len), ph.sum);
    }
    if (netif_.input(p, &netif_) != ERR_OK) {
      ++counts_.rx_dropped;
      pbuf_free(p);
    }
    forget_checked_segment();  // taken synchronously: unused by now, or never to be
  }

  // The data segments joined so far (each checked by classify) into lwIP as one: a segment
  // alone as it came, several as one long segment with its checksum completed (mu held). lwIP
  // then copies, checks and acknowledges one segment for many, as a kernel's TCP does behind
  // GRO.
  void flush_rx_join() {
    if (rx_join_.empty()) return;
    std::uint8_t* f = rx_join_.frame();
    const std::size_t len = rx_join_.frame_len();
    if (rx_join_.segments() > 1) {
      netdev::complete_checksum(f, static_cast<std::uint32_t>(len),
                                static_cast<std::uint16_t>(SegmentBatch::tcp_at(f, len)), 16);
      counts_.rx_joined += rx_join_.segments();
      rx_joined_now_ = true;
    }
    input(f, len, true);
    rx_join_.clear();
  }

  // After a pass that gave lwIP joined segments: the acknowledgement lwIP holds back (it
  // acknowledges every second segment, the others after up to 250 ms) goes now, since a joined
  // segment stands for several full ones (RFC 9293: at least every second full-sized segment).
  // A sender waiting for it would otherwise stall (mu held).
  void ack_joined() {
    rx_joined_now_ = false;
    for (tcp_pcb* p = lwip_active_pcbs(); p; p = p->next) {
      if ((p->flags & TF_ACK_DELAY) != 0) {
        tcp_ack_now(p);
        tcp_output(p);
      }
    }
  }

  // Before a connection request reaches lwIP: at kMaxHalfOpen half-open connections, the oldest
  // goes (mu held). The list holds the newest first.
  void make_room_for_syn() {
    std::size_t half_open = 0;
    tcp_pcb* oldest = nullptr;
    for (tcp_pcb* p = lwip_active_pcbs(); p; p = p->next) {
      if (p->state != SYN_RCVD) continue;
      ++half_open;
      oldest = p;
    }
    counts_.half_open_peak = std::max<std::uint64_t>(counts_.half_open_peak, half_open);
    if (half_open < kMaxHalfOpen || !oldest) return;
    tcp_abandon(oldest, 0);  // no reset; nobody of ours knows it yet (accept comes after)
    ++counts_.syn_evicted;
  }

  void release_port(std::uint16_t port) override {
    if (holds_) holds_->release(port);
  }

  void begin_batch() override {
    batching_ = segmentation_;
    port_->hold_sends();
  }
  void end_batch() override {
    flush_batch();
    batching_ = false;
    port_->release_sends();
  }

  std::unique_ptr<iwarp::ByteStream> stream(int handle) override {
    std::lock_guard lock(mu);
    Conn* c = find(handle);
    if (!c || c->listener) return nullptr;
    return make_stream(*this, handle);
  }

  // ---- sockets
  int socket() override {
    std::lock_guard lock(mu);
    tcp_pcb* pcb = tcp_new_ip_type(v4_ ? IPADDR_TYPE_V4 : IPADDR_TYPE_V6);
    if (!pcb) return -ENOMEM;
    // As the CM's kernel sockets: a listener on a port whose connections live on (perftest
    // listens again on its port after the first one).
    ip_set_option(pcb, SOF_REUSEADDR);
    Conn* c = add(pcb);
    if (!c) return -EMFILE;
    return c->fd;
  }

  int bind(int handle, const sockaddr* addr) override {
    const auto a = from_sockaddr(addr, v4_);
    if (!a || (!a->wildcard && a->addr != cfg_.address)) return EADDRNOTAVAIL;
    std::lock_guard lock(mu);
    Conn* c = find(handle);
    if (!c || !c->pcb) return EBADF;
    if (c->held_port != 0) return EINVAL;  // bound already
    if (const int e = bind_pcb(*c, a->wildcard, a->port); e != 0) return e;
    c->local = to_sockaddr(cfg_.address, c->pcb->local_port);
    return 0;
  }

  // tcp_bind, the port held in the kernel first when the kernel holds the address too, and port
  // 0 a dynamic port of our choice (lwtcp/ephemeral_port.h); mu held; 0 or an errno value.
  int bind_pcb(Conn& c, bool wildcard, std::uint16_t port) {
    if (holds_) {
      const int got = holds_->hold(port);
      if (got < 0) return -got;
      port = static_cast<std::uint16_t>(got);
    }
    ip_addr_t ip = to_lwip(wildcard ? any_ : cfg_.address);
    if (port == 0) {  // (held ports come from the kernel's choice)
      int err = 0;
      bind_dynamic_port(
          static_cast<std::uint32_t>(port_draw_()),
          [&](std::uint16_t p) {
            const err_t e = tcp_bind(c.pcb, &ip, p);
            return e == ERR_OK ? 0 : errno_of(e);  // (ERR_USE: EADDRINUSE, the next port)
          },
          err);
      return err;
    }
    if (const err_t e = tcp_bind(c.pcb, &ip, port); e != ERR_OK) {
      if (holds_) holds_->release(port);
      return errno_of(e);
    }
    if (holds_) c.held_port = port;
    return 0;
  }

  int listen(int handle, int backlog) override {
    std::lock_guard lock(mu);
    Conn* c = find(handle);
    if (!c || !c->pcb) return EBADF;
    err_t e = ERR_OK;
    tcp_pcb* l =
        tcp_listen_with_backlog_and_err(c->pcb, static_cast<u8_t>(std::clamp(backlog, 1, 255)), &e);
    if (!l) return errno_of(e);
    c->pcb = l;  // the old pcb is freed by lwIP
    c->listener = true;
    tcp_arg(l, c);
    tcp_accept(l, &LwipStack::on_accept);
    return 0;
  }

  int connect(int handle, const sockaddr* dst) override {
    const auto to = from_sockaddr(dst, v4_);
    if (!to || to->wildcard) return EAFNOSUPPORT;
    std::lock_guard lock(mu);
    Conn* c = find(handle);
    if (!c || !c->pcb) return EBADF;
    // Unbound, lwIP would pick a port the kernel knows nothing of (the kernel picks it), or one
    // of its own choice, which can fail (lwtcp/ephemeral_port.h).
    if (c->pcb->local_port == 0) {
      if (const int e = bind_pcb(*c, false, 0); e != 0) return e;
    }
    ip_addr_t ip = to_lwip(to->addr);
    if (!v4_) ip6_addr_assign_zone(ip_2_ip6(&ip), IP6_UNICAST, &netif_);  // a link-local peer
    hook(c);
    c->connecting = true;
    const err_t e = tcp_connect(c->pcb, &ip, to->port, &LwipStack::on_connected);
    if (e != ERR_OK) {
      c->connecting = false;
      return errno_of(e);
    }
    c->local = to_sockaddr(cfg_.address, c->pcb->local_port);
    c->remote = to_sockaddr(to->addr, to->port);
    return 0;
  }

  int accept(int handle) override {
    std::lock_guard lock(mu);
    Conn* c = find(handle);
    if (!c || !c->listener) return -EINVAL;
    quiet(*c);
    if (c->ready.empty()) return -EAGAIN;
    const int h = c->ready.front();
    c->ready.pop_front();
    if (!c->ready.empty()) signal(*c);
    return h;
  }

  int error(int handle) override {
    std::lock_guard lock(mu);
    Conn* c = find(handle);
    if (!c) return EBADF;
    quiet(*c);
    if (c->error) return c->error;
    return c->connecting ? EINPROGRESS : 0;
  }

  bool names(int handle, sockaddr_storage& local, sockaddr_storage& peer) override {
    std::lock_guard lock(mu);
    const Conn* c = find(handle);
    if (!c) return false;
    local = c->local;
    peer = c->remote;
    return true;
  }

  void close(int handle) override {
    std::lock_guard lock(mu);
    end(handle, false);
  }

  sockaddr_storage address() const override {
    return to_sockaddr(cfg_.address, 0);
  }
  bool owns(const sockaddr* addr) const override {
    const auto a = from_sockaddr(addr, v4_);
    return a && (a->wildcard || a->addr == cfg_.address);
  }

  std::vector<std::pair<std::string, std::uint64_t>> counters() override {
    std::lock_guard lock(mu);
    std::vector<std::pair<std::string, std::uint64_t>> c = {
        {"tcp_rx_frames", counts_.rx_frames},
        {"tcp_tx_frames", counts_.tx_frames},
        {"tcp_rx_syn", counts_.rx_syn},
        {"tcp_half_open_peak", counts_.half_open_peak},
        {"tcp_syn_evicted", counts_.syn_evicted},
        {"tcp_rx_rst", counts_.rx_rst},
        {"tcp_tx_rst", counts_.tx_rst},
        {"tcp_rx_malformed", counts_.rx_malformed},
        {"tcp_rx_dropped", counts_.rx_dropped},
        {"tcp_accept_refused", counts_.accept_refused},
        {"tcp_tx_super_segments", counts_.tx_joined},
        {"tcp_rx_joined_segments", counts_.rx_joined},
        {"tcp_tx_large_segments", counts_.tx_large},
        {"tcp_jumbo_connections", counts_.jumbo},
        {"tcp_rx_kernels", counts_.rx_kernels}};
    for (auto& f : port_->frame_counters()) c.push_back(std::move(f));
    return c;
  }

 private:
  Conn* add(tcp_pcb* pcb) {
    const int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (fd < 0) return nullptr;
    auto c = std::make_unique<Conn>();
    c->stack = this;
    c->fd = fd;
    c->pcb = pcb;
    Conn* raw = c.get();
    conns_[fd] = std::move(c);
    return raw;
  }

  static void hook(Conn* c) {
    tcp_arg(c->pcb, c);
    tcp_recv(c->pcb, &LwipStack::on_recv);
    tcp_sent(c->pcb, &LwipStack::on_sent);
    tcp_err(c->pcb, &LwipStack::on_err);
    tcp_nagle_disable(c->pcb);  // as TCP_NODELAY on the kernel's sockets
    widen_send_buffer(c->pcb);
  }

  // ---- lwIP's callbacks (inside poll() or a call above: mu held)
  static err_t on_accept(void* arg, tcp_pcb* pcb, err_t err) {
    auto* l = static_cast<Conn*>(arg);
    if (err != ERR_OK || !pcb || !l) return ERR_VAL;
    auto* self = static_cast<LwipStack*>(l->stack);
    Conn* c = self->add(pcb);
    if (!c) {
      ++self->counts_.accept_refused;
      tcp_abort(pcb);
      return ERR_ABRT;
    }
    hook(c);
    widen_receive_window(pcb);
    self->settle_mss(pcb);
    self->go_large(c, pcb);
    if (self->holds_ && self->holds_->hold(pcb->local_port) > 0) c->held_port = pcb->local_port;
    c->local = endpoint(pcb->local_ip, pcb->local_port);
    c->remote = endpoint(pcb->remote_ip, pcb->remote_port);
    l->ready.push_back(c->fd);
    signal(*l);
    return ERR_OK;
  }

  static err_t on_connected(void* arg, tcp_pcb* pcb, err_t) {
    auto* c = static_cast<Conn*>(arg);
    if (pcb) {
      widen_send_buffer(pcb);  // the handshake set its own threshold
      widen_receive_window(pcb);
      if (c) {
        auto* self = static_cast<LwipStack*>(c->stack);
        self->settle_mss(pcb);
        self->go_large(c, pcb);
      }
    }
    if (c) {
      c->connecting = false;
      signal(*c);
    }
    return ERR_OK;
  }

  static err_t on_recv(void* arg, tcp_pcb* pcb, pbuf* p, err_t) {
    auto* c = static_cast<Conn*>(arg);
    if (!c) {  // closed on our side: nobody reads
      if (p) {
        open_window(pcb, p->tot_len);
        pbuf_free(p);
      }
      return ERR_OK;
    }
    if (!p) {
      c->peer_fin = true;
    } else {
      c->rx.push_back(p);
    }
    signal(*c);
    return ERR_OK;
  }

  static err_t on_sent(void* arg, tcp_pcb*, u16_t) {
    auto* c = static_cast<Conn*>(arg);
    if (c && c->send_blocked) signal(*c);
    return ERR_OK;
  }

  static void on_err(void* arg, err_t err) {  // lwIP has freed the pcb
    auto* c = static_cast<Conn*>(arg);
    if (!c) return;
    c->pcb = nullptr;
    c->error = c->connecting && err == ERR_RST ? ECONNREFUSED : errno_of(err);
    if (c->connecting && err == ERR_ABRT) c->error = ETIMEDOUT;  // SYN retries ran out
    c->connecting = false;
    signal(*c);
  }

  // ---- the netif
  static err_t netif_init(netif* n) {
    auto* self = static_cast<LwipStack*>(n->state);
    const wire::MacAddr mac = self->port_->frame_mac();
    n->hwaddr_len = ETH_HWADDR_LEN;
    std::memcpy(n->hwaddr, mac.data(), ETH_HWADDR_LEN);
    n->mtu = static_cast<u16_t>(self->port_->frame_mtu());
#if LWIP_ND6_ALLOW_RA_UPDATES
    n->mtu6 = n->mtu;
#endif
    // MLD: lwIP takes neighbour solicitations only for the solicited-node groups it joined.
    n->flags = NETIF_FLAG_BROADCAST | NETIF_FLAG_ETHARP | NETIF_FLAG_ETHERNET | NETIF_FLAG_MLD6;
    n->name[0] = 'i';
    n->name[1] = 'w';
    n->output = etharp_output;
    n->output_ip6 = ethip6_output;
    n->linkoutput = &LwipStack::link_output;
    return ERR_OK;
  }

  static PeerKey key_of(const tcp_pcb* pcb) {
    return PeerKey{from_lwip(pcb->remote_ip), pcb->remote_port, pcb->local_port};
  }

  // After the handshake: the connection's MSS at most the link's (lwIP's own reckoning goes by
  // its netif's MTU, raised for large segments), and on a jumbo link raised to what both sides
  // offered (jumbo_mss.h).
  void settle_mss(tcp_pcb* pcb) {
    if (pcb->mss > link_mss_) pcb->mss = link_mss_;
    if (link_mss_ <= TCP_MSS) return;
    const std::uint16_t peer = peer_mss_.take(key_of(pcb));
    if (peer > TCP_MSS) {
      raise_mss(pcb, std::min(peer, link_mss_));
      ++counts_.jumbo;
    }
  }

  // Raises the connection's segments to large ones where the port can cut them (above).
  void go_large(Conn* c, tcp_pcb* pcb) {
    if (!large_ok_ || c->wire_mss != 0 || pcb->mss == 0) return;
    const std::size_t k = std::min<std::size_t>(
        kLargeSegment, (SegmentBatch::kMaxFrame - SegmentBatch::kHeaders) / pcb->mss);
    if (k < 2) return;
    c->wire_mss = pcb->mss;
    pcb->mss = static_cast<u16_t>(k * pcb->mss);
    if (pcb->cwnd < pcb->mss) pcb->cwnd = pcb->mss;  // one large segment, as TSO sends at once
    if (pcb->snd_buf < kLargeSendBuffer) pcb->snd_buf = kLargeSendBuffer;
    if (pcb->ssthresh < kLargeSendBuffer) pcb->ssthresh = kLargeSendBuffer;
    c->large_key = key_of(pcb);
    large_[c->large_key] = c->wire_mss;
    min_wire_mss_ = std::min(min_wire_mss_, c->wire_mss);
  }

  void forget(const Conn& c) override {
    if (c.wire_mss == 0) return;
    large_.erase(c.large_key);
    min_wire_mss_ = 0xFFFF;
    for (const auto& [key, mss] : large_) min_wire_mss_ = std::min(min_wire_mss_, mss);
  }

  // The wire MSS that an outgoing frame of a large-segment connection must be cut at, 0 when
  // it is a wire segment as it is (untagged, IPv4 without options or IPv6 without extension
  // headers, as lwIP builds them).
  std::uint16_t large_cut(const std::uint8_t* f, std::size_t len) const {
    if (large_.empty()) return 0;
    const std::size_t tcp = SegmentBatch::tcp_at(f, len);
    if (tcp == 0) return 0;
    const std::size_t hdr = tcp + static_cast<std::size_t>(f[tcp + 12] >> 4) * 4;
    if (len <= hdr + min_wire_mss_) return 0;
    const auto it = large_.find(peer_key(f, tcp, true));
    return it != large_.end() && len - hdr > it->second ? it->second : 0;
  }

  // A large segment out: traced and counted as the wire segments it stands for, then joined
  // with the batch (sent at once outside a batch scope), or cut by hand if it cannot join.
  err_t send_large(std::uint8_t* frame, std::size_t len, std::uint16_t cut) {
    const std::size_t tcp = SegmentBatch::tcp_at(frame, len);
    const std::size_t payload = len - (tcp + static_cast<std::size_t>(frame[tcp + 12] >> 4) * 4);
    const std::size_t pieces = (payload + cut - 1) / cut;
    // IPv4 IDs count its wire segments (lwIP counts one a frame): this one's first is its own.
    if (tcp == 14 + 20) {
      if (!wire_id_set_) wire_id_ = wire::load16(frame + 14 + 4);
      wire_id_set_ = true;
      wire::store16(frame + 14 + 4, wire_id_);
      wire_id_ = static_cast<std::uint16_t>(wire_id_ + pieces);
    }
    if (cfg_.trace) {
      SegmentBatch::cut_frame(frame, len, cut, [this](const std::uint8_t* f, std::size_t l) {
        trace(f, static_cast<std::uint32_t>(l), true);
      });
    }
    counts_.tx_frames += pieces;
    ++counts_.tx_large;
    const bool scope = batching_;
    if (!batch_.append(frame, len, cut)) {
      flush_batch();
      if (!batch_.append(frame, len, cut)) {
        SegmentBatch::cut_frame(frame, len, cut, [this](const std::uint8_t* f, std::size_t l) {
          port_->send_frame(f, l);
        });
        return ERR_OK;
      }
    }
    if (!scope) flush_batch();
    return ERR_OK;
  }

  static err_t link_output(netif* n, pbuf* p) {
    auto* self = static_cast<LwipStack*>(n->state);
    auto* frame = static_cast<std::uint8_t*>(p->payload);
    if (p->next) {  // a chain: one frame of it
      if (p->tot_len > self->tx_.size()) return ERR_BUF;
      pbuf_copy_partial(p, self->tx_.data(), p->tot_len, 0);
      frame = self->tx_.data();
    }
    offer_window_shift(frame, p->tot_len, kWindowShift);  // a SYN's: receive_window.h
    offer_mss(frame, p->tot_len, self->link_mss_);        // a SYN's: the link's MSS (jumbo_mss.h)
    if (const std::uint16_t cut = self->large_cut(frame, p->tot_len)) {
      return self->send_large(frame, p->tot_len, cut);
    }
    self->trace(frame, p->tot_len, true);  // each segment as lwIP built it, joined or not
    ++self->counts_.tx_frames;
    // lwIP's answer to a segment of no connection (or to one it gave up): a reset.
    if (is_tcp_rst(frame, p->tot_len)) ++self->counts_.tx_rst;
    if (self->batching_) {
      if (self->batch_.append(frame, p->tot_len)) return ERR_OK;
      self->flush_batch();
      if (self->batch_.append(frame, p->tot_len)) return ERR_OK;
    }
    return self->port_->send_frame(frame, p->tot_len) ? ERR_OK : ERR_IF;
  }

  // Sends the joined segments: one as it is, several as a super-segment; where the port refuses
  // that, cut again and sent one by one, and no more joining (said once).
  void flush_batch() {
    if (batch_.empty()) return;
    if (batch_.pieces() == 1) {
      port_->send_frame(batch_.frame(), batch_.frame_len());
    } else if (segmentation_ &&
               port_->send_tcp_segments(batch_.frame(), batch_.frame_len(), batch_.cut())) {
      ++counts_.tx_joined;
    } else {
      if (segmentation_) {
        std::fprintf(stderr,
                     "softrdma: softiwarp0: the link refused a TCP super-segment (%s): "
                     "segments leave one by one from now on\n",
                     std::strerror(errno));
      }
      segmentation_ = batching_ = false;
      batch_.segment([this](const std::uint8_t* f, std::size_t len) { port_->send_frame(f, len); });
    }
    batch_.clear();
  }

  void trace(const std::uint8_t* f, std::uint32_t len, bool tx) {
    if (!cfg_.trace) return;
    if (vlan_ && len >= 14) {  // as on the wire: the port's tag after the addresses
      wire::insert_vlan_tag(wire::Bytes(f, len), *vlan_, traced_);
      f = traced_.data();
      len = static_cast<std::uint32_t>(traced_.size());
    }
    pcap::Annotation a;
    a.tx = tx;
    a.dev = cfg_.trace_name;
    std::array<char, 128> comment{};
    const std::size_t clen = pcap::format_annotation(a, comment.data(), comment.size());
    cfg_.trace->write(trace_iface_, pcap::PcapngWriter::now_ns(), wire::Bytes(f, len), len,
                      tx ? pcap::kEpbOutbound : pcap::kEpbInbound,
                      std::string_view(comment.data(), clen));
  }

  // Under mu: frames in and out, connection requests (SYN) and resets received, resets sent,
  // frames dropped before lwIP (malformed) or by it (no memory, refused by its input), and
  // connections lwIP accepted that we could not take (no handle left: reset), super-segments
  // sent (each of several of the tx_frames), large segments cut (go_large); the most half-open
  // connections lwIP held when a request came, and those pushed out for a newer one (kMaxHalfOpen);
  // with held ports, TCP frames to a port of the kernel's (not given to lwIP); connections whose
  // MSS go_jumbo raised; received segments joined with others before lwIP took them.
  struct Counts {
    std::uint64_t rx_frames = 0, tx_frames = 0, rx_syn = 0, rx_rst = 0, tx_rst = 0,
                  rx_malformed = 0, rx_dropped = 0, accept_refused = 0, tx_joined = 0, tx_large = 0,
                  half_open_peak = 0, syn_evicted = 0, rx_kernels = 0, jumbo = 0, rx_joined = 0;
  };

  std::unique_ptr<netdev::FramePort> port_;
  StackConfig cfg_;
  const bool v4_ = cfg_.address.is_v4();
  const netdev::IpAddr any_ = v4_ ? netdev::IpAddr::v4(0) : netdev::IpAddr{};  // the wildcard
  Counts counts_;
  // The kernel holds the address too: the ports held for our connections (cfg_.hold_ports).
  std::unique_ptr<PortHolds> holds_ =
      cfg_.hold_ports ? std::make_unique<PortHolds>(cfg_.address,
                                                    [this](std::uint16_t port, bool held) {
                                                      return port_->steer_tcp_port(port, held);
                                                    })
                      : nullptr;
  std::minstd_rand port_draw_{std::random_device{}()};  // where port 0's search starts (mu)
  netif netif_{};
  std::uint32_t trace_iface_ = 0;
  const std::optional<std::uint16_t> vlan_ = port_->frame_vlan();  // the port tags every frame
  std::vector<std::uint8_t> traced_;                               // a frame traced with its tag
  std::array<std::uint8_t, SegmentBatch::kMaxFrame> tx_{};         // a chained frame, joined
  // Large-segment connections (go_large): their wire MSS by peer address and ports, and the
  // least of them.
  std::map<PeerKey, std::uint16_t> large_;
  std::uint16_t min_wire_mss_ = 0xFFFF;
  std::uint16_t wire_id_ = 0;  // the IPv4 ID of the next large segment's first wire segment
  bool wire_id_set_ = false;
  // Segmentation offload: the port has it (and it has not failed), a batch scope is open, and
  // the segments held.
  bool segmentation_ = port_->tcp_segmentation();
  // Large segments (go_large): on a port that takes them.
  const bool large_ok_ = port_->tcp_large_segments();
  // The MSS the link carries (what lwIP's SYNs offer; above TCP_MSS, jumbo frames), and the MSS
  // that peers' SYNs offered (noted on a jumbo link only).
  const std::uint16_t link_mss_ = link_mss(port_->frame_mtu(), v4_);
  PeerMss peer_mss_;
  bool batching_ = false;
  SegmentBatch batch_;
  // Received data segments being joined (flush_rx_join), and whether a pass joined any.
  SegmentBatch rx_join_;
  bool rx_joined_now_ = false;
};

}  // namespace

Conn* Stack::find(int handle) {
  auto it = conns_.find(handle);
  return it == conns_.end() ? nullptr : it->second.get();
}

void Stack::signal(Conn& c) {
  if (c.signalled) return;
  c.signalled = true;
  const std::uint64_t one = 1;
  [[maybe_unused]] const ssize_t n = ::write(c.fd, &one, sizeof one);
}

void Stack::quiet(Conn& c) {
  if (!c.signalled) return;
  c.signalled = false;
  std::uint64_t v;
  [[maybe_unused]] const ssize_t r = ::read(c.fd, &v, sizeof v);
}

void Stack::end(int handle, bool reset) {
  auto it = conns_.find(handle);
  if (it == conns_.end()) return;
  Conn& c = *it->second;
  if (c.pcb) {
    tcp_arg(c.pcb, nullptr);
    if (!c.listener) {
      tcp_recv(c.pcb, nullptr);
      tcp_sent(c.pcb, nullptr);
      tcp_err(c.pcb, nullptr);
    }
    if (reset && !c.listener) {
      tcp_abort(c.pcb);
    } else if (tcp_close(c.pcb) != ERR_OK) {
      tcp_abort(c.pcb);  // out of memory for the FIN
    }
  }
  for (pbuf* p : c.rx) pbuf_free(p);
  c.rx.clear();
  if (c.held_port != 0) release_port(c.held_port);
  forget(c);
  for (const int h : c.ready) end(h, true);  // accepted, never taken
  ::close(c.fd);
  conns_.erase(handle);
}

std::shared_ptr<iwarp::UserTcp> open_stack(std::unique_ptr<netdev::FramePort> port,
                                           const StackConfig& cfg, std::string& error) {
  if (!load_lwip(error)) return nullptr;
  if (g_running.exchange(true)) {
    error = "lwIP already runs in this process (one softiwarp0 a process)";
    return nullptr;
  }
  return std::make_shared<LwipStack>(std::move(port), cfg);
}

}  // namespace softrdma::lwtcp
