#!/usr/bin/env python3
"""Acceptance: middleware from Debian's packages, unmodified, over softrdma's librdmacm.so.1.

usage: cm_programs.py SOFTRDMA CASE
Each CASE runs a server and a client on this host through `softrdma run --stats` and checks
the exit codes, the amounts the programs report, and the transport that carried the data:
each side's `softrdma: stats` line (printed at exit) must count the packets (softroce0) or
FPDUs and bytes (softiwarp0) the data needs, and nothing retransmitted or dropped.
Cases: fi_info, fi_msg, fi_rdm, fi_dgram, fi_msg_iwarp (libfabric 1.17's verbs provider
through fi_info and fi_pingpong), fio_write, fio_read (fio 3.33's rdma engine; fio_send too,
not registered with ctest: see there), rsockets_iperf3 (iperf3 under rdma-core's
librspreload.so)."""
import json
import math
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from testlib import (failures, low_port as port, rdma_cm_listening, run_case,  # noqa: E402
                     skip, tcp_listening, wait_for)
import testlib  # noqa: E402

softrdma, case = sys.argv[1:3]
RSPRELOAD = "/usr/lib/x86_64-linux-gnu/rsocket/librspreload.so"
RSOCKET_WINDOW = 32 * 64 * 1024  # what an rsocket's peer may send ahead of its reads
MTU = 4096  # the active MTU over loopback: a RoCE packet carries at most this much payload


def expect(cond, what, output=""):
    return testlib.expect(cond, what, output, tail=12000)


def need(*programs):
    missing = [p for p in programs if not shutil.which(p)]
    if missing:
        skip("not installed: " + " ".join(missing))


