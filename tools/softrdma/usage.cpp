#include "tools/softrdma/usage.h"

#include <array>

namespace softrdma::tools {

namespace {

constexpr std::array kCommands = {
    CommandHelp{
        "run", "softrdma run [OPTIONS] -- PROGRAM [ARGS...]",
        "Runs an unmodified verbs or rdma_cm program over softrdma: softrdma's libibverbs.so.1\n"
        "and librdmacm.so.1 come first on its library path, and each option becomes the\n"
        "SOFTRDMA_* variable named beside it (a variable already set wins over the default,\n"
        "an option over the variable).\n"
        "\n"
        "  --netdev SPEC        SOFTRDMA_NETDEV: udp:ADDRESS | af_packet:IFACE[:ADDRESS] |\n"
        "                       af_xdp:IFACE[:ADDRESS] | dpdk:DEVICE[@ADDRESS]\n"
        "                       (default: a loopback address of the process's own)\n"
        "  --local MODE         SOFTRDMA_LOCAL: direct | rings | kernel (udp, devices of this "
        "host)\n"
        "  --faults SPEC        SOFTRDMA_FAULTS: drop=P,duplicate=P,reorder=P,corrupt=P,delay=P,\n"
        "                       delay_ms=N,seed=N\n"
        "  --mtu BYTES          SOFTRDMA_MTU: the link MTU the port reports\n"
        "  --device NAME        SOFTRDMA_DEVICE: the RoCE device's name; softiwarp0 selects iWARP\n"
        "  --transport T        SOFTRDMA_TRANSPORT: roce | iwarp (what rdma_cm connects over)\n"
        "  --mpa SPEC           SOFTRDMA_MPA: rev=1|2,crc,markers,rtr=read|write|send|none,fpdu=N\n"
        "  --tcp auto|kernel|user SOFTRDMA_TCP: softiwarp0's TCP; user: lwIP on the raw backend\n"
        "                       (auto: on an address no interface holds)\n"
        "  --pcap FILE          SOFTRDMA_PCAP: trace every packet to pcapng (%p = pid)\n"
        "  --pcap-filter SPEC   SOFTRDMA_PCAP_FILTER: qp=..;class=..;snaplen=N;rotate=SIZE\n"
        "  --vlan ID            SOFTRDMA_VLAN: 802.1Q tag on the raw backends\n"
        "  --dpdk-qps N         SOFTRDMA_DPDK_QPS: DPDK queue pairs\n"
        "  --pkeys LIST         SOFTRDMA_PKEYS: softroce0's P_Key table, e.g. 0xffff,0x8001\n"
        "  --view auto|on|off   SOFTRDMA_VIEW: a private /dev/infiniband and /sys view\n"
        "  --cc dcqcn|none      SOFTRDMA_CC: congestion control (ECN, CNPs, DCQCN pacing;\n"
        "                       dcqcn[,cnp_interval_us=N][,line_rate=RATE][,backlog=on|off]\n"
        "                       [,ud_hold_us=N]; default dcqcn, backlog marking on, UD\n"
        "                       datagrams wait 50000 us for a receive WQE)\n"
        "  --switch SPEC        SOFTRDMA_SWITCH: an emulated switch port in front of receives:\n"
        "                       rate=RATE,buffer=BYTES,ecn=KMIN:KMAX:PMAX[,seed=N]\n"
        "                       [,pfc=XOFF:XON] (lossless: pause senders above XOFF)\n"
        "  --stats              SOFTRDMA_STATS=1: print the device's counters at exit\n"
        "\n"
        "SOFTRDMA_CONFIG=FILE gives defaults: \"key = value\" lines, the keys the options'\n"
        "names without -- and with _ for - (stats = 0|1), # comment lines. Variables and\n"
        "options win over the file; a bad line is an error naming FILE:LINE (exit 2).\n"},
    CommandHelp{"devices", "softrdma devices",
                "Prints softrdma's version, then lists the devices of this configuration (the\n"
                "SOFTRDMA_* variables) as ibv_devices does, with backend and address.\n"},
    CommandHelp{"lint", "softrdma lint [--json] [--strict] [--roce-port PORT]... FILE",
                "Checks every RoCEv2 packet and iWARP stream in a pcap/pcapng capture against the\n"
                "specs. Exit status: 0 no error, 1 errors (--strict: warnings too), 2 the capture\n"
                "cannot be read.\n"
                "\n"
                "  --json             one JSON object instead of text\n"
                "  --strict           warnings (reserved fields set) count as errors\n"
                "  --roce-port PORT   also take UDP PORT as RoCEv2 (repeatable)\n"},
    CommandHelp{
        "trace",
        "softrdma trace merge INPUT... -o OUTPUT.pcapng | "
        "softrdma trace plot CAPTURE -o FILE.png [--flow N]",
        "merge: merges pcap/pcapng captures (e.g. the per-process traces of softrdma run\n"
        "--pcap) by time into one pcapng file, keeping interfaces and annotations.\n"
        "plot: draws each RC/UC flow of a pcapng trace (python3-matplotlib): PSN over time\n"
        "with first transmissions, retransmissions, NAKs, RNR NAKs and CNPs marked, and\n"
        "the throughput of first transmissions; prints what it drew per flow.\n"},
    CommandHelp{"sample-trace", "softrdma sample-trace OUT.pcap",
                "Writes a capture of RoCEv2 packets and an iWARP stream built by softrdma's\n"
                "header codecs.\n"},
    // Watching running devices (docs/monitoring.md).
    CommandHelp{
        "stat", "softrdma stat [--json] [-p PID] [-w SECONDS]",
        "Prints the hw_counters of every softrdma device running on this host (of this\n"
        "user; root sees all), one line per device as `rdma statistic show` does, with\n"
        "its pid, program, transport, backend, address and start time.\n"
        "\n"
        "  --json       one JSON array, a row per device, the counters in \"counters\"\n"
        "  -p PID       that process's devices only\n"
        "  -w SECONDS   two samples SECONDS apart: the second, and the rates per second\n"
        "Exit status 2: bad usage, an unknown PID, a corrupt entry, a device that does not\n"
        "answer.\n"},
    CommandHelp{"res", "softrdma res [qp|cq|mr|pd|srq|cm_id] [--json] [-p PID]",
                "Lists the objects of every running softrdma device as `rdma res show` does, with\n"
                "its field names (lqpn, rqpn, type, state, sq-psn, rq-psn, pdn, pid, comm; cqn,\n"
                "cqe, users; rkey, lkey, mrlen), and softrdma's own: a QP's P_Key (pkey,\n"
                "pkey-index), peer, its WRs outstanding (sq-wrs, rq-wrs), retransmits, NAKs and\n"
                "RNR NAKs; each device's MR count and bytes. softiwarp0's QPs show their TCP\n"
                "ends, MPA options and FPDU counters instead of PSNs. Without a kind: how many\n"
                "of each per device.\n"
                "\n"
                "  --json   one JSON array, a row per object\n"
                "  -p PID   that process's objects only\n"},
    CommandHelp{"exporter", "softrdma exporter [--listen ADDR:PORT]",
                "Serves every running device's counters and objects as Prometheus metrics on\n"
                "http://ADDR:PORT/metrics (default 127.0.0.1:9797), labelled device, pid and comm\n"
                "(and qpn per QP). Runs until interrupted. Exit status 2 when it cannot listen.\n"},
    CommandHelp{"top", "softrdma top [--once] [-d SECONDS] [-p PID]",
                "A view of the running devices and their QPs that refreshes every SECONDS\n"
                "(default 1): packets/s, MB/s, retransmissions/s, NAKs/s, CNPs sent and handled\n"
                "per second, WRs outstanding. q quits.\n"
                "\n"
                "  --once   print one frame (rates over SECONDS) and exit, for scripts\n"},
    CommandHelp{"help", "softrdma help [COMMAND]",
                "Prints the commands, or one command's usage.\n"},
    CommandHelp{"version", "softrdma version | softrdma --version", "Prints softrdma's version.\n"},
};

}  // namespace

std::span<const CommandHelp> commands() {
  return kCommands;
}

const CommandHelp* find_command(std::string_view name) {
  for (const CommandHelp& c : kCommands) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

void print_help(std::FILE* out, const CommandHelp& c) {
  std::fprintf(out, "usage: %.*s\n\n%.*s", static_cast<int>(c.synopsis.size()), c.synopsis.data(),
               static_cast<int>(c.text.size()), c.text.data());
}

int usage_error(std::string_view name, const std::string& why) {
  std::fprintf(stderr, "softrdma %.*s: %s\n", static_cast<int>(name.size()), name.data(),
               why.c_str());
  if (const CommandHelp* c = find_command(name)) print_help(stderr, *c);
  return 2;
}

std::string_view version() {
  return SOFTRDMA_VERSION;
}

}  // namespace softrdma::tools
