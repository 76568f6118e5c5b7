#include "netdev/trace.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstring>
#include <map>
#include <mutex>

#include "netdev/ip_header.h"
#include "netdev/spec_text.h"
#include "pcap/pcapng_writer.h"
#include "wire/roce_headers.h"
#include "wire/roce_opcode.h"

namespace softrdma::netdev {

namespace {

using spec::split;
using spec::trim;

bool parse_u64(std::string_view s, std::uint64_t& out) {
  int base = 10;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    s.remove_prefix(2);
    base = 16;
  }
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out, base);
  return ec == std::errc() && p == s.data() + s.size();
}

bool parse_size(std::string_view s, std::uint64_t& out) {
  std::uint64_t mult = 1;
  if (!s.empty()) {
    switch (s.back()) {
      case 'k':
      case 'K':
        mult = 1ull << 10;
        break;
      case 'm':
      case 'M':
        mult = 1ull << 20;
        break;
      case 'g':
      case 'G':
        mult = 1ull << 30;
        break;
      default:
        break;
    }
    if (mult != 1) s.remove_suffix(1);
  }
  if (!parse_u64(s, out) || out > (~0ull) / mult) return false;
  out *= mult;
  return true;
}

constexpr std::array<std::pair<std::string_view, std::uint32_t>, 7> kClassNames = {{
    {"send", kTraceSend},
    {"write", kTraceWrite},
    {"read", kTraceRead},
    {"atomic", kTraceAtomic},
    {"ack", kTraceAck},
    {"cnp", kTraceCnp},
    {"ud", kTraceUd},
}};

// Fault bits of one traced send, indexed by FaultEvent (injected kinds only).
constexpr std::uint8_t fault_bit(FaultEvent e) {
  return static_cast<std::uint8_t>(1u << static_cast<unsigned>(e));
}

// The fault= value of a record: one name, the most consequential when several were injected.
const char* fault_name(std::uint8_t bits) {
  if (bits & fault_bit(FaultEvent::kDrop)) return "drop";
  if (bits & fault_bit(FaultEvent::kCorrupt)) return "corrupt";
  if (bits & fault_bit(FaultEvent::kDuplicate)) return "duplicate";
  if (bits & fault_bit(FaultEvent::kDelay)) return "delay";
  if (bits & fault_bit(FaultEvent::kReorder)) return "reorder";
  return nullptr;
}

// The drop= value of a record, by the receive drop it reports.
constexpr std::array<std::pair<FaultEvent, const char*>, 4> kDropNames = {{
    {FaultEvent::kRxIcrc, "icrc"},
    {FaultEvent::kRxMalformed, "malformed"},
    {FaultEvent::kRxNotOurs, "not_ours"},
    {FaultEvent::kRxQueueFull, "queue_full"},
}};

const char* drop_name(FaultEvent e) {
  for (const auto& [event, name] : kDropNames) {
    if (event == e) return name;
  }
  return nullptr;
}

// The send_batch in progress on this thread, so that fault reports (made synchronously inside
// the inner send_batch) can be matched to the caller's packets.
struct SendContext {
  const TracingNetdev* owner = nullptr;
  std::span<Packet* const> pkts;
  std::uint8_t* faults = nullptr;
  std::size_t cursor = 0;
};
thread_local SendContext* t_send = nullptr;
thread_local std::vector<std::uint8_t> t_fault_bits;  // grows to the largest batch, then reused

// Writers shared by the devices of this process that trace to the same path.
std::mutex g_writers_mu;
std::map<std::string, std::weak_ptr<pcap::PcapngWriter>>& writers() {
  static auto* m = new std::map<std::string, std::weak_ptr<pcap::PcapngWriter>>();
  return *m;
}

constexpr std::size_t kMaxFrame =
    wire::kEthernetLen + wire::kIpv6Len + wire::kUdpLen + kMaxDatagram;

}  // namespace

std::uint32_t trace_class_of(std::uint8_t opcode) {
  const wire::RoceOpcodeInfo& info = wire::roce_opcode_info(opcode);
  if (!info.defined()) return 0;
  if (info.transport == wire::Transport::kUd) return kTraceUd;
  switch (info.kind) {
    case wire::OpKind::kSend:
      return kTraceSend;
    case wire::OpKind::kWrite:
      return kTraceWrite;
    case wire::OpKind::kReadRequest:
    case wire::OpKind::kReadResponse:
      return kTraceRead;
    case wire::OpKind::kAtomic:
    case wire::OpKind::kAtomicAck:
    case wire::OpKind::kAtomicWrite:
      return kTraceAtomic;
    case wire::OpKind::kFlush:  // (both answered by a read response, class "read")
      return kTraceWrite;
    case wire::OpKind::kAck:
      return kTraceAck;
    case wire::OpKind::kCnp:
      return kTraceCnp;
    default:
      return 0;
  }
}

