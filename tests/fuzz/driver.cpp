// A stand-in for libFuzzer in gcc builds: runs the target on every seed file,
// then on seeded random mutations of them (deterministic), so the fuzz targets
// run as ordinary regression tests. usage: TARGET ITERATIONS SEED_FILE...
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <random>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s ITERATIONS [SEED_FILE...]\n", argv[0]);
    return 2;
  }
  const long iterations = std::atol(argv[1]);
  std::vector<std::vector<std::uint8_t>> seeds;
  for (int i = 2; i < argc; ++i) {
    std::ifstream f(argv[i], std::ios::binary);
    if (!f) {
      std::fprintf(stderr, "cannot read seed %s\n", argv[i]);
      return 2;
    }
    seeds.emplace_back(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  }
  if (seeds.empty()) seeds.emplace_back();
  for (const auto& s : seeds) LLVMFuzzerTestOneInput(s.data(), s.size());
  std::mt19937_64 rng(1234);
  for (long it = 0; it < iterations; ++it) {
    std::vector<std::uint8_t> buf = seeds[rng() % seeds.size()];
    const int edits = 1 + static_cast<int>(rng() % 8);
    for (int e = 0; e < edits; ++e) {
      switch (rng() % 4) {
        case 0:  // flip a byte
          if (!buf.empty()) buf[rng() % buf.size()] = static_cast<std::uint8_t>(rng());
          break;
        case 1:  // cut the tail
          if (!buf.empty()) buf.resize(rng() % buf.size());
          break;
        case 2:  // insert bytes
          buf.insert(buf.begin() + static_cast<long>(buf.empty() ? 0 : rng() % buf.size()),
                     rng() % 16, static_cast<std::uint8_t>(rng()));
          break;
        default:  // flip a bit
          if (!buf.empty()) buf[rng() % buf.size()] ^= static_cast<std::uint8_t>(1u << (rng() % 8));
      }
    }
    LLVMFuzzerTestOneInput(buf.data(), buf.size());
  }
  std::printf("%zu seeds and %ld mutated inputs ran\n", seeds.size(), iterations);
  return 0;
}
