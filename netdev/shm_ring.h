// A single-producer, single-consumer ring of RoCEv2 datagrams in shared memory: a memfd that one
// process (the sender) creates and another (the receiver) maps. It carries the host-local path of
// the udp backend (netdev/shm_link.h). The consumer trusts nothing in the ring: a record that does
// not fit its rules marks the ring broken, and no read ever leaves the mapping.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "netdev/netdev.h"

namespace softrdma::netdev {

class ShmRing {
 public:
  static constexpr std::size_t kDefaultBytes = std::size_t{4} << 20;
  static constexpr std::size_t kMinBytes = std::size_t{64} << 10;
  static constexpr std::size_t kMaxBytes = std::size_t{256} << 20;

  // Producer side: a new ring of `bytes` (a power of two within the limits) in a new memfd.
  // nullptr with `error` set when the memory cannot be had.
  static std::unique_ptr<ShmRing> create(std::size_t bytes, std::string& error);
  // Consumer side: maps the ring in `fd` (taking the fd). nullptr with `error` set when the file
  // is not a ring of a size within the limits.
  static std::unique_ptr<ShmRing> attach(int fd, std::string& error);
  ~ShmRing();
  ShmRing(const ShmRing&) = delete;
  ShmRing& operator=(const ShmRing&) = delete;

  int fd() const { return fd_; }
  std::size_t bytes() const { return bytes_; }

  // --- producer
  // Copies the datagram in (not yet visible), noting whether its ICRC was computed. False when
  // there is no room for it now.
  bool push(const Packet& p, bool icrc_filled);
  // Makes the pushed datagrams visible. True when the consumer sleeps and asked for a wake-up
  // (the caller then rings its bell); the request is taken, so one producer rings once.
  bool publish();
  bool attached() const;  // the consumer has mapped the ring
  // A write section into the consumer's memory (direct placement, PeerWindow): counted in the
  // ring so that the consumer can wait for it (writers()).
  void begin_write();
  void end_write();
  bool closed() const;  // the consumer has gone (or found the ring broken)

  // --- consumer
  // The next datagram as a view into the ring (valid until consume()), or false when the ring
  // is empty or broken. src, dst, ports, traffic class and hop limit come from the record.
  bool peek(Packet& view, bool& icrc_filled);
  void consume();  // drops the datagram peek() returned
  void release();  // hands the space of consumed datagrams back to the producer
  bool broken() const { return broken_; }
  void set_attached();
  void close();  // tells the producer not to push any more
  // Before sleeping: asks the producer for a wake-up; false when datagrams are already waiting
  // (do not sleep). The request stands until the producer takes it; wake_taken() says, once,
  // that it did (so its bell rings, or will).
  bool arm();
  bool wake_taken();
  bool empty() const;
  std::uint32_t writers() const;  // the producer's open write sections

 private:
  struct Header;
  ShmRing() = default;
  Header* hdr() const;
  std::uint8_t* data() const;

  int fd_ = -1;
  void* map_ = nullptr;
  std::size_t map_len_ = 0;
  std::size_t bytes_ = 0;
  // Producer: next write position, and the consumer's position last seen.
  std::uint64_t tail_ = 0;
  std::uint64_t head_seen_ = 0;
  // Consumer: next read position, and the size of the record peek() returned.
  std::uint64_t head_ = 0;
  std::uint64_t tail_seen_ = 0;
  std::uint32_t peeked_ = 0;
  bool broken_ = false;
  bool armed_ = false;
};

}  // namespace softrdma::netdev
