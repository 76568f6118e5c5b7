// softrdma trace merge A B ... -o OUT: merges pcap/pcapng captures by time into one pcapng
// file, one interface (IDB) per input interface, packet comments and flags kept.
#include <cstdio>
#include <cstring>
#include <memory>
#include <queue>
#include <string>
#include <vector>

#include "pcap/pcapng_reader.h"
#include "pcap/pcapng_writer.h"
#include "pcap/reader.h"
#include "tools/softrdma/cli_args.h"
#include "tools/softrdma/commands.h"

namespace softrdma::tools {

namespace {

int trace_usage(const char* why) {
  if (why) std::fprintf(stderr, "softrdma trace: %s\n", why);
  std::fprintf(stderr,
               "usage: softrdma trace merge INPUT... -o OUTPUT.pcapng\n"
               "       merge pcap/pcapng captures (e.g. the per-process traces of softrdma run\n"
               "       --pcap) by time into one pcapng file\n"
               "       softrdma trace plot CAPTURE -o FILE.png [--flow N]\n"
               "       draw each RC/UC flow's PSNs over time and its throughput\n");
  return 2;
}

// One input capture, read one record ahead.
struct Input {
  std::string path;
  std::unique_ptr<pcap::PcapngReader> ng;
  std::unique_ptr<pcap::Reader> classic;
  std::vector<std::uint32_t> out_iface;  // output interface of each input interface
  pcap::PcapngRecord rec;
  bool have = false;
};

std::string base_name(const std::string& p) {
  const std::size_t slash = p.rfind('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

// Reads the next record of `in`, adding output interfaces as the input reveals them.
// False at the end; false with `error` set when the input is damaged.
bool advance(Input& in, pcap::PcapngWriter& out, std::string& error) {
  in.have = false;
  if (in.ng) {
    const int r = in.ng->next(in.rec);
    const auto& ifs = in.ng->interfaces();
    while (in.out_iface.size() < ifs.size()) {
      const pcap::PcapngInterface& i = ifs[in.out_iface.size()];
      const std::string name = i.name.empty() ? base_name(in.path) : i.name;
      // One snaplen for all (libpcap refuses a file whose interfaces differ in it); frames cut
      // short still show it by their captured length.
      in.out_iface.push_back(out.add_interface(name, i.linktype, 0));
    }
    if (r < 0) error = in.path + ": " + in.ng->error();
    in.have = r == 1;
    return in.have;
  }
  pcap::Frame f;
  const int r = in.classic->next(f);
  if (r < 0) error = in.path + ": " + in.classic->error();
  if (r != 1) return false;
  in.rec.iface = 0;
  in.rec.ts_ns = f.ts_sec * 1'000'000'000 + f.ts_nsec;
  in.rec.orig_len = f.len;
  in.rec.data.assign(f.data.begin(), f.data.end());
  in.rec.comment.clear();
  in.rec.flags = 0;
  in.have = true;
  return true;
}

int merge(const std::vector<std::string>& inputs, const std::string& output) {
  std::vector<Input> ins(inputs.size());
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    Input& in = ins[k];
    in.path = inputs[k];
    std::string error;
    if (pcap::PcapngReader::looks_like_pcapng(in.path)) {
      in.ng = pcap::PcapngReader::open(in.path, error);
    } else {
      in.classic = pcap::Reader::open(in.path, error);
    }
    if (!in.ng && !in.classic) {
      std::fprintf(stderr, "softrdma trace merge: cannot read %s: %s\n", in.path.c_str(),
                   error.c_str());
      return 2;
    }
  }
  std::string error;
  pcap::PcapngOptions opts;
  opts.per_process_name = false;
  auto out = pcap::PcapngWriter::open(output, error, opts);
  if (!out) {
    std::fprintf(stderr, "softrdma trace merge: cannot write %s\n", error.c_str());
    return 2;
  }
  using Key = std::pair<std::int64_t, std::size_t>;  // time, input (earlier input first on ties)
  std::priority_queue<Key, std::vector<Key>, std::greater<>> heap;
  int status = 0;
  // Each input's interfaces are added as it is first read, in input order.
  for (std::size_t k = 0; k < ins.size(); ++k) {
    Input& in = ins[k];
    if (in.classic) {
      in.out_iface.push_back(out->add_interface(
          base_name(in.path), static_cast<std::uint16_t>(in.classic->linktype()), 0));
    }
    if (advance(in, *out, error)) heap.push({in.rec.ts_ns, k});
  }
  std::uint64_t n = 0;
  while (!heap.empty()) {
    const std::size_t k = heap.top().second;
    heap.pop();
    Input& in = ins[k];
    const pcap::PcapngRecord& r = in.rec;
    out->write(in.out_iface.at(r.iface), r.ts_ns, wire::Bytes(r.data), r.orig_len, r.flags,
               r.comment);
    ++n;
    if (advance(in, *out, error)) heap.push({in.rec.ts_ns, k});
  }
  if (!error.empty()) {
    std::fprintf(stderr, "softrdma trace merge: %s (merged what was read before)\n", error.c_str());
    status = 2;
  }
  out->flush();
  if (!out->error().empty()) {
    std::fprintf(stderr, "softrdma trace merge: %s\n", out->error().c_str());
    return 2;
  }
  std::printf("merged %llu packets from %zu files into %s\n", static_cast<unsigned long long>(n),
              ins.size(), output.c_str());
  return status;
}

}  // namespace

int cmd_trace(int argc, char** argv) {
  if (argc < 1) return trace_usage("no subcommand given");
  if (!std::strcmp(argv[0], "plot")) return cmd_trace_plot(argc - 1, argv + 1);
  if (std::strcmp(argv[0], "merge") != 0) {
    return trace_usage((std::string("unknown subcommand '") + argv[0] + "'").c_str());
  }
  MergeArgs args;
  std::string error;
  if (!parse_merge_args(argc - 1, argv + 1, args, error)) return trace_usage(error.c_str());
  return merge(args.inputs, args.output);
}

}  // namespace softrdma::tools
