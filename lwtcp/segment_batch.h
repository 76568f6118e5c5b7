// Consecutive data segments of one TCP/IPv4 connection, as lwIP sends them, joined into one
// super-segment for a port's segmentation offload (a veth hands it to the peer whole, a NIC or
// the kernel cuts it). Cut again at the first segment's payload size, the segments are the ones
// lwIP built: payloads, sequence numbers, IPv4 IDs counting up by one, PSH on the last only.
// Only such runs join: same Ethernet and IPv4 header fields but ID and length, same ports,
// acknowledgement, window and options, ACK (PSH on the last) and nothing else, no IPv4 options.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>

namespace softrdma::lwtcp {

class SegmentBatch {
 public:
  // The largest super-frame: a receiver that takes it whole (lwtcp's own) takes at most
  // 0xFFFF bytes a frame.
  static constexpr std::size_t kMaxFrame = 0xFFFF;
  static constexpr std::size_t kMaxSegment = 9216 + 128;  // a jumbo frame's segment, headers
  using FrameOut = std::function<void(const std::uint8_t* frame, std::size_t len)>;

  // Appends `frame` when it continues the batch, or starts the batch when it is empty and the
  // frame may be joined at all; false otherwise (then flush, and send it or start again).
  bool append(const std::uint8_t* frame, std::size_t len);
  bool empty() const { return count_ == 0; }
  std::size_t segments() const { return count_; }
  std::uint16_t mss() const { return mss_; }

  // The batch as one frame: the single segment as it came, or the super-segment (IPv4 length
  // and checksum of the whole, the last segment's flags, and in the TCP checksum field the
  // pseudo-header sum over the whole length, as segmentation offload expects). Valid until the
  // next append or clear.
  const std::uint8_t* frame();
  std::size_t frame_len() const { return len_; }
  // The batch cut into its segments again, each with complete checksums, as `out` frames (what
  // segmentation offload puts on the wire; also the fallback where the offload fails).
  void segment(const FrameOut& out);
  void clear();

 private:
  std::array<std::uint8_t, kMaxFrame> buf_{};
  std::size_t len_ = 0;          // bytes in buf_: the first frame's headers, then the payloads
  std::size_t hdr_len_ = 0;      // Ethernet + IPv4 + TCP header bytes
  std::size_t count_ = 0;        // segments joined
  std::uint16_t mss_ = 0;        // the first segment's payload: every one but the last has it
  std::uint16_t last_id_ = 0;    // the last segment's IPv4 ID
  std::uint32_t next_seq_ = 0;   // the sequence number the next segment must carry
  std::uint8_t last_flags_ = 0;  // the last segment's TCP flags
  bool closed_ = false;          // the last segment was short or carried PSH: nothing follows
  std::array<std::uint8_t, kMaxSegment> scratch_{};  // one segment cut again
};

}  // namespace softrdma::lwtcp
