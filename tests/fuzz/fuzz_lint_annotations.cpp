// Fuzz target: a pcapng capture as `softrdma lint` reads it with softrdma's annotations (the
// EPB comments "softrdma: dir=… drop=…" that mark frames the receiver discarded, read by our own
// pcapng reader in step with libpcap's): blocks, options, comments of any length and byte order.
// Lint must give an answer (0, 1 or 2) and never read outside what it was given.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "lint/lint.h"
#include "pcap/pcapng_reader.h"
#include "pcap/reader.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace softrdma;
  struct TempFile {  // removed at exit
    std::string path = "/tmp/fuzz_lint_annotations." + std::to_string(getpid());
    ~TempFile() { unlink(path.c_str()); }
  };
  static const TempFile file;
  const std::string& path = file.path;
  if (std::FILE* f = std::fopen(path.c_str(), "wb")) {
    std::fwrite(data, 1, size, f);
    std::fclose(f);
  }
  std::string error;
  auto notes = softrdma::pcap::PcapngReader::open(path, error);
  if (notes) {  // the annotations alone, to the end or the damage
    softrdma::pcap::PcapngRecord rec;
    for (int i = 0; i < 100000 && notes->next(rec) == 1; ++i) {
    }
    notes = softrdma::pcap::PcapngReader::open(path, error);
  }
  auto reader = softrdma::pcap::Reader::open_memory(wire::Bytes(data, size), error);
  if (!reader) return 0;
  lint::Report report;
  const int rc = lint::run(*reader, lint::Options{}, report, error, notes.get());
  if (rc < 0 || rc > 2) {
    std::fprintf(stderr, "fuzz_lint_annotations: lint returned %d\n", rc);
    std::abort();
  }
  return 0;
}
