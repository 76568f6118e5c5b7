#!/usr/bin/env python3
"""Acceptance: unmodified Debian verbs programs over softrdma through `softrdma run`.

usage: programs.py SOFTRDMA CASE
Each CASE runs a server and a client (or one program) on this host, checks both
exit codes and what they print. Servers listen on a free TCP port of our own."""
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from testlib import (expect, failures, free_port, run_pair, run_stats as stats,  # noqa: E402
                     wait_listening)
from xsrq_check import expect_xsrq_clients, finish_all  # noqa: E402

softrdma, case = sys.argv[1:3]


def run_one(args, timeout=60, env=None):
    r = subprocess.run([softrdma, "run", *args], capture_output=True, text=True,
                       timeout=timeout, env=env)
    return r.returncode, r.stdout + r.stderr


def pair(server, client, timeout=120, run_opts=()):
    """`server`, then `client` with the server's address, both under `softrdma run RUN_OPTS`."""
    return run_pair(softrdma, server, client, server_opts=run_opts, timeout=timeout)


def check_pair(name, server, client, patterns, client_only=False, **kw):
    (src, sout), (crc, cout) = pair(server, client, **kw)
    expect(src == 0, f"{name}: server exit {src}", sout)
    expect(crc == 0, f"{name}: client exit {crc}", cout)
    for p in patterns:
        if not client_only:
            expect(re.search(p, sout), f"{name}: server output lacks /{p}/", sout)
        expect(re.search(p, cout), f"{name}: client output lacks /{p}/", cout)
    return sout, cout


PINGPONG = {
    "rc_pingpong": ["ibv_rc_pingpong"],
    "rc_pingpong_new_api": ["ibv_rc_pingpong", "-N"],
    "rc_pingpong_ext_cq": ["ibv_rc_pingpong", "-t"],
    "rc_pingpong_events": ["ibv_rc_pingpong", "-e"],
    "rc_pingpong_sizes": ["ibv_rc_pingpong", "-s", "65536", "-n", "200"],
    "uc_pingpong": ["ibv_uc_pingpong"],
    "ud_pingpong": ["ibv_ud_pingpong"],
    "srq_pingpong": ["ibv_srq_pingpong", "-q", "4"],
}

PERFTEST = {
    # name: (program, extra args)
    "ib_send_bw": ("ib_send_bw", ["-a", "-n", "20"]),
    "ib_send_lat": ("ib_send_lat", ["-a", "-n", "20"]),
    "ib_write_bw": ("ib_write_bw", ["-a", "-n", "20"]),
    "ib_write_lat": ("ib_write_lat", ["-a", "-n", "20"]),
    "ib_read_bw": ("ib_read_bw", ["-a", "-n", "20"]),
    "ib_read_lat": ("ib_read_lat", ["-a", "-n", "20"]),
    "ib_atomic_bw": ("ib_atomic_bw", ["-n", "200"]),
    "ib_atomic_lat": ("ib_atomic_lat", ["-n", "200"]),
    # UC has no flow control and a UC send completes as soon as it is sent: an unpaced sender
    # outruns the receiver, and on a path without PFC (a NIC's pause frames) datagrams are
    # lost and perftest waits for them forever. perftest's software rate limiter paces it.
    "ib_send_bw_uc": ("ib_send_bw", ["-c", "UC", "-s", "65536", "-n", "500", "--rate_limit=4",
                                     "--rate_limit_type=SW"]),
    "ib_write_bw_uc": ("ib_write_bw", ["-c", "UC", "-s", "65536", "-n", "500", "--rate_limit=4",
                                       "--rate_limit_type=SW"]),
    "ib_send_bw_ud": ("ib_send_bw", ["-c", "UD", "-a", "-n", "20", "--rate_limit=4",
                                     "--rate_limit_type=SW"]),
    "ib_send_lat_ud": ("ib_send_lat", ["-c", "UD", "-a", "-n", "20"]),
}

