#include "pcap/pcapng_reader.h"

#include <cerrno>
#include <cstring>

namespace softrdma::pcap {

namespace {

constexpr std::uint32_t kShbType = 0x0A0D0D0A;
constexpr std::uint32_t kIdbType = 1, kSpbType = 3, kEpbType = 6;
constexpr std::uint32_t kMagic = 0x1A2B3C4D, kMagicSwapped = 0x4D3C2B1A;
constexpr std::uint32_t kMaxBlock = 16 * 1024 * 1024;

std::uint32_t bswap32(std::uint32_t v) {
  return __builtin_bswap32(v);
}

}  // namespace

std::uint16_t PcapngReader::u16(const std::uint8_t* p) const {
  std::uint16_t v;
  std::memcpy(&v, p, 2);
  return swap_ ? __builtin_bswap16(v) : v;
}

std::uint32_t PcapngReader::u32(const std::uint8_t* p) const {
  std::uint32_t v;
  std::memcpy(&v, p, 4);
  return swap_ ? bswap32(v) : v;
}

bool PcapngReader::looks_like_pcapng(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return false;
  std::uint8_t b[4] = {};
  const bool ok =
      std::fread(b, 1, 4, f) == 4 && b[0] == 0x0A && b[1] == 0x0D && b[2] == 0x0D && b[3] == 0x0A;
  std::fclose(f);
  return ok;
}

std::unique_ptr<PcapngReader> PcapngReader::open(const std::string& path, std::string& error) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) {
    error = path + ": " + std::strerror(errno);
    return nullptr;
  }
  if (!looks_like_pcapng(path)) {
    std::fclose(f);
    error = path + ": not a pcapng file";
    return nullptr;
  }
  return std::unique_ptr<PcapngReader>(new PcapngReader(f));
}

PcapngReader::~PcapngReader() {
  std::fclose(f_);
}

// Reads one block; `body` is what lies between the length and the trailing length.
bool PcapngReader::read_block(std::uint32_t& type, std::vector<std::uint8_t>& body) {
  std::uint8_t head[8];
  const std::size_t got = std::fread(head, 1, 8, f_);
  if (got == 0) return false;
  if (got != 8) {
    error_ = "truncated block header";
    return false;
  }
  std::uint32_t raw_type;
  std::memcpy(&raw_type, head, 4);
  if (raw_type == kShbType) {
    // The byte order of a section is given by its magic, which follows the length.
    std::uint8_t magic[4];
    if (std::fread(magic, 1, 4, f_) != 4) {
      error_ = "truncated section header";
      return false;
    }
    std::uint32_t m;
    std::memcpy(&m, magic, 4);
    if (m != kMagic && m != kMagicSwapped) {
      error_ = "bad byte-order magic";
      return false;
    }
    swap_ = m == kMagicSwapped;
    std::fseek(f_, -4, SEEK_CUR);
  }
  type = u32(head);
  const std::uint32_t len = u32(head + 4);
  if (len < 12 || len % 4 != 0 || len > kMaxBlock) {
    error_ = "bad block length " + std::to_string(len);
    return false;
  }
  body.resize(len - 12);
  std::uint8_t tail[4];
  if (std::fread(body.data(), 1, body.size(), f_) != body.size() ||
      std::fread(tail, 1, 4, f_) != 4) {
    error_ = "truncated block";
    return false;
  }
  if (u32(tail) != len) {
    error_ = "block lengths disagree";
    return false;
  }
  return true;
}

int PcapngReader::next(PcapngRecord& r) {
  std::uint32_t type = 0;
  bool damaged = false;
  while (!damaged && read_block(type, body_)) {
    const std::uint8_t* b = body_.data();
    const std::size_t n = body_.size();
    if (type == kShbType) {
      section_base_ = ifaces_.size();
    } else if (type == kIdbType) {
      if (n < 8) {
        damaged = true;
        break;
      }
      PcapngInterface i;
      i.linktype = u16(b);
      i.snaplen = u32(b + 4);
      std::uint64_t units = 1'000'000;  // default: microseconds
      for (std::size_t off = 8; off + 4 <= n;) {
        const std::uint16_t code = u16(b + off), olen = u16(b + off + 2);
        if (code == 0 || off + 4 + olen > n) break;
        const std::uint8_t* v = b + off + 4;
        if (code == 2) i.name.assign(reinterpret_cast<const char*>(v), olen);
        if (code == 9 && olen >= 1) {
          const unsigned e = v[0] & 0x7F;
          units = 1;
          for (unsigned k = 0; k < e && units < (1ull << 62); ++k) units *= (v[0] & 0x80) ? 2 : 10;
        }
        off += 4 + ((olen + 3u) & ~3u);
      }
      ifaces_.push_back(std::move(i));
      units_per_sec_.push_back(units);
    } else if (type == kEpbType) {
      if (n < 20) {
        damaged = true;
        break;
      }
      const std::size_t iface = section_base_ + u32(b);
      const std::uint64_t ts = (std::uint64_t{u32(b + 4)} << 32) | u32(b + 8);
      const std::uint32_t cap = u32(b + 12);
      if (iface >= ifaces_.size() || 20 + std::size_t{cap} > n) {
        error_ = "bad enhanced packet block";
        return -1;
      }
      r = PcapngRecord{};
      r.iface = static_cast<std::uint32_t>(iface);
      const std::uint64_t units = units_per_sec_[iface];
      r.ts_ns = static_cast<std::int64_t>(ts / units * 1'000'000'000 +
                                          (ts % units) * 1'000'000'000 / units);
      r.orig_len = u32(b + 16);
      r.data.assign(b + 20, b + 20 + cap);
      for (std::size_t off = 20 + ((cap + 3u) & ~3u); off + 4 <= n;) {
        const std::uint16_t code = u16(b + off), olen = u16(b + off + 2);
        if (code == 0 || off + 4 + olen > n) break;
        const std::uint8_t* v = b + off + 4;
        if (code == 1 && r.comment.empty())
          r.comment.assign(reinterpret_cast<const char*>(v), olen);
        if (code == 2 && olen == 4) r.flags = u32(v);
        off += 4 + ((olen + 3u) & ~3u);
      }
      return 1;
    } else if (type == kSpbType) {
      if (n < 4 || section_base_ >= ifaces_.size()) {
        damaged = true;
        break;
      }
      r = PcapngRecord{};
      r.iface = static_cast<std::uint32_t>(section_base_);
      r.orig_len = u32(b);
      const std::size_t cap = std::min<std::size_t>(r.orig_len, n - 4);
      r.data.assign(b + 4, b + 4 + cap);
      return 1;
    }
  }
  if (damaged) error_ = "damaged block of type " + std::to_string(type);
  return error_.empty() ? 0 : -1;
}

}  // namespace softrdma::pcap
