// Packet tracing: a Netdev decorator that records every packet its backend sends and receives
// (and every injected fault and receive drop) to a pcapng file as whole Ethernet frames.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "netdev/forwarding.h"
#include "netdev/netdev.h"
#include "wire/net.h"

namespace softrdma::pcap {
class PcapngWriter;
}

namespace softrdma::netdev {

// Opcode classes a trace filter selects (bits of TraceConfig::classes).
enum TraceClass : std::uint32_t {
  kTraceSend = 1u << 0,    // RC/UC SEND*
  kTraceWrite = 1u << 1,   // RC/UC RDMA WRITE*
  kTraceRead = 1u << 2,    // RDMA READ request and responses
  kTraceAtomic = 1u << 3,  // CmpSwap, FetchAdd and their Atomic ACK
  kTraceAck = 1u << 4,     // RC ACK/NAK
  kTraceCnp = 1u << 5,     // congestion notification
  kTraceUd = 1u << 6,      // UD SEND*
};
// The class of a BTH opcode; 0 when it is not a defined opcode.
std::uint32_t trace_class_of(std::uint8_t opcode);

struct TraceConfig {
  std::string path;                 // file name; "%p" becomes the pid (see docs/tracing.md)
  std::string device;               // if_name and dev= in the trace; empty: the backend's name()
  std::vector<std::uint32_t> qpns;  // keep packets to these destination QPNs; empty: all
  std::uint32_t classes = 0;        // TraceClass bits to keep; 0: all
  std::uint32_t snaplen = 0;        // bytes of each frame kept; 0: whole frames
  std::uint64_t rotate_bytes = 0;   // start a new file beyond this size; 0: never
  // True when a datagram (BTH first) passes the QPN and class filters. Datagrams too short for
  // a BTH pass only when no filter is set.
  bool wants(const std::uint8_t* data, std::uint32_t len) const;
};

// Parses a filter spec "qp=0x11,0x12;class=send,ack;snaplen=128;rotate=10M" into the filter
// fields of `out` (path and device are kept). "" means no filter. Sizes take K, M or G
// (powers of 1024). False and `error` on a bad key or value.
bool parse_trace_spec(const std::string& spec, TraceConfig& out, std::string& error);

// The MAC address a traced frame shows for an IP address: 02:00 followed by the IPv4 address
// (for IPv6, by the last four bytes of the address).
wire::MacAddr trace_mac(const IpAddr& a);

// Writes `p` as the whole frame a UDP-socket backend puts on the wire: Ethernet, IPv4 (ID and
// DF, TOS and TTL from the packet, valid checksum) or IPv6, UDP (checksum 0), the datagram.
// Returns the frame length, or 0 when `cap` is too small.
std::size_t synthesize_frame(const Packet& p, std::uint8_t* out, std::size_t cap);

// Decorates any backend. Sends are recorded right after the inner send_batch (ICRC filled,
// source set), one record per accepted packet, annotated with the fault injected on it, if any
// (a dropped packet is still recorded, with fault=drop). Receives are recorded as delivered
// (after fault injection and ICRC checks); datagrams the backend drops are recorded with
// drop=REASON. Devices tracing to the same path in one process share one file, one IDB each.
class TracingNetdev : public ForwardingNetdev {
 public:
  TracingNetdev(std::unique_ptr<Netdev> inner, TraceConfig cfg);
  ~TracingNetdev() override;
  TracingNetdev(const TracingNetdev&) = delete;
  TracingNetdev& operator=(const TracingNetdev&) = delete;

  // False when the trace file could not be created (error() says why); the device then works
  // without tracing.
  bool ok() const { return writer_ != nullptr; }
  const std::string& error() const { return error_; }
  pcap::PcapngWriter* writer() const { return writer_.get(); }
  // The file, for other recorders of the process (the iWARP device traces to it too).
  std::shared_ptr<pcap::PcapngWriter> shared_writer() const { return writer_; }
  const TraceConfig& config() const { return cfg_; }
  void flush();

  std::size_t send_batch(std::span<Packet* const> pkts) override;
  std::size_t recv_batch(std::span<Packet* const> pkts) override;
  // Observers set on the tracer are called after it has recorded the event.
  void set_fault_observer(FaultObserver observer) override;

 private:
  void on_event(FaultEvent e, const Packet& p);
  // ts_ns 0: now.
  void record(const Packet& p, bool tx, std::uint8_t fault_bits, const char* drop,
              std::uint64_t ts_ns = 0);

  TraceConfig cfg_;
  std::string error_;
  std::shared_ptr<pcap::PcapngWriter> writer_;
  std::uint32_t iface_ = 0;
  FaultObserver chained_;
};

}  // namespace softrdma::netdev