# XRC (IBTA annex A14) through perftest: initiator QPs on one side, target QPs and XRC SRQs on
# the other.
PERFTEST_XRC = {
    "ib_send_bw_xrc": ("ib_send_bw", ["-c", "XRC", "-s", "65536", "-n", "300"]),
    "ib_write_bw_xrc": ("ib_write_bw", ["-c", "XRC", "-s", "65536", "-n", "300"]),
    "ib_read_bw_xrc": ("ib_read_bw", ["-c", "XRC", "-s", "65536", "-n", "300"]),
}


def expect_xrc(name, texts, requests):
    """The `--stats` lines of `texts` count at least `requests` XRC requests taken by target
    QPs (xrc_rcvd_requests) and none refused for a foreign SRQ (xrc_bad_srqn)."""
    lines = [stats(t) for t in texts]
    expect(all(lines), f"{name}: a stats line from each side", "".join(texts))
    if all(lines):
        got = sum(s["xrc_rcvd_requests"] for s in lines)
        expect(got >= requests, f"{name}: {got} XRC requests taken, want >= {requests}",
               "".join(texts))
        expect(all(s["xrc_bad_srqn"] == 0 for s in lines), f"{name}: no SRQ refused",
               "".join(texts))


QPERF = ["rc_bw", "rc_lat", "rc_bi_bw", "rc_rdma_write_bw", "rc_rdma_write_lat",
         "rc_rdma_read_bw", "rc_rdma_read_lat", "rc_compare_swap_mr", "rc_fetch_add_mr",
         "uc_bw", "uc_lat", "ud_bw", "ud_lat"]

if case == "devices":
    rc, out = run_one(["--", "ibv_devices"])
    expect(rc == 0 and re.search(r"softroce0\s+[0-9a-f]{16}", out), "ibv_devices lists softroce0", out)
    r = subprocess.run([softrdma, "devices"], capture_output=True, text=True, timeout=30)
    expect(r.returncode == 0 and "softroce0" in r.stdout and "udp" in r.stdout,
           "softrdma devices shows the device and its backend", r.stdout + r.stderr)
elif case == "devinfo":
    rc, out = run_one(["--", "ibv_devinfo", "-v"])
    expect(rc == 0, f"ibv_devinfo exit {rc}", out)
    for p in [r"hca_id:\s+softroce0", r"transport:\s+InfiniBand", r"state:\s+PORT_ACTIVE",
              r"link_layer:\s+Ethernet",
              # rxe's layout: 0 the link-local default GID (EUI-64 of 02:00:<IPv4>), 1 the IPv4
              # address, both RoCE v2; nothing past them.
              r"GID\[\s*0\]:\s+fe80::7fff:fe01:[0-9a-f]{1,4}, RoCE v2",
              r"GID\[\s*1\]:\s+::ffff:127\.\d+\.\d+\.\d+, RoCE v2",
              r"vendor_id:\s+0x1af4", r"max_qp_wr:\s+16384", r"atomic_cap:\s+ATOMIC_HCA",
              r"active_mtu:\s+4096"]:
        expect(re.search(p, out), f"ibv_devinfo -v shows /{p}/", out)
    expect(not re.search(r"GID\[\s*2\]", out), "ibv_devinfo -v shows two GIDs", out)
    # A configured address and MTU show through.
    rc, out = run_one(["--netdev", "udp:127.0.0.7", "--mtu", "1500", "--", "ibv_devinfo"])
    expect(rc == 0 and "active_mtu:\t\t1024 (3)" in out, "udp:127.0.0.7 with MTU 1500", out)
