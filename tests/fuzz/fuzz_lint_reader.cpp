// Fuzz target: lint over an arbitrary capture file (libpcap reader, frame
// decoding, RoCEv2 and iWARP checks).
#include <cstddef>
#include <cstdint>
#include <string>

#include "lint/lint.h"
#include "pcap/reader.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace softrdma;
  std::string error;
  auto reader = softrdma::pcap::Reader::open_memory(wire::Bytes(data, size), error);
  if (!reader) return 0;
  lint::Report report;
  (void)lint::run(*reader, lint::Options{}, report, error);
  return 0;
}
