// The `softrdma` command line: dispatches to subcommands.
#include <cstdio>
#include <cstring>

#include "tools/softrdma/commands.h"

namespace {

void usage(std::FILE* out) {
  std::fprintf(out,
               "usage: softrdma COMMAND [ARGS]\n"
               "\n"
               "commands:\n"
               "  lint [--json] [--roce-port PORT]... FILE\n"
               "      check every RoCEv2 packet and iWARP stream in a pcap/pcapng capture\n"
               "  run [--netdev udp:ADDRESS|af_packet:IFACE[:ADDRESS]|af_xdp:IFACE[:ADDRESS]|\n"
               "                dpdk:DEVICE[@ADDRESS]] [--faults SPEC]\n"
               "      [--mtu BYTES] [--pcap FILE] [--pcap-filter SPEC] [--device NAME]\n"
               "      [--vlan ID] [--dpdk-qps N] [--local direct|rings|kernel] [--stats]\n"
               "      -- PROGRAM [ARGS...]\n"
               "      run an unmodified verbs program over softrdma\n"
               "  devices\n"
               "      list the softrdma device of this configuration, as ibv_devices does\n"
               "  trace merge INPUT... -o OUTPUT.pcapng\n"
               "      merge traces (pcap/pcapng) by time, keeping interfaces and annotations\n"
               "  sample-trace OUT.pcap\n"
               "      write a capture of RoCEv2 packets and an iWARP stream built by wire/\n"
               "  help\n"
               "      this text\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  const char* cmd = argv[1];
  if (!std::strcmp(cmd, "lint")) return softrdma::tools::cmd_lint(argc - 2, argv + 2);
  if (!std::strcmp(cmd, "run")) return softrdma::tools::cmd_run(argc - 2, argv + 2);
  if (!std::strcmp(cmd, "devices")) return softrdma::tools::cmd_devices(argc - 2, argv + 2);
  if (!std::strcmp(cmd, "trace")) return softrdma::tools::cmd_trace(argc - 2, argv + 2);
  if (!std::strcmp(cmd, "sample-trace"))
    return softrdma::tools::cmd_sample_trace(argc - 2, argv + 2);
  if (!std::strcmp(cmd, "help") || !std::strcmp(cmd, "--help") || !std::strcmp(cmd, "-h")) {
    usage(stdout);
    return 0;
  }
  std::fprintf(stderr, "softrdma: unknown command '%s'\n", cmd);
  usage(stderr);
  return 2;
}