elif case == "devinfo_iwarp":
    # softiwarp0 is listed after softroce0 (programs taking the first device keep RoCE).
    rc, out = run_one(["--", "ibv_devices"])
    expect(rc == 0 and re.search(r"softroce0\s+[0-9a-f]{16}\s+softiwarp0\s+02007f01[0-9a-f]{4}0000",
                                 out), "ibv_devices lists softroce0, then softiwarp0", out)
    rc, out = run_one(["--", "ibv_devinfo", "-v", "-d", "softiwarp0"])
    expect(rc == 0, f"ibv_devinfo -d softiwarp0 exit {rc}", out)
    for p in [r"hca_id:\s+softiwarp0", r"transport:\s+iWARP \(1\)", r"state:\s+PORT_ACTIVE",
              r"link_layer:\s+Ethernet", r"node_guid:\s+0200:7f01:[0-9a-f]{4}:0000",
              r"atomic_cap:\s+ATOMIC_NONE", r"max_sge_rd:\s+1\b", r"vendor_id:\s+0x1af4"]:
        expect(re.search(p, out), f"ibv_devinfo -v -d softiwarp0 shows /{p}/", out)
    expect("softroce0" not in out, "only the device asked for", out)
elif case == "device_iwarp":
    # --device softiwarp0 names the iWARP device: it is listed first and once, beside
    # softroce0 (not a RoCE device renamed softiwarp0), as with --transport iwarp.
    for opts in (["--device", "softiwarp0"], ["--device=softiwarp0", "--transport", "iwarp"]):
        rc, out = run_one([*opts, "--", "ibv_devices"])
        names = re.findall(r"^\s+(soft\w+)\s+[0-9a-f]{16}\s*$", out, re.M)
        expect(rc == 0 and names == ["softiwarp0", "softroce0"],
               f"softrdma run {opts} -- ibv_devices: softiwarp0 then softroce0, once each", out)
    rc, out = run_one(["--device", "softiwarp0", "--", "ibv_devinfo", "-d", "softiwarp0"])
    expect(rc == 0 and re.search(r"transport:\s+iWARP", out) and out.count("hca_id") == 1,
           "ibv_devinfo -d softiwarp0 is the iWARP device", out)
    # SOFTRDMA_DEVICE set by hand does the same.
    rc, out = run_one(["--", "ibv_devices"], env={**os.environ, "SOFTRDMA_DEVICE": "softiwarp0"})
    names = re.findall(r"^\s+(soft\w+)\s+[0-9a-f]{16}\s*$", out, re.M)
    expect(rc == 0 and names == ["softiwarp0", "softroce0"], "SOFTRDMA_DEVICE=softiwarp0", out)
    # Clashes: exit 2 with a message naming both options, and the program never runs.
    for opts, want in [(["--device", "softiwarp0", "--transport", "roce"],
                        r"--device softiwarp0 \(SOFTRDMA_DEVICE\) names the iWARP device, but "
                        r"--transport roce \(SOFTRDMA_TRANSPORT\) asks for RoCE"),
                       (["--transport", "roce", "--device", "softiwarp0"],
                        r"--device softiwarp0 .*--transport roce"),
                       (["--transport", "iwarp", "--device", "softroce0"],
                        r"--device softroce0 \(SOFTRDMA_DEVICE\) names a RoCE device, but "
                        r"--transport iwarp \(SOFTRDMA_TRANSPORT\) selects the iWARP device "
                        r"softiwarp0"),
                       (["--transport", "iwarp", "--device", "myroce"], r"--device myroce .*")]:
        rc, out = run_one([*opts, "--", "echo", "PROGRAM-RAN"])
        expect(rc == 2 and re.search(r"^softrdma run: " + want, out, re.M) and "PROGRAM-RAN" not in out,
               f"softrdma run {opts}: exit 2 naming the options", out)
    # Renaming the RoCE device still works.
    rc, out = run_one(["--device", "myroce", "--", "ibv_devices"])
    names = re.findall(r"^\s+(\w+)\s+[0-9a-f]{16}\s*$", out, re.M)
    expect(rc == 0 and names == ["myroce", "softiwarp0"], "--device myroce renames softroce0", out)
elif case == "bad_options":
    for args, msg in [(["--netdev", "bogus"], "unknown backend"),
                      (["--faults", "drop=2"], "probability"),
                      (["--mtu", "12"], "mtu"),
                      (["--local", "shared"], "direct, rings or kernel"),
                      (["--frobnicate", "1"], "unknown option")]:
        rc, out = run_one([*args, "--", "true"])
        expect(rc == 2 and msg in out, f"softrdma run {args}: exit 2 with '{msg}'", out)
    # A device that cannot start says why instead of crashing the program.
    rc, out = run_one(["--netdev", "udp:192.0.2.77", "--", "ibv_devices"])
    expect("Cannot assign requested address" in out, "unusable address is reported", out)