bool TraceConfig::wants(const std::uint8_t* data, std::uint32_t len) const {
  if (qpns.empty() && classes == 0) return true;
  if (!data || len < wire::kBthLen) return false;
  if (classes && !(trace_class_of(data[0]) & classes)) return false;
  if (!qpns.empty()) {
    const std::uint32_t qpn = wire::load24(data + 5);
    if (std::find(qpns.begin(), qpns.end(), qpn) == qpns.end()) return false;
  }
  return true;
}

bool parse_trace_spec(const std::string& spec, TraceConfig& out, std::string& error) {
  out.qpns.clear();
  out.classes = 0;
  out.snaplen = 0;
  out.rotate_bytes = 0;
  if (trim(spec).empty()) return true;
  std::vector<std::string_view> seen;
  for (std::string_view item : split(spec, ';')) {
    if (item.empty()) continue;  // tolerate "a=1;" and ";;"
    const std::size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      error =
          "trace filter \"" + spec + "\": expected key=value, found \"" + std::string(item) + "\"";
      return false;
    }
    const std::string_view key = trim(item.substr(0, eq));
    const std::string_view value = trim(item.substr(eq + 1));
    if (std::find(seen.begin(), seen.end(), key) != seen.end()) {
      error = "trace filter: \"" + std::string(key) + "\" given twice";
      return false;
    }
    seen.push_back(key);
    if (key == "qp") {
      for (std::string_view q : split(value, ',')) {
        std::uint64_t v = 0;
        if (!parse_u64(q, v) || v > wire::kQpnMask) {
          error = "trace filter: qp=" + std::string(value) +
                  ": expected QP numbers (decimal or 0x hex, at most 0xffffff) separated by commas";
          return false;
        }
        out.qpns.push_back(static_cast<std::uint32_t>(v));
      }
    } else if (key == "class") {
      for (std::string_view c : split(value, ',')) {
        auto it = std::find_if(kClassNames.begin(), kClassNames.end(),
                               [&](const auto& kv) { return kv.first == c; });
        if (it == kClassNames.end()) {
          error = "trace filter: unknown class \"" + std::string(c) +
                  "\" (known: send, write, read, atomic, ack, cnp, ud)";
          return false;
        }
        out.classes |= it->second;
      }
    } else if (key == "snaplen") {
      std::uint64_t v = 0;
      if (!parse_size(value, v) || v == 0 || v > pcap::kUnlimitedSnaplen) {
        error = "trace filter: snaplen=" + std::string(value) + ": expected 1 to 262144 bytes";
        return false;
      }
      out.snaplen = static_cast<std::uint32_t>(v);
    } else if (key == "rotate") {
      std::uint64_t v = 0;
      if (!parse_size(value, v) || v < 4096) {
        error = "trace filter: rotate=" + std::string(value) +
                ": expected a size of at least 4096 bytes (suffixes K, M, G)";
        return false;
      }
      out.rotate_bytes = v;
    } else {
      error = "trace filter: unknown key \"" + std::string(key) +
              "\" (known: qp, class, snaplen, rotate)";
      return false;
    }
  }
  return true;
}

wire::MacAddr trace_mac(const IpAddr& a) {
  return wire::MacAddr{0x02, 0x00, a.bytes[12], a.bytes[13], a.bytes[14], a.bytes[15]};
}

std::size_t synthesize_frame(const Packet& p, std::uint8_t* out, std::size_t cap) {
  const bool v4 = p.src.is_v4();
  const std::size_t ip_len = v4 ? wire::kIpv4MinLen : wire::kIpv6Len;
  const std::size_t total = wire::kEthernetLen + ip_len + wire::kUdpLen + p.len;
  if (total > cap || p.len > 0xFFFF - wire::kIpv6Len - wire::kUdpLen || (p.len && !p.data)) {
    return 0;
  }
  wire::Ethernet eth;
  eth.dst = trace_mac(p.dst);
  eth.src = trace_mac(p.src);
  eth.ethertype = v4 ? wire::kEthertypeIpv4 : wire::kEthertypeIpv6;
  std::size_t off = 0;
  auto n = wire::build_ethernet(wire::MutBytes(out, cap), eth);
  if (!n) return 0;
  off += *n;
  const auto udp_len = static_cast<std::uint16_t>(wire::kUdpLen + p.len);
  // (IPv4: ID 0 with DF is what Linux sends on an unconnected DF socket.)
  n = build_ip_header(wire::MutBytes(out + off, cap - off), p, p.src, p.hop_limit);
  if (!n) return 0;
  off += *n;
  wire::Udp udp;
  udp.src_port = p.src_port;
  udp.dst_port = p.dst_port;
  udp.length = udp_len;
  udp.checksum = 0;
  n = wire::build_udp(wire::MutBytes(out + off, cap - off), udp);
  if (!n) return 0;
  off += *n;
  if (p.len) std::memcpy(out + off, p.data, p.len);
  return off + p.len;
}