def start(args, run_opts=()):
    return subprocess.Popen([softrdma, "run", "--stats", *run_opts, "--", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def finish(p, timeout=120):
    """The exit code and output of `p`; (None, output and the threads' stacks) on timeout."""
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        stacks = ""
        if shutil.which("gdb"):  # what it hangs in (its own output is lost with it)
            stacks = subprocess.run(["gdb", "-p", str(p.pid), "-batch", "-ex",
                                     "thread apply all bt 25"], capture_output=True, text=True,
                                    timeout=60).stdout
        p.terminate()  # programs that exit on SIGTERM still print their counters
        try:
            out, _ = p.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            p.kill()
            out, _ = p.communicate()
        return None, out + "\n---- stacks at the timeout ----\n" + stacks
    return p.returncode, out


def wait_until(cond, proc, timeout=30):
    """Waits until `cond()` holds; false when the deadline passes or `proc` ends first."""
    return wait_for(cond, timeout, proc=proc)


def stats(output):
    """{device: {counter: value}} from the `softrdma: stats` lines of a run."""
    out = {}
    for m in re.finditer(r"^softrdma: stats (\S+) \S+: (.*)$", output, re.M):
        out[m.group(1)] = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", m.group(2))}
    return out


# Counters that must stay 0 on a clean run over loopback: no retransmission, no drop, no
# error, nothing injected.
BAD_ROCE = re.compile(r"^(retransmits|retry_exceeded_err|retry_rnr_exceeded_err|drop_\w+|"
                      r"icrc_err|netdev_rx_malformed|netdev_tx_errors|netdev_\w+_dropped|"
                      r"duplicate_request|out_of_seq_request|send_seq_err_nak|send_rnr_err|"
                      r"rcvd_rnr_err|fault_\w+)$")
BAD_IWARP = re.compile(r"^(crc_errors|terminates_sent|terminates_received|faults_injected)$")


def check_roce(name, output, min_sent=0, min_rcvd=0):
    """The side's softroce0 counters: at least `min_sent`/`min_rcvd` packets, nothing bad."""
    st = stats(output).get("softroce0")
    if not expect(st is not None, f"{name}: no softroce0 stats line", output):
        return {}
    expect(st["sent_pkts"] >= min_sent and st["rcvd_pkts"] >= min_rcvd,
           f"{name}: softroce0 sent {st['sent_pkts']} packets (want >= {min_sent}), received "
           f"{st['rcvd_pkts']} (want >= {min_rcvd})", output)
    bad = {k: v for k, v in st.items() if BAD_ROCE.match(k) and v}
    expect(not bad, f"{name}: softroce0 counters {bad}", output)
    return st


def check_iwarp(name, output, min_tx_bytes=0, min_rx_bytes=0):
    """The side's softiwarp0 counters carry the data; softroce0 carried nothing."""
    all_st = stats(output)
    st = all_st.get("softiwarp0")
    if not expect(st is not None, f"{name}: no softiwarp0 stats line", output):
        return {}
    expect(st["tx_bytes"] >= min_tx_bytes and st["rx_bytes"] >= min_rx_bytes and
           st["tx_fpdus"] > 0 and st["rx_fpdus"] > 0,
           f"{name}: softiwarp0 sent {st['tx_bytes']} bytes (want >= {min_tx_bytes}), received "
           f"{st['rx_bytes']} (want >= {min_rx_bytes})", output)
    bad = {k: v for k, v in st.items() if BAD_IWARP.match(k) and v}
    expect(not bad, f"{name}: softiwarp0 counters {bad}", output)
    roce = all_st.get("softroce0", {})
    expect(roce.get("sent_pkts", 0) == 0, f"{name}: RoCE packets on an iWARP run", output)
    return st


# ---- libfabric 1.17's verbs provider: fi_info, fi_pingpong

def case_fi_info():
    need("fi_info")
    r = subprocess.run([softrdma, "run", "--", "fi_info", "-p", "verbs"], capture_output=True,
                       text=True, timeout=60)
    out = r.stdout + r.stderr
    expect(r.returncode == 0, f"fi_info -p verbs: exit {r.returncode}", out)
    entries = re.findall(r"provider: (\S+)\n\s+fabric: .*\n\s+domain: (\S+)\n.*\n\s+type: (\S+)",
                         out)
    for prov, domain, ep in (("verbs", "softroce0", "FI_EP_MSG"),
                             ("verbs", "softroce0-dgram", "FI_EP_DGRAM"),
                             ("verbs;ofi_rxm", "softroce0", "FI_EP_RDM")):
        expect((prov, domain, ep) in entries, f"fi_info -p verbs lists {prov} {domain} {ep}", out)
    r = subprocess.run([softrdma, "run", "--transport", "iwarp", "--", "fi_info", "-p", "verbs"],
                       capture_output=True, text=True, timeout=60)
    out = r.stdout + r.stderr
    expect(r.returncode == 0, f"fi_info -p verbs (iwarp): exit {r.returncode}", out)
    expect(re.search(r"domain: softiwarp0\n.*\n\s+type: FI_EP_MSG\n\s+protocol: FI_PROTO_IWARP",
                     out), "fi_info -p verbs (iwarp) lists softiwarp0 MSG", out)


def pingpong_rows(output):
    """{size in bytes: (sent, acked, MB/s)} from fi_pingpong's table."""
    unit = {"": 1, "k": 1024, "m": 1024 ** 2, "g": 1024 ** 3}
    rows = {}
    for m in re.finditer(r"^([\d.]+)([kmg]?)\s+(\d+[kmg]?)\s+=(\d+[kmg]?)\s+\S+\s+[\d.]+s\s+"
                         r"([\d.]+)", output, re.M):
        rows[int(float(m.group(1)) * unit[m.group(2)])] = (m.group(3), m.group(4),
                                                           float(m.group(5)))
    return rows


def count(s):
    unit = {"k": 1000, "m": 1000 ** 2}
    return int(s[:-1]) * unit[s[-1]] if s[-1] in unit else int(s)


def pingpong(name, args, sizes, iterations, run_opts=(), transport="roce"):
    """fi_pingpong server and client (over 127.0.0.1); checks every size's row on both sides
    and the counters. `sizes`: the sizes the table must have (with -S all: those up to the
    endpoint's largest message)."""
    p = port()
    srv = start(["fi_pingpong", *args, "-B", str(p)], run_opts)
    up = wait_until(lambda: tcp_listening(p), srv)  # its out-of-band control socket
    expect(up, f"{name}: server's control port {p} listening")
    cli = start(["fi_pingpong", *args, "-P", str(p), "127.0.0.1"], run_opts)
    crc, cout = finish(cli)
    src, sout = finish(srv, 30 if crc is None else 120)
    expect(src == 0, f"{name}: server exit {src}", sout)
    expect(crc == 0, f"{name}: client exit {crc}", cout)
    for side, out in (("server", sout), ("client", cout)):
        rows = pingpong_rows(out)
        for size in sizes:
            row = rows.get(size)
            expect(row is not None and count(row[0]) == iterations == count(row[1]),
                   f"{name}: {side} row for {size} bytes: {row}", out)
        # Each side sends `iterations` messages of each size (plus a warm-up and the
        # connection's own messages): at least that many packets of MTU bytes.
        payload = sum(iterations * max(1, math.ceil(s / MTU)) for s in rows)
        payload_bytes = sum(iterations * s for s in rows)
        if transport == "iwarp":
            check_iwarp(f"{name} {side}", out, payload_bytes, payload_bytes)
        else:
            check_roce(f"{name} {side}", out, payload, payload)
        if 1 << 20 in rows:
            print(f"{name} {side}: 1 MiB x {iterations}: {rows[1 << 20][2]:.0f} MB/s")
    return sout, cout


ALL_TO_1M = [1 << i for i in range(21)]  # rows fi_pingpong -S all prints, among others


def case_fi_msg():
    need("fi_pingpong")
    pingpong("fi_pingpong msg -S all", ["-p", "verbs", "-e", "msg", "-S", "all", "-I", "10"],
             ALL_TO_1M, 10)
    pingpong("fi_pingpong msg 1 MiB", ["-p", "verbs", "-e", "msg", "-S", str(1 << 20), "-I",
                                       "200"], [1 << 20], 200)


def case_fi_rdm():
    need("fi_pingpong")
    prov = "verbs;ofi_rxm"
    pingpong("fi_pingpong rdm -S all", ["-p", prov, "-e", "rdm", "-S", "all", "-I", "10"],
             ALL_TO_1M, 10)
    pingpong("fi_pingpong rdm 1 MiB", ["-p", prov, "-e", "rdm", "-S", str(1 << 20), "-I", "200"],
             [1 << 20], 200)


def case_fi_dgram():
    need("fi_pingpong")
    # The verbs provider's DGRAM endpoints send from GID FI_VERBS_GID_IDX (default 0): index 0
    # is the link-local default GID, as on rxe, which softrdma cannot send from; 1 is the
    # device's IPv4 address, what rxe setups give it too.
    os.environ["FI_VERBS_GID_IDX"] = "1"
    # A datagram carries at most the MTU: -S all stops there.
    pingpong("fi_pingpong dgram -S all", ["-p", "verbs", "-e", "dgram", "-S", "all", "-I", "20"],
             [1 << i for i in range(13)], 20)


def case_fi_msg_iwarp():
    need("fi_pingpong")
    opts = ["--transport", "iwarp"]
    pingpong("fi_pingpong msg iwarp -S all", ["-p", "verbs", "-e", "msg", "-S", "all", "-I",
                                              "10"], ALL_TO_1M, 10, opts, "iwarp")
    pingpong("fi_pingpong msg iwarp 1 MiB", ["-p", "verbs", "-e", "msg", "-S", str(1 << 20),
                                             "-I", "200"], [1 << 20], 200, opts, "iwarp")


# ---- fio 3.33's rdma engine

def fio(name, verb, iodepth, server_iodepth=None, size_mib=256, bs="64k"):
    """fio's rdma engine: the server runs rw=read (it waits for the client's connection), the
    client rw=write with the hostname, as engines/rdma.c has it. --thread: fio's job
    processes end with _exit(), which would skip the exit handler printing the counters."""
    p = port()
    common = ["--ioengine=rdma", "--thread", f"--port={p}", f"--bs={bs}", f"--size={size_mib}m",
              f"--verb={verb}"]
    srv = start(["fio", "--name=server", *common, "--rw=read",
                 f"--iodepth={server_iodepth or iodepth}"])
    expect(wait_until(lambda: rdma_cm_listening(p), srv), f"{name}: server listening on {p}")
    cli = start(["fio", "--name=client", *common, "--rw=write", "--hostname=127.0.0.1",
                 f"--iodepth={iodepth}"])
    crc, cout = finish(cli)
    src, sout = finish(srv, 30 if crc is None else 120)
    expect(src == 0 and "err= 0" in sout, f"{name}: server exit {src}", sout)
    expect(crc == 0 and "err= 0" in cout, f"{name}: client exit {crc}", cout)
    m = re.search(r"WRITE: bw=([\d.]+)([KMG]i)B/s .* io=([\d.]+)MiB", cout)
    if expect(m, f"{name}: client's WRITE summary", cout):
        expect(float(m.group(3)) == size_mib, f"{name}: client moved {m.group(3)} MiB", cout)
        mib_s = float(m.group(1)) * {"Ki": 1 / 1024, "Mi": 1, "Gi": 1024}[m.group(2)]
        print(f"{name}: {m.group(3)} MiB at {mib_s:.0f} MiB/s")
    packets = size_mib * (1 << 20) // MTU
    # The data's packets: WRITE and SEND go from the client, READ responses from the server.
    if verb == "read":
        check_roce(f"{name} server", sout, min_sent=packets)
        check_roce(f"{name} client", cout, min_rcvd=packets)
    else:
        check_roce(f"{name} server", sout, min_rcvd=packets)
        check_roce(f"{name} client", cout, min_sent=packets)


def case_fio_write():
    need("fio")
    for qd in (1, 16):
        fio(f"fio rdma_write iodepth {qd}", "write", qd)


def case_fio_read():
    need("fio")
    for qd in (1, 16):
        fio(f"fio rdma_read iodepth {qd}", "read", qd)


def case_fio_send():
    # fio's send verb connects with rnr_retry 0 and re-posts each receive only after its
    # completion: a SEND that finds no receive ends the run (RNR retry exceeded), on any
    # device, and fio then hangs. engines/rdma.c advises a receiving side deeper than the
    # sending one: so here. Even so a receiver starved of CPU falls behind (two tests at once
    # on two cores): not registered with ctest, run by hand.
    need("fio")
    fio("fio send iodepth 1 (receiver 16)", "send", 1, server_iodepth=16, size_mib=64)


# ---- rsockets: iperf3 under rdma-core's librspreload.so

def rdmacm_of(pid):
    """The librdmacm.so.1 mapped into process `pid`."""
    try:
        with open(f"/proc/{pid}/maps") as f:
            for line in f:
                if "librdmacm.so" in line:
                    return line.split()[-1]
    except OSError:
        pass
    return None


def preload(lib):
    """A command prefix that adds `lib` to LD_PRELOAD and execs the rest (same pid). It keeps
    what `softrdma run` preloads itself (the ASan runtime, in a sanitized build)."""
    return ["sh", "-c", 'LD_PRELOAD="${LD_PRELOAD:+$LD_PRELOAD:}$0" exec "$@"', lib]


def iperf3(name, extra):
    p = port()
    srv = start([*preload(RSPRELOAD), "iperf3", "-s", "-1", "-p", str(p)])
    expect(wait_until(lambda: rdma_cm_listening(p), srv), f"{name}: server listening on {p}")
    # `softrdma run` and sh exec the program: the pid is iperf3's. The preload links
    # librdmacm.so.1, which the library path of `softrdma run` makes softrdma's.
    lib = rdmacm_of(srv.pid)
    expect(lib and os.path.realpath(lib).startswith(
        os.path.realpath(os.path.join(os.path.dirname(softrdma), "..", "lib"))),
        f"{name}: the server's librdmacm is softrdma's (mapped: {lib})")
    cli = start([*preload(RSPRELOAD), "iperf3", "-c", "127.0.0.1", "-p", str(p),
                 "-J", *extra])
    crc, cout = finish(cli)
    src, sout = finish(srv, 30 if crc is None else 60)
    expect(src == 0, f"{name}: server exit {src}", sout)
    expect(crc == 0, f"{name}: client exit {crc}", cout)
    try:
        # The JSON, then the stats line.
        report = json.loads(cout[:cout.rindex("}") + 1])
        sent = report["end"]["sum_sent"]["bytes"]
        received = report["end"]["sum_received"]["bytes"]
        print(f"{name}: {sent} bytes sent, {received} received, "
              f"{report['end']['sum_received']['bits_per_second'] / 8e6:.0f} MB/s")
    except (ValueError, KeyError) as e:
        expect(False, f"{name}: iperf3's JSON report: {e}", cout)
        return
    # The receiving iperf3 stops counting at the test's end, but goes on reading (and drops)
    # what arrives until the sender has seen the end too; what sits unread in its receive
    # buffers (32 of 64 KiB a stream) is not counted either. Measured with a count of the
    # bytes rrecv handed over (-R, two busy loops on the two cores): iperf3 counted
    # 177,602,560 of 178,782,208 bytes sent, and had read every one of them. How much it
    # drops grows with how late the sender sees the end, so the bound takes a share of the
    # total as well. Loss in the transport shows in check_roce below (packets received,
    # no retransmissions), not here.
    streams = len(report["end"]["streams"])
    expect(sent > 0 and sent - streams * RSOCKET_WINDOW - sent // 20 <= received <= sent,
           f"{name}: {sent} bytes sent, {received} received", cout)
    expect(report["end"]["sum_sent"].get("retransmits", 0) == 0,
           f"{name}: iperf3 reports retransmits", cout)
    packets = sent // MTU
    # -R: the server sends. Every side's counters must be clean at teardown.
    sender, receiver = (sout, cout) if "-R" in extra else (cout, sout)
    check_roce(f"{name} sender", sender, min_sent=packets)
    check_roce(f"{name} receiver", receiver, min_rcvd=packets)


def case_rsockets_iperf3():
    need("iperf3")
    if not os.path.exists(RSPRELOAD):
        skip("no " + RSPRELOAD)
    iperf3("iperf3 over rsockets", ["-t", "2"])
    iperf3("iperf3 -R over rsockets", ["-t", "1", "-R"])
    iperf3("iperf3 -P 2 over rsockets", ["-t", "1", "-P", "2"])


run_case(globals(), case)