elif case == "pkeys":
    # --pkeys: a P_Key table; perftest's --pkey_index picks the partition its QPs use.
    for bad, msg in [("0x8000", "bad P_Key"), ("0xffff,0xffff", "twice"), ("0x1ffff", "bad P_Key")]:
        rc, out = run_one(["--pkeys", bad, "--", "true"])
        expect(rc == 2 and msg in out, f"--pkeys {bad}: exit 2 with '{msg}'", out)
    port = str(free_port())
    args = ["ib_write_bw", "-p", port, "-s", "4096", "-n", "200", "--pkey_index=1"]
    with tempfile.TemporaryDirectory(prefix="softrdma-pkeys-") as d:
        trace = os.path.join(d, "c.pcapng")
        (src, sout), (crc, cout) = pair(args, args + ["127.0.0.1"], run_opts=(
            "--stats", "--pkeys", "0xffff,0x8001", "--pcap", os.path.join(d, "%p.pcapng")))
        expect(src == 0 and crc == 0, "ib_write_bw --pkey_index=1 on partition 0x8001",
               sout + cout)
        for side, out in (("server", sout), ("client", cout)):
            counters = stats(out)
            expect(counters and counters["drop_bad_pkey"] == 0,
                   f"the {side} took every packet of its partition", out)
        traces = [os.path.join(d, f) for f in os.listdir(d)]
        keys = set()
        for t in traces:
            r = subprocess.run(["tshark", "-r", t, "-T", "fields", "-e", "infiniband.bth.p_key"],
                               capture_output=True, text=True, timeout=60)
            keys |= {int(k, 0) for k in r.stdout.split() if k}
        expect(keys == {0x8001}, f"every packet carries P_Key 0x8001 (seen: {keys})", "")
    # A client of another partition gets nothing through: the server drops and counts.
    port = str(free_port())
    args = ["ib_write_bw", "-p", port, "-s", "4096", "-n", "20", "--pkey_index=1"]
    (_, sout), (rc, cout) = run_pair(softrdma, args, [*args, "127.0.0.1"],
                                     server_opts=("--stats", "--pkeys", "0xffff,0x8001"),
                                     client_opts=("--pkeys", "0xffff,0x8002"))
    counters = stats(sout)
    expect(rc != 0, "a client of partition 0x8002 fails", cout)
    expect(counters and counters["drop_bad_pkey"] > 0, "the server counts its P_Key violations",
           sout)
elif case == "rc_pingpong_gid":
    # Scripts written for rxe name the IPv4 RoCE v2 GID as index 1: data goes both ways.
    port = str(free_port())
    args = ["ibv_rc_pingpong", "-g", "1", "-p", port, "-n", "100", "-s", "4096"]
    check_pair("rc_pingpong -g 1", args, args + ["127.0.0.1"],
               [r"819200 bytes in [\d.]+ seconds", r"100 iters in [\d.]+ seconds"])
    # Index 0 is the IPv6 link-local default GID: the udp backend sends from its IPv4 address
    # only, so connecting through it fails at RTR, saying why, instead of sending from another
    # address. The server moves its QP to RTR first (before it answers the client), fails and
    # hangs up; so the client fails too.
    port = str(free_port())
    args = ["ibv_rc_pingpong", "-g", "0", "-p", port, "-n", "10"]
    (src, sout), (crc, cout) = pair(args, args + ["127.0.0.1"], timeout=60)
    expect(src != 0 and "Failed to modify QP to RTR" in sout, "-g 0: the server fails at RTR",
           sout)
    expect(re.search(r"sgid_index 0 is softroce0's IPv6 link-local GID fe80::\S+, which its "
                     r"netdev udp:127\.\d+\.\d+\.\d+ cannot send from; use the GID of "
                     r"127\.\d+\.\d+\.\d+ \(sgid_index 1", sout), "-g 0: the server says why",
           sout)
    expect(crc != 0 and " iters in " not in cout, "-g 0: the client gets nothing through", cout)
    # Past the table: the program's own check.
    rc, out = run_one(["--", "ibv_rc_pingpong", "-g", "2", "-p", str(free_port()), "127.0.0.1"])
    expect(rc != 0 and "can't read sgid of index 2" in out, "-g 2 is past the table", out)
