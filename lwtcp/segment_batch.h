// Consecutive data segments of one TCP connection over IPv4 or IPv6, as lwIP sends them, joined
// into one super-segment for a port's segmentation offload (a veth hands it to the peer whole, a
// NIC or the kernel cuts it). Cut again at the cut size, the segments are what goes on the wire:
// payloads, sequence numbers, IPv4 IDs counting up by one, PSH and FIN on the last only. The cut
// is the first segment's payload (the segments lwIP built), or, for a connection whose lwIP
// builds segments larger than the wire takes (large segments, lwip_stack.cpp), its wire MSS.
// Only such runs join: same Ethernet and IP header fields but IPv4 ID and length (IPv6 payload
// length), same ports, acknowledgement, window and options, ACK (PSH, FIN on the last) and
// nothing else; no IPv4 options, no IPv6 extension headers.
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
  static constexpr std::size_t kHeaders = 14 + 40 + 60;   // Ethernet, IPv6, TCP at most
  using FrameOut = std::function<void(const std::uint8_t* frame, std::size_t len)>;

  // Appends `frame` when it continues the batch, or starts the batch when it is empty and the
  // frame may be joined at all; false otherwise (then flush, and send it or start again).
  // `cut`: the wire MSS of a large segment's connection (0: the segments are the wire's); a
  // batch joins frames of one cut only.
  bool append(const std::uint8_t* frame, std::size_t len, std::uint16_t cut = 0);
  bool empty() const { return count_ == 0; }
  std::size_t segments() const { return count_; }
  std::uint16_t mss() const { return mss_; }
  // The payload of each wire segment but the last (the offload's segment size), and how many
  // wire segments the batch is.
  std::uint16_t cut() const { return cut_; }
  std::size_t pieces() const;

  // The batch as one frame: a single wire segment as it came, or the super-segment (IP length
  // of the whole (IPv4: and header checksum), the last segment's flags, and in the TCP checksum
  // field the pseudo-header sum over the whole length, as segmentation offload expects). Valid
  // until the next append or clear (and the caller's to complete, as a receiver joining the
  // segments it received does).
  std::uint8_t* frame();
  std::size_t frame_len() const { return len_; }
  // The batch cut into its segments again, each with complete checksums, as `out` frames (what
  // segmentation offload puts on the wire; also the fallback where the offload fails).
  void segment(const FrameOut& out);
  void clear();

  // `frame` (one TCP segment, untagged, over IPv4 without options or IPv6 without extension
  // headers) as the wire segments of `cut` bytes of payload it stands for, each with complete
  // checksums, into `out`; false (nothing out) if it is no such frame.
  static bool cut_frame(const std::uint8_t* frame, std::size_t len, std::uint16_t cut,
                        const FrameOut& out);
  // Where the TCP header of such a frame starts (14 + 20 or 14 + 40), 0 for any other frame.
  static std::size_t tcp_at(const std::uint8_t* frame, std::size_t len);

 private:
  std::array<std::uint8_t, kMaxFrame> buf_{};
  std::size_t len_ = 0;          // bytes in buf_: the first frame's headers, then the payloads
  std::size_t tcp_ = 0;          // where TCP starts (the IP version's header length + 14)
  std::size_t hdr_len_ = 0;      // Ethernet + IP + TCP header bytes
  std::size_t count_ = 0;        // segments joined
  std::uint16_t mss_ = 0;        // the first segment's payload: every one but the last has it
  std::uint16_t cut_ = 0;        // the wire segments' payload (mss_ unless a large segment's)
  std::uint16_t given_cut_ = 0;  // the cut the first frame came with (0: its payload)
  std::uint16_t first_id_ = 0;   // the first segment's IPv4 ID (IPv6: none)
  std::uint16_t next_id_ = 0;    // the IPv4 ID the next frame must carry (IPv6: none)
  std::uint32_t next_seq_ = 0;   // the sequence number the next segment must carry
  std::uint8_t last_flags_ = 0;  // the last segment's TCP flags
  bool closed_ = false;          // the last segment was short or carried PSH: nothing follows
  std::array<std::uint8_t, kMaxSegment> scratch_{};  // one segment cut again
};

}  // namespace softrdma::lwtcp