TracingNetdev::TracingNetdev(std::unique_ptr<Netdev> inner, TraceConfig cfg)
    : ForwardingNetdev(std::move(inner)), cfg_(std::move(cfg)) {
  if (cfg_.device.empty()) cfg_.device = this->inner().name();
  {
    std::lock_guard lock(g_writers_mu);
    std::weak_ptr<pcap::PcapngWriter>& slot = writers()[cfg_.path];
    writer_ = slot.lock();
    if (!writer_) {
      pcap::PcapngOptions opts;
      opts.rotate_bytes = cfg_.rotate_bytes;
      std::unique_ptr<pcap::PcapngWriter> w = pcap::PcapngWriter::open(cfg_.path, error_, opts);
      if (w) {
        writer_ = std::shared_ptr<pcap::PcapngWriter>(std::move(w));
        slot = writer_;
      }
    }
  }
  if (!writer_) return;
  iface_ = writer_->add_interface(cfg_.device, 1 /* LINKTYPE_ETHERNET */, cfg_.snaplen);
  this->inner().require_icrc();  // a trace shows each datagram as it is on a wire
  this->inner().set_fault_observer([this](FaultEvent e, const Packet& p) { on_event(e, p); });
}

TracingNetdev::~TracingNetdev() {
  inner().set_fault_observer({});
  close_inner();  // before the writer: the backend may still report while closing
  if (writer_) writer_->flush();
}

void TracingNetdev::flush() {
  if (writer_) writer_->flush();
}

void TracingNetdev::set_fault_observer(FaultObserver observer) {
  chained_ = std::move(observer);
}

void TracingNetdev::record(const Packet& p, bool tx, std::uint8_t fault_bits, const char* drop,
                           std::uint64_t ts_ns) {
  if (!cfg_.wants(p.data, p.len)) return;
  alignas(8) std::array<std::uint8_t, kMaxFrame> frame;
  // Sends too: send_batch set their ID and DF to what went on the wire.
  const std::size_t len = synthesize_frame(p, frame.data(), frame.size());
  if (len == 0) return;
  pcap::Annotation a;
  a.tx = tx;
  a.dev = cfg_.device;
  if (p.data && p.len >= wire::kBthLen) a.qp = wire::load24(p.data + 5);
  if (const char* f = fault_name(fault_bits)) a.fault = f;
  if (drop) a.drop = drop;
  a.retrans = p.retrans;
  char text[256];
  const std::size_t tlen = pcap::format_annotation(a, text, sizeof text);
  const std::size_t caplen = cfg_.snaplen ? std::min<std::size_t>(len, cfg_.snaplen) : len;
  writer_->write(iface_, ts_ns ? ts_ns : pcap::PcapngWriter::now_ns(),
                 wire::Bytes(frame.data(), caplen), static_cast<std::uint32_t>(len),
                 tx ? pcap::kEpbOutbound : pcap::kEpbInbound, std::string_view(text, tlen));
}

void TracingNetdev::on_event(FaultEvent e, const Packet& p) {
  if (is_injected(e)) {
    SendContext* ctx = t_send;
    if (ctx && ctx->owner == this) {
      // Reports come in packet order: search on from the last match.
      const std::size_t n = ctx->pkts.size();
      for (std::size_t k = 0; k < n; ++k) {
        const std::size_t i = (ctx->cursor + k) % n;
        if (ctx->pkts[i] == &p || (ctx->pkts[i]->data == p.data && p.data)) {
          ctx->faults[i] |= fault_bit(e);
          ctx->cursor = i;
          break;
        }
      }
    } else {
      record(p, true, fault_bit(e), nullptr);  // not from one of our sends: record it alone
    }
  } else {
    record(p, false, 0, drop_name(e));
  }
  if (chained_) chained_(e, p);
}

std::size_t TracingNetdev::send_batch(std::span<Packet* const> pkts) {
  if (!writer_) return inner().send_batch(pkts);
  std::vector<std::uint8_t>& bits = t_fault_bits;
  if (bits.size() < pkts.size()) bits.resize(pkts.size());
  std::fill_n(bits.begin(), pkts.size(), std::uint8_t{0});
  SendContext ctx{this, pkts, bits.data(), 0};
  SendContext* const outer = t_send;
  t_send = &ctx;
  // Stamped before they leave: the peer may record their arrival before the
  // inner send returns, and a merged trace must show the send first.
  const std::uint64_t sent_at = pcap::PcapngWriter::now_ns();
  const std::size_t n = inner().send_batch(pkts);
  t_send = outer;
  for (std::size_t i = 0; i < n; ++i) record(*pkts[i], true, bits[i], nullptr, sent_at);
  return n;
}

std::size_t TracingNetdev::recv_batch(std::span<Packet* const> pkts) {
  const std::size_t n = inner().recv_batch(pkts);
  if (writer_) {
    for (std::size_t i = 0; i < n; ++i) record(*pkts[i], false, 0, nullptr);
  }
  return n;
}

}  // namespace softrdma::netdev