elif case in PINGPONG:
    port = str(free_port())
    args = PINGPONG[case] + ["-g", "1", "-p", port]
    check_pair(case, args, args + ["127.0.0.1"], [r"\d+ iters in [\d.]+ seconds"])
elif case in PERFTEST:
    prog, extra = PERFTEST[case]
    port = str(free_port())
    args = [prog, "-p", port, *extra]
    # The passive side of read and atomic tests prints no result table.
    sout, cout = check_pair(case, args, args + ["127.0.0.1"], [r"#bytes"], client_only=True,
                            timeout=240)
    rows = [l for l in cout.splitlines() if re.match(r"^\s*\d+\s+\d+\s+[\d.]+", l)]
    expect(len(rows) >= (1 if "-a" not in extra else 5), f"{case}: result rows", cout)
elif case in PERFTEST_XRC:
    prog, extra = PERFTEST_XRC[case]
    port = str(free_port())
    args = [prog, "-p", port, *extra]
    sout, cout = check_pair(case, args, args + ["127.0.0.1"], [r"65536\s+300\s+[\d.]+"],
                            client_only=True, timeout=240, run_opts=("--stats",))
    # 300 messages of 16 packets each at perftest's path MTU (4096), a READ request each.
    expect_xrc(case, [sout, cout], 300 if prog == "ib_read_bw" else 300 * 16)
