// Flow-level RoCEv2 checks for lint: PSN continuity, message sequencing, segment sizes, WRITE
// lengths, ACK/NAK, read responses and atomic ACKs per RC/UC flow, and UD Q_Keys.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <tuple>

#include "lint/report.h"
#include "wire/frame.h"
#include "wire/roce_headers.h"

namespace softrdma::lint {

// Follows every RoCEv2 flow of a capture. A flow is keyed by (source IP, destination IP,
// destination QPN) of its requests; responses are matched to it through the IP pair and
// the requester's QPN they carry. Only certain violations are reported: a capture may
// start or end in the middle of a flow.
class RoceFlowChecker {
 public:
  explicit RoceFlowChecker(Report& report);
  ~RoceFlowChecker();
  RoceFlowChecker(const RoceFlowChecker&) = delete;
  RoceFlowChecker& operator=(const RoceFlowChecker&) = delete;

  // One packet that parsed (wire::parse_roce) from a whole captured frame; frame_no is 1-based.
  void on_packet(std::uint64_t frame_no, const wire::FrameView& frame, const wire::RocePacket& pkt);
  // End of capture: reports what can only be judged at the end (PSNs that never came).
  void finish();

  // Requester-side state of one RC or UC flow and the responses matched to it.
  struct Flow;
  using Ip = std::array<std::uint8_t, 16>;  // IPv6, or IPv4-mapped

 private:
  // (source IP, destination IP, QPN): the request flow, or the key responses carry.
  using Key = std::tuple<Ip, Ip, std::uint32_t>;

  void on_request(std::uint64_t frame_no, const std::string& where, Flow& f,
                  const wire::RocePacket& pkt);
  void on_response(std::uint64_t frame_no, const std::string& where, Flow& f,
                   const wire::RocePacket& pkt);
  void on_ud(std::uint64_t frame_no, const std::string& where, const Key& dest,
             const wire::RocePacket& pkt);
  Flow* match_response(const Key& resp_key, std::uint32_t psn);

  Report& report_;
  std::map<Key, std::unique_ptr<Flow>> flows_;
  std::map<Key, Flow*> responses_;  // response key -> request flow, once bound
  struct QkeyState {
    std::uint32_t current = 0;
    std::uint64_t frame = 0;
    std::map<std::uint32_t, std::uint64_t> retired;  // earlier Q_Keys -> last frame used
  };
  std::map<std::pair<Ip, std::uint32_t>, QkeyState> qkeys_;  // (destination IP, QPN)
  // ECN seen on requests, by (source IP, destination IP, source QPN: UD's DETH, else kAnyQp):
  // a CNP must answer a flow that was ECN-capable (roce.cnp_target).
  struct EcnSeen {
    bool capable = false, ce = false;
  };
  static constexpr std::uint32_t kAnyQp = 0xFFFFFFFF;
  std::map<Key, EcnSeen> ecn_;
  bool ecn_in_use_ = false;  // some request so far was ECN-capable
  void on_cnp(std::uint64_t frame_no, const std::string& where, const Key& key);
};

}  // namespace softrdma::lint
