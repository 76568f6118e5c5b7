#include "netdev/af_xdp.h"

#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/if_link.h>
#include <linux/if_xdp.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>
#include <xdp/libxdp.h>
#include <xdp/xsk.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdarg>
#include <cstring>

#include "netdev/gso_frame.h"
#include "netdev/xdp/roce_redirect_bpf.h"

namespace softrdma::netdev {

namespace {

constexpr std::uint32_t kChunk = XSK_UMEM__DEFAULT_FRAME_SIZE;  // 4096
constexpr std::uint32_t kRxChunks = 4096;  // fill and RX rings: 2048 frames of MTU 4096
constexpr std::uint32_t kTxChunks = 1024;  // TX and completion rings
constexpr std::uint32_t kKickTries = 64;
// Multi-buffer AF_XDP (Linux 6.6): bound with XDP_USE_SG, a socket takes and gives frames that
// span several chunks, each chunk but a frame's last marked XDP_PKT_CONTD in its descriptor's
// options. Debian 12's uapi headers (6.1) lack both names; these are the kernel's values.
constexpr std::uint16_t kXdpUseSg = 1U << 4;     // XDP_USE_SG
constexpr std::uint32_t kXdpPktContd = 1U << 0;  // XDP_PKT_CONTD
// A frame's chunks at most: 12 KiB, a 9000-byte MTU and its headers.
constexpr std::uint32_t kFrameChunks = 3;
// The largest super-segment generic XDP hands over: an IPv4 or IPv6 packet of 64 KiB, its
// Ethernet header and a VLAN tag.
constexpr std::size_t kMaxSuperFrame = 65535 + 40 + 18;
constexpr int kBusyTries = 100;  // 1 s
constexpr useconds_t kBusyWaitUs = 10'000;

// libbpf and libxdp print their own diagnostics; ours say it once, in the error.
int quiet_bpf(enum libbpf_print_level, const char*, va_list) {
  return 0;
}
int quiet_xdp(enum libxdp_print_level, const char*, va_list) {
  return 0;
}

std::string why(int err) {
  std::string s = std::strerror(err);
  if (err == EPERM || err == EACCES) s += " (needs CAP_BPF and CAP_NET_ADMIN: run as root)";
  return s;
}

}  // namespace

struct AfXdpNetdev::Xsk {
  bpf_object* obj = nullptr;
  bpf_link* link = nullptr;
  int skb_link_fd = -1;  // the program attached in generic (skb) mode, through a BPF link
  void* umem_area = nullptr;
  std::size_t umem_size = 0;
  int tcp_ports_fd = -1;  // the program's tcp_ports map (steering kTcpShared)
  xsk_umem* umem = nullptr;
  xsk_socket* xsk = nullptr;
  xsk_ring_prod fq{};
  xsk_ring_cons cq{};
  xsk_ring_cons rx{};
  xsk_ring_prod tx{};
  // The steps of AfXdpNetdev::open; each false with `error` set (prefixed with `where`).
  // Loads the XDP program with our address, port and VLAN in its configuration map.
  bool load_program(const std::string& where, const IpAddr& local,
                    std::optional<std::uint16_t> vlan_tci, Steering steer, bpf_program*& prog,
                    int& xsks_fd, std::string& error);
  // The UMEM: kRxChunks for the fill/RX rings, then kTxChunks for TX.
  bool create_umem(const std::string& where, std::string& error);
  // The XDP socket on `queue`, zero-copy where the driver can, multi-buffer where the kernel can.
  bool create_socket(const std::string& where, const std::string& ifname, std::uint32_t queue,
                     bool& zero_copy, bool& multi_buffer, std::string& error);
  // Attaches the program to the interface through a BPF link, in generic mode with `skb_mode`.
  bool attach(bpf_program* prog, int ifindex, bool skb_mode, const std::string& where,
              const std::string& ifname, std::string& error);
  ~Xsk() {
    if (xsk) xsk_socket__delete(xsk);
    if (umem) xsk_umem__delete(umem);
    if (link) bpf_link__destroy(link);
    if (skb_link_fd >= 0) close(skb_link_fd);
    if (obj) bpf_object__close(obj);
    if (umem_area) munmap(umem_area, umem_size);
  }
};

bool AfXdpNetdev::Xsk::load_program(const std::string& where, const IpAddr& local,
                                    std::optional<std::uint16_t> vlan_tci, Steering steer,
                                    bpf_program*& prog, int& xsks_fd, std::string& error) {
  // The XDP program, with our address and port in its configuration map.
  // Filled by hand as LIBBPF_OPTS would: that macro is a GNU statement expression, which
  // clang's -Wgnu-statement-expression rejects under -Werror (the fuzz build).
  bpf_object_open_opts open_opts;
  std::memset(&open_opts, 0, sizeof open_opts);
  open_opts.sz = sizeof open_opts;
  open_opts.object_name = "softrdma_roce";
  obj = bpf_object__open_mem(kRoceRedirectBpf, kRoceRedirectBpfSize, &open_opts);
  if (!obj) {
    error = where + ": opening the XDP program: " + why(errno);
    return false;
  }
  prog = bpf_object__find_program_by_name(obj, "softrdma_roce_redirect");
  // Declared able to see multi-buffer frames (it reads only the headers, in the first buffer):
  // veth refuses other programs on links with an MTU beyond a page (9000), and in generic mode
  // a super-segment is then handed over in pages rather than copied into one linear buffer.
  if (prog) bpf_program__set_flags(prog, bpf_program__flags(prog) | BPF_F_XDP_HAS_FRAGS);
  int load = bpf_object__load(obj);
  if (load != 0 && prog) {  // a kernel before 5.18 knows no such flag: load it without
    bpf_object__close(obj);
    obj = bpf_object__open_mem(kRoceRedirectBpf, kRoceRedirectBpfSize, &open_opts);
    if (!obj) {
      error = where + ": opening the XDP program: " + why(errno);
      return false;
    }
    load = bpf_object__load(obj);
    prog = bpf_object__find_program_by_name(obj, "softrdma_roce_redirect");
  }
  if (load != 0) {
    error = where + ": loading the XDP program: " + why(-load);
    if (-load == EINVAL || -load == ENOSYS) error += " (a kernel without BPF/XDP?)";
    return false;
  }
  const int config_fd = bpf_object__find_map_fd_by_name(obj, "roce_config");
  xsks_fd = bpf_object__find_map_fd_by_name(obj, "xsks_map");
  if (!prog || config_fd < 0 || xsks_fd < 0) {
    error = where + ": the embedded XDP program lacks its maps";
    return false;
  }
  // struct roce_config of the XDP program.
  struct {
    std::uint32_t ipv6, addr4;
    std::array<std::uint8_t, 16> addr6;
    std::uint32_t port, vid, tcp;
  } cfg{};
  cfg.ipv6 = local.is_v4() ? 0 : 1;
  cfg.addr4 = local.is_v4() ? htonl(local.v4_host()) : 0;
  cfg.addr6 = local.bytes;
  cfg.port = htons(kRoceV2Port);
  cfg.vid = vlan_tci ? *vlan_tci & 0xFFFu : 0;
  cfg.tcp = steer == Steering::kTcp ? 1 : steer == Steering::kTcpShared ? 2 : 0;
  tcp_ports_fd = bpf_object__find_map_fd_by_name(obj, "tcp_ports");
  const std::uint32_t key = 0;
  if (bpf_map_update_elem(config_fd, &key, &cfg, BPF_ANY) != 0) {
    error = where + ": configuring the XDP program: " + why(errno);
    return false;
  }
  return true;
}

bool AfXdpNetdev::Xsk::create_umem(const std::string& where, std::string& error) {
  // The UMEM: kRxChunks for the fill/RX rings, then kTxChunks for TX.
  umem_size = std::size_t{kChunk} * (kRxChunks + kTxChunks);
  umem_area = mmap(nullptr, umem_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (umem_area == MAP_FAILED) {
    umem_area = nullptr;
    error = where + ": UMEM: " + std::strerror(errno);
    return false;
  }
  xsk_umem_config ucfg{};
  ucfg.fill_size = kRxChunks;
  ucfg.comp_size = kTxChunks;
  ucfg.frame_size = kChunk;
  ucfg.frame_headroom = 0;
  ucfg.flags = 0;
  if (int r = xsk_umem__create(&umem, umem_area, umem_size, &fq, &cq, &ucfg); r != 0) {
    umem = nullptr;
    error = where + ": creating the UMEM: " + why(-r);
    if (-r == EAFNOSUPPORT) error += " (a kernel without AF_XDP)";
    return false;
  }
  return true;
}

bool AfXdpNetdev::Xsk::create_socket(const std::string& where, const std::string& ifname,
                                     std::uint32_t queue, bool& zero_copy, bool& multi_buffer,
                                     std::string& error) {
  xsk_socket_config scfg{};
  scfg.rx_size = kRxChunks;
  scfg.tx_size = kTxChunks;
  scfg.libxdp_flags = XSK_LIBXDP_FLAGS__INHIBIT_PROG_LOAD;  // ours is attached below
  // Zero-copy where the driver supports it, else copy mode (veth, generic XDP); each multi-buffer
  // where the kernel and driver have it (EINVAL before Linux 6.6, EOPNOTSUPP from a zero-copy
  // driver without it). A socket closed just before on this queue releases it from a kernel work
  // item: a bind in between is refused with EBUSY for a few milliseconds.
  int r = 0;
  for (const int mode : {XDP_ZEROCOPY | kXdpUseSg, XDP_ZEROCOPY, XDP_COPY | kXdpUseSg, XDP_COPY}) {
    scfg.bind_flags = static_cast<std::uint16_t>(mode | XDP_USE_NEED_WAKEUP);
    for (int tries = 0; tries < kBusyTries; ++tries) {
      r = xsk_socket__create(&xsk, ifname.c_str(), queue, umem, &rx, &tx, &scfg);
      if (r != -EBUSY) break;
      xsk = nullptr;
      usleep(kBusyWaitUs);
    }
    if (r == 0) {
      zero_copy = (mode & XDP_ZEROCOPY) != 0;
      multi_buffer = (mode & kXdpUseSg) != 0;
      break;
    }
    xsk = nullptr;
    if (r == -EPERM || r == -EACCES || r == -EBUSY) break;  // not the mode's fault
  }
  if (r != 0) {
    xsk = nullptr;
    error = where + ": creating the XDP socket on queue " + std::to_string(queue) + ": " + why(-r);
    return false;
  }
  return true;
}

bool AfXdpNetdev::Xsk::attach(bpf_program* prog, int ifindex, bool skb_mode,
                              const std::string& where, const std::string& ifname,
                              std::string& error) {
  int e = 0;
  if (skb_mode) {
    bpf_link_create_opts opts;
    std::memset(&opts, 0, sizeof opts);
    opts.sz = sizeof opts;
    opts.flags = XDP_FLAGS_SKB_MODE;
    skb_link_fd = bpf_link_create(bpf_program__fd(prog), ifindex, BPF_XDP, &opts);
    if (skb_link_fd < 0) e = errno;
  } else {
    link = bpf_program__attach_xdp(prog, ifindex);
    if (!link) e = errno;
  }
  if (e != 0) {
    error = where + ": attaching the XDP program: " + why(e);
    if (e == EBUSY || e == EEXIST) {
      error +=
          " (another XDP program is attached to " + ifname + ": one AF_XDP device per interface)";
    } else if (e == EOPNOTSUPP || e == EINVAL) {
      error += " (the kernel or the driver does not support XDP)";
    }
    return false;
  }
  return true;
}

AfXdpNetdev::AfXdpNetdev() : x_(std::make_unique<Xsk>()) {}

AfXdpNetdev::~AfXdpNetdev() {
  flush_faults();
  if (gso_fd_ >= 0) close(gso_fd_);
}

std::unique_ptr<AfXdpNetdev> AfXdpNetdev::open(const std::string& ifname, IpAddr local,
                                               std::string& error, FaultConfig faults,
                                               std::optional<std::uint16_t> vlan_tci,
                                               std::uint32_t queue, Steering steer) {
  std::unique_ptr<AfXdpNetdev> d(new AfXdpNetdev());
  const std::string where = "af_xdp:" + ifname;
  if (steer == Steering::kTcp && !interface_with(local).empty()) {
    // The kernel would answer our segments with resets: without held ports (kTcpShared), a
    // userspace TCP needs an address of its own.
    error = where + ": a userspace TCP needs an address no interface holds, not " + local.str();
    return nullptr;
  }
  if (!read_link(where, ifname, d->link_, error)) return nullptr;
  d->link_.vlan_tci = vlan_tci;
  libbpf_set_print(quiet_bpf);
  libxdp_set_print(quiet_xdp);
  Xsk& x = *d->x_;

  bpf_program* prog = nullptr;
  int xsks_fd = -1;
  if (!x.load_program(where, local, vlan_tci, steer, prog, xsks_fd, error)) return nullptr;

  if (!x.create_umem(where, error) ||
      !x.create_socket(where, ifname, queue, d->zero_copy_, d->multi_buffer_, error)) {
    return nullptr;
  }
  // The largest frame: one chunk, or kFrameChunks of them with multi-buffer.
  d->max_frame_ = kChunk * (d->multi_buffer_ ? kFrameChunks : 1);
  const auto tag = static_cast<std::uint32_t>(vlan_tci ? wire::kVlanTagLen : 0);
  d->link_.mtu = std::min<std::uint32_t>(
      d->link_.mtu, d->max_frame_ - static_cast<std::uint32_t>(wire::kEthernetLen) - tag);
  // On a veth (copy mode) with multi-buffer frames the program runs in generic (skb) mode, so
  // super-segments and UDP GSO frames come whole (see the header). A NIC keeps native mode:
  // there generic mode would cost the kernel's own flows on the interface a copy of every GRO
  // packet.
  const bool skb_mode = !d->zero_copy_ && d->multi_buffer_ && d->link_.driver == "veth";
  d->cut_whole_ = skb_mode && steer == Steering::kRoce;
  d->rx_frame_.resize(skb_mode ? kMaxSuperFrame : d->max_frame_);
  if (!d->zero_copy_) {
    // In copy mode the kernel allocates and copies an skb for every frame of the TX ring anyway:
    // RoCE's frames leave through a packet socket instead, runs of datagrams as UDP GSO frames;
    // so do a userspace TCP's, super-segments as TCP GSO frames (figures in docs/iwarp.md).
    d->gso_fd_ = open_offload_socket(d->link_.ifindex);
    d->udp_gso_ = d->gso_fd_ >= 0 && steer == Steering::kRoce;
    d->tcp_gso_ = d->gso_fd_ >= 0 && steers_tcp(steer);
  }
  d->fd_ = xsk_socket__fd(x.xsk);
  if (const int r = xsk_socket__update_xskmap(x.xsk, xsks_fd); r != 0) {
    error = where + ": registering the XDP socket: " + why(-r);
    return nullptr;
  }
  // The fill ring gets every RX chunk; TX chunks start free.
  std::uint32_t idx = 0;
  if (xsk_ring_prod__reserve(&x.fq, kRxChunks, &idx) != kRxChunks) {
    error = where + ": the fill ring is smaller than asked";
    return nullptr;
  }
  for (std::uint32_t i = 0; i < kRxChunks; ++i) {
    *xsk_ring_prod__fill_addr(&x.fq, idx + i) = std::uint64_t{i} * kChunk;
  }
  xsk_ring_prod__submit(&x.fq, kRxChunks);
  d->fill_pending_.reserve(kRxChunks);
  d->tx_free_.reserve(kTxChunks);
  for (std::uint32_t i = 0; i < kTxChunks; ++i) {
    d->tx_free_.push_back(std::uint64_t{kRxChunks + i} * kChunk);
  }

  // Attach last, through a BPF link: it is detached when the process exits, even on a crash.
  if (!x.attach(prog, d->link_.ifindex, skb_mode, where, ifname, error)) return nullptr;

  NeighbourTable::Config nc;
  nc.answer_arp = false;  // ARP goes to the kernel, which answers for its address
  nc.resolver = NeighbourTable::Resolver::kKernel;
  // Read the kernel's table every 20 ms for 3 s: its own resolution sends three probes a second
  // apart, and the first is lost on a link that has just come up.
  nc.retry = std::chrono::milliseconds(20);
  nc.tries = 150;
  if (!d->start(where, local, nc, faults, error, steer == Steering::kRoce)) return nullptr;
  return d;
}

void AfXdpNetdev::reclaim() {
  Xsk& x = *x_;
  std::uint32_t idx = 0;
  const std::uint32_t n = xsk_ring_cons__peek(&x.cq, kTxChunks, &idx);
  for (std::uint32_t i = 0; i < n; ++i) {
    tx_free_.push_back(xsk_umem__extract_addr(*xsk_ring_cons__comp_addr(&x.cq, idx + i)));
  }
  if (n > 0) xsk_ring_cons__release(&x.cq, n);
  tx_outstanding_ -= std::min(tx_outstanding_, n);
}

void AfXdpNetdev::kick() {
  // In copy mode the kernel sends from the TX ring only when asked, a batch per call.
  for (std::uint32_t i = 0; i < kKickTries && tx_outstanding_ > 0; ++i) {
    if (sendto(fd_, nullptr, 0, MSG_DONTWAIT, nullptr, 0) >= 0) {
      reclaim();
      if (xsk_ring_prod__needs_wakeup(&x_->tx) == 0) break;
      continue;
    }
    if (errno != EAGAIN && errno != EBUSY && errno != ENOBUFS && errno != EINTR) break;
    reclaim();
  }
}

std::size_t AfXdpNetdev::push(std::span<const TxFrame> frames) {
  Xsk& x = *x_;
  const auto chunks_of = [](const TxFrame& f) { return (f.hdr_len + f.len + kChunk - 1) / kChunk; };
  // Bytes [from, from + n) of the frame (headers, then datagram) to `to`.
  const auto copy_part = [](const TxFrame& f, std::uint32_t from, std::uint32_t n,
                            std::uint8_t* to) {
    if (from < f.hdr_len) {
      const std::uint32_t k = std::min(n, f.hdr_len - from);
      std::memcpy(to, f.hdr + from, k);
      to += k;
      from += k;
      n -= k;
    }
    if (n > 0) std::memcpy(to, f.data + (from - f.hdr_len), n);
  };
  std::lock_guard lock(tx_mu_);
  reclaim();
  std::size_t i = 0;
  while (i < frames.size()) {
    if (tx_free_.size() < chunks_of(frames[i])) kick();
    // The frames whose chunks are free, one descriptor a chunk.
    std::size_t end = i;
    std::uint32_t descs = 0;
    while (end < frames.size() && descs + chunks_of(frames[end]) <= tx_free_.size()) {
      descs += chunks_of(frames[end++]);
    }
    std::uint32_t idx = 0;
    if (descs == 0 || xsk_ring_prod__reserve(&x.tx, descs, &idx) != descs) {
      break;  // no free chunk or ring slot even after a kick: the rest is lost
    }
    for (std::uint32_t k = 0; i < end; ++i) {
      const TxFrame& f = frames[i];
      const std::uint32_t total = f.hdr_len + f.len;
      for (std::uint32_t done = 0; done < total; ++k) {
        const std::uint64_t addr = tx_free_.back();
        tx_free_.pop_back();
        const std::uint32_t n = std::min(kChunk, total - done);
        copy_part(f, done, n, static_cast<std::uint8_t*>(xsk_umem__get_data(x.umem_area, addr)));
        done += n;
        xdp_desc* desc = xsk_ring_prod__tx_desc(&x.tx, idx + k);
        desc->addr = addr;
        desc->len = n;
        desc->options = done < total ? kXdpPktContd : 0;
      }
    }
    xsk_ring_prod__submit(&x.tx, descs);
    tx_outstanding_ += descs;
    if (!tx_held_) kick();
  }
  return i;
}

bool AfXdpNetdev::steer_tcp_port(std::uint16_t port, bool ours) {
  const std::uint32_t key = port, value = ours ? 1 : 0;
  return x_->tcp_ports_fd >= 0 && bpf_map_update_elem(x_->tcp_ports_fd, &key, &value, BPF_ANY) == 0;
}

void AfXdpNetdev::hold_sends() {
  std::lock_guard lock(tx_mu_);
  tx_held_ = true;
}

void AfXdpNetdev::release_sends() {
  std::lock_guard lock(tx_mu_);
  tx_held_ = false;
  if (gso_fd_ >= 0) {
    send_held();
  } else {
    kick();
  }
}

bool AfXdpNetdev::send_frame(const std::uint8_t* frame, std::size_t len) {
  {
    std::lock_guard lock(tx_mu_);
    if (tx_held_ && tcp_gso_ && len <= max_frame_) {
      // Held for release_sends: one sendmmsg for the lot (send_frames counts them then).
      if (held_.size() == kHeldFrames) send_held();
      const std::size_t at = held_bytes_.size();
      if (link_.vlan_tci && len >= wire::kEthernetLen) {
        wire::insert_vlan_tag(wire::Bytes(frame, len), *link_.vlan_tci, vlan_scratch_);
        held_bytes_.insert(held_bytes_.end(), vlan_scratch_.begin(), vlan_scratch_.end());
      } else {
        held_bytes_.insert(held_bytes_.end(), frame, frame + len);
      }
      held_.push_back({at, held_bytes_.size() - at});
      return true;
    }
  }
  return RawFramePortNetdev::send_frame(frame, len);
}

bool AfXdpNetdev::send_tcp_segments(const std::uint8_t* frame, std::size_t len, std::uint16_t mss) {
  if (!tcp_gso_) return false;
  std::lock_guard lock(tx_mu_);
  send_held();  // in order with the frames held before it
  return send_tcp_gso(gso_fd_, frame, len, mss, link_.vlan_tci, counters_);
}

void AfXdpNetdev::send_held() {
  if (held_.empty()) return;
  std::array<TxFrame, kHeldFrames> frames{};
  for (std::size_t i = 0; i < held_.size(); ++i) {
    const std::uint8_t* f = held_bytes_.data() + held_[i].first;
    frames[i] = TxFrame{f, 0, f, static_cast<std::uint32_t>(held_[i].second)};
  }
  netdev::send_frames(gso_fd_, true, std::span<const TxFrame>(frames.data(), held_.size()),
                      counters_);
  held_.clear();
  held_bytes_.clear();
}

void AfXdpNetdev::put_frames(std::span<const TxFrame> frames) {
  if (gso_fd_ >= 0) {
    netdev::send_frames(gso_fd_, true, frames, counters_);  // in order with the GSO frames
  } else {
    count_sent(frames, push(frames));
  }
}

bool AfXdpNetdev::put_udp_segments(const std::uint8_t* hdr, std::span<const TxFrame> segs,
                                   std::uint16_t seg_size) {
  if (send_udp_gso(gso_fd_, hdr, hdr_len(), segs, seg_size, counters_)) return true;
  udp_gso_ = false;  // this kernel takes no UDP GSO from packet sockets: a frame each from now on
  return false;
}

bool AfXdpNetdev::put_frame(const std::uint8_t* frame, std::size_t len) {
  if (len > max_frame_) return false;
  if (gso_fd_ >= 0) return send_whole_frame(gso_fd_, frame, len);  // in order with the others
  const TxFrame f{frame, static_cast<std::uint32_t>(len), nullptr, 0};
  return push(std::span<const TxFrame>(&f, 1)) == 1;
}

void AfXdpNetdev::refill() {
  // The fill ring has room for every RX chunk, so all fit; should one not, it waits here for
  // the next call rather than being lost.
  Xsk& x = *x_;
  std::uint32_t n = static_cast<std::uint32_t>(fill_pending_.size());
  std::uint32_t idx = 0;
  while (n > 0 && xsk_ring_prod__reserve(&x.fq, n, &idx) != n) n /= 2;
  if (n == 0) return;
  const std::size_t first = fill_pending_.size() - n;
  for (std::uint32_t k = 0; k < n; ++k) {
    *xsk_ring_prod__fill_addr(&x.fq, idx + k) = fill_pending_[first + k];
  }
  xsk_ring_prod__submit(&x.fq, n);
  fill_pending_.resize(first);
}

std::size_t AfXdpNetdev::drain_rx(std::size_t max,
                                  const std::function<bool(std::uint8_t*, std::uint32_t)>& take) {
  Xsk& x = *x_;
  std::uint32_t idx = 0;
  std::uint32_t got = xsk_ring_cons__peek(&x.rx, static_cast<std::uint32_t>(max), &idx);
  std::size_t frames = 0;
  for (std::uint32_t i = 0; i < got; ++i) {
    const xdp_desc* desc = xsk_ring_cons__rx_desc(&x.rx, idx + i);
    const std::uint64_t addr = xsk_umem__add_offset_to_addr(desc->addr);
    auto* data = static_cast<std::uint8_t*>(xsk_umem__get_data(x.umem_area, addr));
    fill_pending_.push_back(xsk_umem__extract_addr(desc->addr));  // reserved: no allocation
    const bool more = (desc->options & kXdpPktContd) != 0;
    bool go_on = true;
    if (!more && rx_frame_len_ == 0) {  // a frame in one chunk: handed up where it lies
      go_on = take(data, desc->len);
      ++frames;
    } else {
      // A chunk of a multi-buffer frame, gathered (its last chunk may come in a later batch).
      if (rx_frame_len_ + desc->len <= rx_frame_.size()) {
        std::memcpy(rx_frame_.data() + rx_frame_len_, data, desc->len);
      }
      rx_frame_len_ += desc->len;
      if (!more) {
        if (rx_frame_len_ <= rx_frame_.size()) {
          go_on = take(rx_frame_.data(), static_cast<std::uint32_t>(rx_frame_len_));
          ++frames;
        } else {
          bump(counters_.rx_malformed);  // beyond the MTU we offer: a peer's misconfiguration
        }
        rx_frame_len_ = 0;
      }
    }
    if (!go_on) {  // the rest stays in the ring for the next call
      xsk_ring_cons__cancel(&x.rx, got - (i + 1));
      got = i + 1;
      break;
    }
  }
  if (got > 0) xsk_ring_cons__release(&x.rx, got);
  if (!fill_pending_.empty()) refill();
  if (xsk_ring_prod__needs_wakeup(&x.fq)) {
    (void)!recvfrom(fd_, nullptr, 0, MSG_DONTWAIT, nullptr, nullptr);
  }
  return frames;
}

std::size_t AfXdpNetdev::take_datagrams(std::uint8_t* frame, std::uint32_t len,
                                        std::span<Packet* const> pkts, std::size_t n) {
  if (cut_len_ == 0) cut_size_ = cut_whole_ ? uncut_segment_size(frame, len, link_.mtu) : 0;
  bool more = true;
  while (more && n < pkts.size()) {
    if (take_frame(frame, len, len, cut_size_, *pkts[n], more)) ++n;
  }
  if (!more) {
    cut_len_ = 0;
  } else if (cut_len_ == 0) {  // the rest of its segments wait for the next call
    if (frame != rx_frame_.data()) std::memcpy(rx_frame_.data(), frame, len);
    cut_len_ = len;
  }
  return n;
}

std::size_t AfXdpNetdev::recv_batch(std::span<Packet* const> pkts) {
  std::size_t n = 0;
  if (cut_len_ > 0) {
    n = take_datagrams(rx_frame_.data(), cut_len_, pkts, 0);
    if (cut_len_ > 0) return n;
  }
  drain_rx(pkts.size() - n, [&](std::uint8_t* frame, std::uint32_t len) {
    n = take_datagrams(frame, len, pkts, n);
    return n < pkts.size();
  });
  return n;
}

std::size_t AfXdpNetdev::recv_frames(const FrameSink& sink, std::size_t max) {
  // Whole frames as the sender put them: a kernel TCP on this host (over veth) leaves its
  // checksum partial, to be completed here as its own receive path would.
  return drain_rx(max, [&](std::uint8_t* frame, std::uint32_t len) {
    if (!untag(frame, len)) return true;  // (the program passes only our VLAN's)
    const bool completed = complete_partial_tcp(frame, len);
    bump(counters_.rx_packets);
    bump(counters_.rx_bytes, len);
    sink(frame, len, completed);
    return true;
  });
}

std::uint64_t AfXdpNetdev::ring_drops() const {
  xdp_statistics st{};
  socklen_t sl = sizeof st;
  if (getsockopt(fd_, SOL_XDP, XDP_STATISTICS, &st, &sl) != 0) return 0;
  return st.rx_dropped + st.rx_ring_full;  // cumulative over the socket's life
}

Counters AfXdpNetdev::counters() const {
  Counters c = RawFramePortNetdev::counters();
  c.rx_dropped += ring_drops();
  return c;
}

std::vector<std::pair<std::string, std::uint64_t>> AfXdpNetdev::frame_counters() {
  return {{"tcp_ring_dropped", ring_drops()}};
}

}  // namespace softrdma::netdev