elif case == "xsrq_pingpong_clients":
    # ibv_xsrq_pingpong -c 3: the server sends each client's messages round robin through the
    # target QPs of all three clients, which share the XRC domain of /tmp/xrc_domain on this
    # host. A client's target QP passes the messages for another client's SRQ to that client
    # (rxe/xrc_relay.h); tests/verbs/xsrq_check.py says what each must show.
    port = str(free_port())
    args = ["ibv_xsrq_pingpong", "-g", "1", "-p", port, "-n", "30"]
    srv = subprocess.Popen([softrdma, "run", "--stats", "--", *args, "-c", "3"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    wait_listening(port, proc=srv)
    clients = [subprocess.Popen([softrdma, "run", "--stats", "--", *args, "127.0.0.1"],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
               for _ in range(3)]
    outs = finish_all([srv, *clients])
    expect_xsrq_clients(outs, 30, ["client 1", "client 2", "client 3"])
elif case == "xsrq_pingpong":
    # ibv_xsrq_pingpong, one client, 4096-byte messages (4 packets each way), each side's
    # target QP delivering into its XRC SRQ. (Several clients: xsrq_pingpong_clients.)
    port = str(free_port())
    args = ["ibv_xsrq_pingpong", "-g", "1", "-p", port, "-n", "100"]
    sout, cout = check_pair(case, args, args + ["127.0.0.1"], [r"(?m)^success$"],
                            run_opts=("--stats",))
    expect_xrc(case, [sout, cout], 2 * 100 * 4)
    # A trace of it (the client's): XRC opcodes only, messages of 4 packets (SEND FIRST, MIDDLE,
    # LAST) and ACKs; softrdma lint finds nothing, tshark marks nothing malformed.
    port = str(free_port())
    args = ["ibv_xsrq_pingpong", "-g", "1", "-p", port, "-n", "20"]
    with tempfile.TemporaryDirectory(prefix="softrdma-xrc-") as d:
        pcap = os.path.join(d, "c.pcapng")
        (src, s_out), (rc, out) = run_pair(softrdma, args, [*args, "127.0.0.1"], server_opts=(),
                                           client_opts=("--pcap", pcap))
        expect(rc == 0 and src == 0, "xsrq_pingpong traced", out + s_out)
        lint = subprocess.run([softrdma, "lint", pcap], capture_output=True, text=True,
                              timeout=60)
        expect(lint.returncode == 0 and " 0 violations" in lint.stdout,
               "softrdma lint of the XRC trace", lint.stdout + lint.stderr)
        tshark = shutil.which("tshark")
        if tshark:
            r = subprocess.run([tshark, "-n", "-r", pcap, "-T", "fields", "-E", "separator=\t",
                                "-e", "infiniband.bth.opcode", "-e", "_ws.malformed"],
                               capture_output=True, text=True, timeout=60)
            rows = [(line.split("\t") + [""])[:2] for line in r.stdout.splitlines()]
            opcodes = {int(o) for o, _ in rows if o}
            expect(rows and not any(m for _, m in rows), "tshark: nothing malformed", r.stdout)
            expect({0xA0, 0xA1, 0xA2, 0xB1} <= opcodes and all(0xA0 <= o <= 0xB7 for o in opcodes),
                   f"the trace's opcodes are XRC's: {sorted(opcodes)}", r.stdout)
elif case in ("ib_write_bw_faults", "ib_read_bw_faults"):
    prog = case.replace("_faults", "")
    port = str(free_port())
    args = [prog, "-p", port, "-s", "65536", "-n", "300"]
    check_pair(case, args, args + ["127.0.0.1"], [r"65536\s+300\s+[\d.]+"], client_only=True,
               timeout=240, run_opts=("--faults", "drop=0.01"))
elif case == "local_kernel":
    # The kernel's UDP path between devices of this host (--local kernel on both sides), and a
    # device with rings against one without: it finds no ring listener and keeps to the kernel.
    port = str(free_port())
    args = ["ib_write_bw", "-p", port, "-s", "65536", "-n", "300"]
    check_pair(case, args, args + ["127.0.0.1"], [r"65536\s+300\s+[\d.]+"], client_only=True,
               run_opts=("--local", "kernel"))
    port = str(free_port())
    args = ["ibv_rc_pingpong", "-g", "1", "-p", port, "-n", "2000"]
    (src, s_out), (rc, out) = run_pair(softrdma, args, [*args, "127.0.0.1"],
                                       server_opts=("--local", "kernel"), client_opts=(),
                                       timeout=60)
    expect(rc == 0 and src == 0 and re.search(r"2000 iters in", out),
           "rc_pingpong between a ring device and a kernel-only one", out + s_out)
elif case == "stats":
    # --stats: each process prints its device's counters when it exits. The server drops 5% of
    # what it sends, so its line counts injected drops and the pair counts retransmissions.
    port = str(free_port())
    args = ["ibv_rc_pingpong", "-g", "1", "-p", port, "-n", "300"]
    # The client also traces: the counters come from the backend under the trace.
    with tempfile.TemporaryDirectory(prefix="softrdma-stats-") as d:
        (src, s_out), (rc, out) = run_pair(
            softrdma, args, [*args, "127.0.0.1"],
            server_opts=("--stats", "--faults", "drop=0.05,seed=7"),
            client_opts=("--stats", "--pcap", os.path.join(d, "c.pcapng")))
    expect(rc == 0 and src == 0, "pingpong with --stats", out + s_out)


    s_stats, c_stats = stats(s_out), stats(out)
    expect(s_stats is not None and c_stats is not None, "a stats line from each side", out + s_out)
    if s_stats and c_stats:
        expect(s_stats["fault_dropped"] > 0, "the server counts its injected drops", s_out)
        expect(c_stats["fault_dropped"] == 0, "the client injected nothing", out)
        expect(s_stats["retransmits"] + c_stats["retransmits"] > 0, "drops were retransmitted",
               out + s_out)
        expect(c_stats["netdev_rx_packets"] > 600 and s_stats["netdev_rx_packets"] > 600,
               "both received at least the 300 pings or pongs and their ACKs", out + s_out)
    rc, out = run_one(["--", "true"], env={**os.environ, "SOFTRDMA_STATS": "yes"})
    expect(rc == 2 and "expected 0 or 1" in out, "SOFTRDMA_STATS=yes is refused", out)
elif case == "direct":
    # Direct placement (the default between devices of this host): each side writes its RDMA
    # WRITEs into the other's memory itself. 2-byte and 9000-byte (three packets) messages; then
    # the same with --local rings, which places nothing.
    for size, local, placed in [("2", "direct", True), ("9000", "direct", True),
                                ("2", "rings", False)]:
        port = str(free_port())
        args = ["ib_write_lat", "-p", port, "-s", size, "-n", "2000"]
        (src, sout), (crc, cout) = pair(args, args + ["127.0.0.1"],
                                        run_opts=("--stats", "--local", local))
        name = f"ib_write_lat -s {size} --local {local}"
        expect(src == 0 and crc == 0 and re.search(rf"^\s*{size}\s+2000\s", cout, re.M),
               f"{name}: both exit 0 with a result", cout + sout)
        s_stats, c_stats = stats(sout), stats(cout)
        expect(s_stats is not None and c_stats is not None, f"{name}: stats lines", cout + sout)
        if s_stats and c_stats:
            packets = 1 if size == "2" else 3
            for side, mine, other in [("client", c_stats, s_stats), ("server", s_stats, c_stats)]:
                if placed:
                    # All but the warm-up writes, sent while the rings were being set up.
                    expect(mine["placed_sent"] > 1500 * packets,
                           f"{name}: the {side} placed its writes", cout + sout)
                    expect(mine["placed_sent"] == other["placed_rcvd"],
                           f"{name}: every write the {side} placed was received as placed",
                           cout + sout)
                else:
                    expect(mine["placed_sent"] == 0 and mine["placed_rcvd"] == 0,
                           f"{name}: the {side} placed nothing", cout + sout)
                expect(mine["retransmits"] == 0 and mine["placed_refused"] == 0,
                       f"{name}: no retransmissions or refusals on the {side}", cout + sout)
elif case == "multi_process":
    # Two ib_write_bw pairs and an ibv_rc_pingpong pair at once: six processes, each
    # with its own device, on one host.
    procs = []
    ports = [str(free_port()) for _ in range(3)]
    progs = [["ib_write_bw", "-p", ports[0], "-s", "65536", "-n", "500"],
             ["ib_write_bw", "-p", ports[1], "-s", "65536", "-n", "500"],
             ["ibv_rc_pingpong", "-g", "1", "-p", ports[2], "-n", "3000"]]
    for args in progs:
        procs.append(subprocess.Popen([softrdma, "run", "--", *args], stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
    for port, srv in zip(ports, procs):
        wait_listening(port, proc=srv)
    for args in progs:
        procs.append(subprocess.Popen([softrdma, "run", "--", *args, "127.0.0.1"],
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    for i, p in enumerate(procs):
        try:
            out, _ = p.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            p.kill()
            out, _ = p.communicate()
        expect(p.returncode == 0, f"process {i} ({progs[i % 3][0]}) exit {p.returncode}", out)
elif case == "qperf":
    port = str(free_port())
    srv = subprocess.Popen([softrdma, "run", "--", "qperf", "-lp", port],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    wait_listening(port, proc=srv)
    failed = False
    try:
        for test in QPERF:
            rc, out = run_one(["--", "qperf", "-lp", port, "-t", "1", "127.0.0.1", test], timeout=60)
            ok = rc == 0 and re.search(r"(bw|latency|msg_rate)\s+=\s+[\d.]+ \S+", out)
            # A negative exit code is the signal that ended the client (softrdma run execs it).
            expect(ok, f"qperf {test}: exit {rc}", out)
            failed = failed or not ok
    finally:
        srv.kill()
        sout, _ = srv.communicate()
    if failed:
        print("---- qperf server output ----\n" + sout[-3000:])
else:
    sys.exit(f"unknown case {case}")

print(f"{case}: {len(failures)} failures")
sys.exit(1 if failures else 0)
