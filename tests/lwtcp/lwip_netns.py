#!/usr/bin/env python3
"""Acceptance: softiwarp0 over lwIP on a raw backend (af_packet, af_xdp for the xdp_* cases, dpdk
(its af_packet PMD on the veth) for the dpdk_* cases;
namespace hl-b, address 10.231.2.2, which the kernel there does not hold) against softiwarp0 over
kernel TCP (namespace hl-a, 10.231.2.1) and against itself (a second lwIP device in hl-a on
10.231.2.3), on a veth pair; Debian's rping (data checked) and perftest (-R), each side as server
and client; the lwIP side's trace holds its real TCP segments, which tshark decodes with good CRCs
and softrdma lint finds clean; under --faults the data still arrives whole, and a SYN flood or bad
segments are counted and answered.

usage: lwip_netns.py SOFTRDMA TSHARK CASE [CM_RELISTEN]"""
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from testlib import (expect, expect_relisten, finish, lint_json, run_case, skip,  # noqa: E402
                     wait_for)

softrdma, tshark, case = sys.argv[1:4]
relisten_helper = sys.argv[4] if len(sys.argv) > 4 else None
NS = {"kernel": "hl-a", "lwip": "hl-b", "lwip2": "hl-a"}
ADDR = {"kernel": "10.231.2.1", "lwip": "10.231.2.2", "lwip2": "10.231.2.3"}
KERNEL_B = "10.231.2.4"  # the kernel's own address in hl-b (xdp cases): its TCP stays its own
IFACE = {"kernel": "hl-v0", "lwip": "hl-v1", "lwip2": "hl-v0"}
PORT = 18621
backend = "af_packet"
SENDER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "send_segment.py")


def netdev(side):
    if side == "kernel":
        return "udp:" + ADDR["kernel"]
    if backend == "dpdk":
        return f"dpdk:net_af_packet0,iface={IFACE[side]}@{ADDR[side]}"
    return f"{backend}:{IFACE[side]}:{ADDR[side]}"


def sh(cmd):
    return subprocess.run(cmd.split(), capture_output=True).returncode == 0


def up(kernel_b=False):
    """hl-v0 in hl-a with 10.231.2.1/24; hl-v1 in hl-b up with no IPv4 address of its own, or
    with KERNEL_B (not the lwIP side's), or with the lwIP side's own (kernel_b="shared")."""
    kernel_b_addr = ADDR["lwip"] if kernel_b == "shared" else KERNEL_B
    down()
    ok = (sh("ip netns add hl-a") and sh("ip netns add hl-b") and
          sh("ip link add hl-v0 netns hl-a type veth peer name hl-v1 netns hl-b") and
          sh("ip -n hl-a addr add 10.231.2.1/24 dev hl-v0") and
          sh("ip -n hl-a link set hl-v0 up") and sh("ip -n hl-b link set hl-v1 up") and
          sh("ip -n hl-a link set lo up") and sh("ip -n hl-b link set lo up") and
          (not kernel_b or sh(f"ip -n hl-b addr add {kernel_b_addr}/24 dev hl-v1")) and
          # DPDK's af_packet PMD takes no frame longer than an mbuf: the kernel TCP's TSO frames
          # are cut before the veth, as a NIC would cut them before the wire.
          (backend != "dpdk" or sh("ip -n hl-a link set dev hl-v0 gso_max_segs 1")))
    if not ok:
        down()
        skip("cannot create network namespaces with a veth pair here")


def down():
    for ns in ("hl-a", "hl-b"):
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def start(side, args, opts=()):
    cmd = ["ip", "netns", "exec", NS[side], softrdma, "run", "--transport", "iwarp", "--netdev",
           netdev(side), *opts, "--", *args]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def cm_listening(ns, pid):
    """Process `pid` in namespace `ns` has an rdma_cm id in the listen state (asked through
    the monitor: the lwIP side's listener is in no kernel table)."""
    r = subprocess.run(["ip", "netns", "exec", ns, softrdma, "res", "cm_id", "--json", "-p",
                        str(pid)], capture_output=True, text=True, timeout=30)
    try:
        return any(i.get("cm-state") == "listen" for i in json.loads(r.stdout))
    except ValueError:
        return False


def listening(side, proc, what):
    expect(wait_for(lambda: cm_listening(NS[side], proc.pid), 30, interval=0.1, proc=proc),
           f"{what}: server listening", "")


def pair(name, server_side, server, client, opts=(), timeout=90, both=(), client_side=None):
    """`opts` go to the lwIP sides' `softrdma run`, `both` to every side's."""
    if client_side is None:
        client_side = "lwip" if server_side == "kernel" else "kernel"
    mine = {s: (*both, *(opts if s.startswith("lwip") else ())) for s in (server_side, client_side)}
    srv = start(server_side, server, mine[server_side])
    listening(server_side, srv, name)
    cli = start(client_side, client, mine[client_side])
    crc, cout = finish(cli, timeout)
    src, sout = finish(srv, timeout)
    for out in (cout, sout):
        for why in ("this build has no DPDK backend", "EAL could not start"):
            if why in out:
                skip(f"dpdk: {why}")
    expect(crc == 0, f"{name}: client exits 0 (got {crc})", cout)
    expect(src == 0, f"{name}: server exits 0 (got {src})", sout)
    return cout, sout


def rping(server_side, opts=(), mpa="rev=2", client_side=None, count=20, size=4000, both=()):
    common = ["-a", ADDR[server_side], "-p", str(PORT), "-C", str(count), "-S", str(size), "-V"]
    cout, sout = pair(f"rping server on {server_side} ({mpa})", server_side, ["rping", "-s", *common],
                      ["rping", "-c", *common, "-v"], opts, both=("--mpa", mpa, *both),
                      client_side=client_side)
    expect(cout.count("ping data:") == count, f"rping: {count} pings verified", cout)
    return cout, sout


def perftest(tool, server_side, client_side=None):
    args = [tool, "-R", "-p", str(PORT), "-s", "65536", "-n", "200", "-F"]
    cout, sout = pair(f"{tool} server on {server_side}", server_side, args,
                      args + [ADDR[server_side]], client_side=client_side)
    expect(any(line.split()[:2] == ["65536", "200"] for line in cout.splitlines()),
           f"{tool} server on {server_side}: the client's 65536 x 200 result", cout + sout)


def with_hosts(fn, kernel_b=False):
    up(kernel_b)
    try:
        fn()
    finally:
        down()


def kernel_tcp_flow():
    """A kernel TCP connection from hl-a to hl-b's own address, echoed by hl-b's kernel: the
    XDP program leaves it to the kernel. Returns what came back."""
    echo = ("import socket\ns=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
            f"s.bind(('{KERNEL_B}', {PORT + 2})); s.listen(1); print('up', flush=True)\n"
            "c,_=s.accept(); c.sendall(c.recv(100)); c.close()")
    srv = subprocess.Popen(["ip", "netns", "exec", "hl-b", sys.executable, "-c", echo],
                           stdout=subprocess.PIPE, text=True)
    srv.stdout.readline()
    ask = (f"import socket\nc=socket.create_connection(('{KERNEL_B}', {PORT + 2}), timeout=10)\n"
           "c.sendall(b'kernel flow'); print(c.recv(100).decode())")
    r = subprocess.run(["ip", "netns", "exec", "hl-a", sys.executable, "-c", ask],
                       capture_output=True, text=True, timeout=30)
    finish(srv, 10)
    return r.stdout.strip()


def case_rping():
    def run():
        rping("lwip")
        rping("kernel")
        rping("lwip", mpa="rev=1,crc,markers")  # markers cross lwIP's segment boundaries
    with_hosts(run)


def case_perftest():
    perftest_on("af_packet")


def case_latency():
    """ib_write_lat and ib_send_lat -R of 64 KiB, each side as server: a message larger than
    lwIP's send buffer leaves in several writes, and the waits for room between them must be
    woken while the program spins on memory (ib_write_lat hung before)."""
    def run():
        for tool in ("ib_write_lat", "ib_send_lat"):
            for server_side in ("lwip", "kernel"):
                args = [tool, "-R", "-p", str(PORT), "-s", "65536", "-n", "100", "-F"]
                cout, sout = pair(f"{tool} 64 KiB server on {server_side}", server_side, args,
                                  args + [ADDR[server_side]], timeout=60)
                expect(any(line.split()[:2] == ["65536", "100"] for line in cout.splitlines()),
                       f"{tool} server on {server_side}: the client's 65536 x 100 result", cout)
    with_hosts(run)


def ucmatose(*sides):
    """ucmatose: 4 connections at once, 20 sends each way on each, for each (server, client) of
    `sides`."""
    for server_side, client_side in sides:
        common = ["-p", str(PORT), "-c", "4", "-C", "20"]
        name = f"ucmatose server on {server_side}, client on {client_side}"
        cout, sout = pair(name, server_side, ["ucmatose", "-b", ADDR[server_side], *common],
                          ["ucmatose", "-s", ADDR[server_side], *common], client_side=client_side)
        for who, out in (("client", cout), ("server", sout)):
            expect("test complete" in out and "return status 0" in out,
                   f"{name}: the {who} completes its test", out)


def case_ucmatose():
    """ucmatose, lwIP as server and as client against kernel TCP, and lwIP on both ends."""
    with_hosts(lambda: ucmatose(("lwip", "kernel"), ("kernel", "lwip"), ("lwip", "lwip2")))


def case_xdp_rping():
    global backend
    backend = "af_xdp"

    def run():
        rping("lwip")
        rping("kernel")
        rping("lwip", client_side="lwip2")  # lwIP on both ends
        rping("lwip", mpa="rev=1,crc,markers")
        ucmatose(("lwip", "kernel"), ("kernel", "lwip"), ("lwip", "lwip2"))
        # While an XDP program steers 10.231.2.2's TCP, hl-b's kernel keeps its own.
        srv = start("lwip", ["rping", "-s", "-a", ADDR["lwip"], "-p", str(PORT), "-C", "1"])
        listening("lwip", srv, "kernel flow")
        got = kernel_tcp_flow()
        cli = start("kernel", ["rping", "-c", "-a", ADDR["lwip"], "-p", str(PORT), "-C", "1"])
        finish(cli, 60)
        finish(srv, 60)
        expect(got == "kernel flow", f"a kernel TCP flow beside the XDP program ({got!r})", "")
    with_hosts(run, kernel_b=True)


def perftest_on(raw):
    """perftest -R with lwIP on `raw`, bandwidth and latency of send, write and read (64 KiB):
    against kernel TCP both ways and against itself."""
    global backend
    backend = raw

    def run():
        for tool in ("ib_send_bw", "ib_write_bw", "ib_read_bw", "ib_send_lat", "ib_write_lat",
                     "ib_read_lat"):
            perftest(tool, "lwip")
            perftest(tool, "kernel")
            perftest(tool, "lwip", client_side="lwip2")
    with_hosts(run)


def case_xdp_perftest():
    perftest_on("af_xdp")


def expect_lwip_carried(name, out):
    """`out` (a side's output with --stats) shows lwIP sending and receiving the connection."""
    c = stats(out)
    expect(c.get("tcp_rx_frames", 0) >= 20 and c.get("tcp_tx_frames", 0) >= 20,
           f"{name}: lwIP sent and received the connection's frames ({c})", out)


def case_dpdk_rping():
    """The rpings of case_rping with lwIP on a DPDK port (its af_packet PMD on the veth): against
    kernel TCP both ways, on both ends, with markers and CRC; that lwIP carried them is checked
    in its counters."""
    global backend
    backend = "dpdk"

    def run():
        for server_side, client_side, mpa in (("lwip", "kernel", "rev=2"),
                                              ("kernel", "lwip", "rev=2"),
                                              ("lwip", "lwip2", "rev=2"),
                                              ("lwip", "kernel", "rev=1,crc,markers")):
            cout, sout = rping(server_side, opts=("--stats",), mpa=mpa, client_side=client_side)
            lwip_out = sout if server_side == "lwip" else cout
            expect_lwip_carried("dpdk", lwip_out)
        ucmatose(("lwip", "kernel"), ("kernel", "lwip"), ("lwip", "lwip2"))
    with_hosts(run)


def case_dpdk_perftest():
    perftest_on("dpdk")


def case_dpdk_trace():
    global backend
    backend = "dpdk"
    traced(lint=True)


def roce_port_free(side):
    """No process left in `side`'s namespace, and UDP 4791 on its address free there (a device
    holds it while it runs; an address the namespace's kernel lacks is free by definition)."""
    if subprocess.run(["ip", "netns", "pids", NS[side]], capture_output=True,
                      text=True).stdout.strip():
        return False
    probe = ("import errno, socket, sys\n"
             f"s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
             f"try: s.bind(('{ADDR[side]}', 4791))\n"
             "except OSError as e: sys.exit(0 if e.errno == errno.EADDRNOTAVAIL else 1)")
    return subprocess.run(["ip", "netns", "exec", NS[side], sys.executable, "-c", probe],
                          capture_output=True).returncode == 0


def holders(side):
    """What still runs in `side`'s namespace and which UDP sockets it has: for a failure."""
    pids = subprocess.run(["ip", "netns", "pids", NS[side]], capture_output=True,
                          text=True).stdout.split()
    ps = subprocess.run(["ps", "-o", "pid,ppid,stat,etime,args", "-p", ",".join(pids)],
                        capture_output=True, text=True).stdout if pids else "no process\n"
    ss = subprocess.run(["ip", "netns", "exec", NS[side], "ss", "-uanp"], capture_output=True,
                        text=True).stdout
    return ps + ss


def qperf_pair(name, server_side, client_side, server_opts=(), client_opts=()):
    """qperf -cm1 rc_bw and rc_lat: the server under softrdma run on `server_side`, the client
    on `client_side`; returns both outputs, the client's first (its control connection is kernel
    TCP to the server's address)."""
    srv = start(server_side, ["qperf", "-lp", str(PORT + 3)], server_opts)
    ctl = f"import socket; socket.create_connection(('{ADDR[server_side]}', {PORT + 3}), 1)"
    expect(wait_for(lambda: subprocess.run(["ip", "netns", "exec", NS[client_side],
                                            sys.executable, "-c", ctl],
                                           capture_output=True).returncode == 0,
                    30, interval=0.2, proc=srv), f"{name}: qperf server up", "")
    cli = start(client_side, ["qperf", "-lp", str(PORT + 3), ADDR[server_side], "-cm1", "-t", "1",
                              "rc_bw", "rc_lat"], client_opts)
    crc, cout = finish(cli, 90)
    srv.send_signal(signal.SIGINT)  # qperf exits, and softrdma's counters are printed
    _, sout = finish(srv, 10)
    # The server's per-test children may outlive it by lwIP's exit linger (up to 5 s), holding
    # the address's RoCE port: the next device on that address waits for them.
    for side in (server_side, client_side):
        if not wait_for(lambda: roce_port_free(side), 30, interval=0.2):
            expect(False, f"{name}: {side}'s namespace empty and its RoCE port free",
                   holders(side))
    expect(crc == 0, f"{name}: qperf client exits 0 (got {crc})", cout)
    expect(re.search(r"bw\s+=\s+[\d.]+ [KMG]B/sec", cout) and
           re.search(r"latency\s+=\s+[\d.]+ [nmu]?s", cout),
           f"{name}: qperf's bandwidth and latency", cout)
    return cout, sout


def shared_on(raw):
    """--tcp user on `raw` on an address hl-b's kernel holds too (10.231.2.2 on hl-v1): lwIP's
    ports are held in the kernel, which drops their segments rather than resetting them, and
    every other port stays the kernel's. rping (data checked) each way; qperf -cm1 rc_bw and
    rc_lat, whose control connection is the kernel's TCP on the same address and whose RDMA
    connection is lwIP's, lwIP as server, as client and at both ends; a kernel TCP flow to the
    address echoed meanwhile."""
    global backend
    backend = raw
    user = ("--tcp", "user", "--stats")

    def run():
        for server_side in ("lwip", "kernel"):
            cout, sout = rping(server_side, opts=user)
            lwip_out = sout if server_side == "lwip" else cout
            expect_lwip_carried(f"shared, rping server on {server_side}", lwip_out)
            if raw == "af_xdp":  # the connection's segments came through the XDP program
                c = stats(lwip_out)
                expect(c.get("tcp_rx_steered", 0) >= 20,
                       f"shared on af_xdp, rping server on {server_side}: steered ({c})", lwip_out)
        _, sout = qperf_pair("shared: qperf server on lwIP", "lwip", "kernel", server_opts=user)
        cout, _ = qperf_pair("shared: qperf client on lwIP", "kernel", "lwip", client_opts=user)
        # lwIP at both ends: hl-a's kernel holds lwip2's address too.
        expect(sh(f"ip -n hl-a addr add {ADDR['lwip2']}/24 dev hl-v0"), "shared: lwip2's address",
               "")
        both_out = qperf_pair("shared: qperf, lwIP at both ends", "lwip", "lwip2", server_opts=user,
                              client_opts=user)
        # (The client's control connection leaves from hl-a's first address, not lwip2's.)
        expect_lwip_carried("shared: the lwIP-to-lwIP qperf client", both_out[0])
        for who, out in (("server", sout), ("client", cout), ("lwIP-to-lwIP server", both_out[1])):
            c = stats(out)
            # The control connection's frames reach the packet socket too, and are left to the
            # kernel (tcp_rx_kernels).
            expect(c.get("tcp_rx_frames", 0) >= 1000 and c.get("tcp_rx_kernels", 0) >= 1,
                   f"shared: the qperf {who}'s RDMA connection on lwIP, its control connection "
                   f"the kernel's ({c})", out)
        # While lwIP listens on the address, a kernel TCP flow to it is the kernel's.
        global KERNEL_B
        KERNEL_B = ADDR["lwip"]
        srv = start("lwip", ["rping", "-s", "-a", ADDR["lwip"], "-p", str(PORT), "-C", "1"], user)
        listening("lwip", srv, "shared: kernel flow")
        got = kernel_tcp_flow()
        cli = start("kernel", ["rping", "-c", "-a", ADDR["lwip"], "-p", str(PORT), "-C", "1"])
        finish(cli, 60)
        finish(srv, 60)
        expect(got == "kernel flow", f"shared: a kernel TCP flow to the same address ({got!r})",
               "")
    with_hosts(run, kernel_b="shared")


def case_shared():
    shared_on("af_packet")


def case_dpdk_shared():
    shared_on("dpdk")


def case_xdp_shared():
    shared_on("af_xdp")


def check_trace(pcap, lint):
    # Out-of-order reassembly: a segment lost on the way (a full ring under load) arrives again
    # after the ones behind it, and without it tshark frames the MPA stream wrongly from there
    # (payload bytes read as CRCs: "Bad CRC32" on FPDUs that are good).
    verbose = subprocess.run([tshark, "-n", "-r", pcap, "--disable-protocol", "rpcordma",
                              "-o", "tcp.reassemble_out_of_order:TRUE", "-V"],
                             capture_output=True, text=True).stdout
    src = "ipv6.src" if ":" in ADDR["lwip"] else "ip.src"
    syn = subprocess.run([tshark, "-n", "-r", pcap, "-Y", "tcp.flags.syn==1 && tcp.flags.ack==1",
                          "-T", "fields", "-e", src], capture_output=True, text=True).stdout
    good = verbose.count("(Good CRC32)")
    expect("Bad CRC32" not in verbose, "trace: no bad CRC", "")
    expect("Malformed" not in verbose, "trace: nothing malformed", "")
    expect(good >= 40, f"trace: good CRCs on the FPDUs ({good})", verbose[-3000:])
    expect(ADDR["lwip"] in syn, "trace: lwIP's own SYN-ACK, as sent", syn)
    expect("softrdma: dir=tx dev=softiwarp0" in verbose, "trace: annotated frames", "")
    if lint:
        code, doc, out = lint_json(softrdma, pcap)
        expect(doc is not None and code == 0 and doc.get("violation_count") == 0,
               f"trace: lint clean (exit {code})", out)
        expect(doc.get("mpa_frames", 0) >= 2 and doc.get("iwarp_fpdus", 0) >= 40,
               f"trace: lint sees the MPA frames and FPDUs ({doc.get('mpa_frames')}, "
               f"{doc.get('iwarp_fpdus')})", out)


def traced(lint):
    if not tshark:
        skip("tshark is not installed")
    pcap = os.environ.get("LWIP_TRACE_KEEP") or f"/tmp/lwip_netns_{os.getpid()}.pcapng"

    def run():
        rping("lwip", opts=("--pcap", pcap), mpa="rev=2,crc")
        check_trace(pcap, lint)
    try:
        with_hosts(run)
    finally:
        if os.path.exists(pcap) and not os.environ.get("LWIP_TRACE_KEEP"):
            os.remove(pcap)


def case_trace():
    traced(lint=False)


V6 = {"kernel": "fd42:231::1", "lwip": "fd42:231::2", "lwip2": "fd42:231::3"}


def case_ipv6():
    """IPv6 on fd42:231::/64: hl-a's kernel holds ::1 (softiwarp0 over kernel TCP), lwIP takes
    ::2 in hl-b and ::3 in hl-a, which no kernel holds (neighbour discovery is lwIP's own). On
    af_packet, af_xdp and dpdk: rping (data checked) with lwIP as server against kernel TCP, as
    client, and on both ends, lwIP's counters showing it carried each; on af_packet also
    ucmatose each way, 6 MB of rping, and a trace that tshark decodes with good CRCs and lint
    finds clean (Debian's perftest 4.5 resolves -R addresses as IPv4 only). On af_packet and
    af_xdp lwIP sends large segments over IPv6 too, cut at the link's MSS of 1440 bytes: counted,
    and the trace holds no data segment longer. Then with hl-b's
    kernel holding ::2 too, --tcp user on af_packet and af_xdp: rping each way, carried by
    lwIP."""
    global ADDR, backend
    ADDR = dict(V6)
    pcap = f"/tmp/lwip_netns_{os.getpid()}_v6.pcapng"

    def run():
        expect(sh(f"ip -n hl-a addr add {V6['kernel']}/64 dev hl-v0 nodad"),
               "ipv6: the kernel's address in hl-a", "")
        large = 0
        for server_side, client_side in (("lwip", "kernel"), ("kernel", "lwip"),
                                         ("lwip", "lwip2")):
            cout, sout = rping(server_side, opts=("--stats",), client_side=client_side, count=10,
                               size=30000)
            out = sout if server_side == "lwip" else cout
            expect_lwip_carried(f"ipv6 {backend}, server on {server_side}", out)
            large += stats(out).get("tcp_tx_large_segments", 0)
        if backend != "dpdk":
            expect(large > 0, f"ipv6 {backend}: large segments sent ({large})", "")
        if backend == "af_packet":
            ucmatose(("lwip", "kernel"), ("kernel", "lwip"))
            rping("lwip", count=100, size=60000)  # 6 MB each way, checked
            rping("lwip", opts=("--pcap", pcap), mpa="rev=2,crc", size=30000)
            check_trace(pcap, lint=True)
            out = subprocess.run([tshark, "-n", "-r", pcap, "-Y",
                                  f"ipv6.src=={V6['lwip']} && tcp.len>0", "-T", "fields", "-e",
                                  "tcp.len"], capture_output=True, text=True).stdout
            sizes = [int(x) for x in out.split()]
            expect(sizes and max(sizes) == 1440, "ipv6: lwIP's traced segments at most the MSS "
                   f"(longest {max(sizes, default=0)})", "")
    def shared():
        expect(sh(f"ip -n hl-a addr add {V6['kernel']}/64 dev hl-v0 nodad") and
               sh(f"ip -n hl-b addr add {V6['lwip']}/64 dev hl-v1 nodad"),
               "ipv6: the kernels' addresses", "")
        for server_side in ("lwip", "kernel"):
            cout, sout = rping(server_side, opts=("--tcp", "user", "--stats"), count=10)
            expect_lwip_carried(f"ipv6 shared, server on {server_side}",
                                sout if server_side == "lwip" else cout)
    try:
        for raw in ("af_packet", "af_xdp", "dpdk"):
            backend = raw
            with_hosts(run)
        for raw in ("af_packet", "af_xdp"):
            backend = raw
            with_hosts(shared)
    finally:
        if os.path.exists(pcap):
            os.remove(pcap)


def case_relisten():
    """The server takes a connection, closes its listener and listens again 50 ms later; the
    client's second connect at once meets a reset, and connects all the same (the CM tries again
    for 250 ms, as perftest -R needs across hosts: its server does this between its two
    connections, and Debian's perftest crashes on its own retry). Each side as server."""
    if not relisten_helper:
        skip("no cm_relisten helper given")

    def run():
        for server_side in ("kernel", "lwip"):
            name = f"relisten, server on {server_side}"
            srv = start(server_side, [relisten_helper, "server", ADDR[server_side], str(PORT), "50"])
            listening(server_side, srv, name)
            client_side = "lwip" if server_side == "kernel" else "kernel"
            cli = start(client_side, [relisten_helper, "client", ADDR[server_side], str(PORT)])
            crc, cout = finish(cli, 60)
            src, sout = finish(srv, 60)
            expect_relisten(name, crc, cout, src, sout)
    with_hosts(run)


def case_fresh_ports():
    """Two lwIP clients, one after the other, connect to softiwarp0 over kernel TCP: each process
    opens from a port and with an initial sequence number of its own (lwIP's, unseeded, were the
    same in every process, so the second SYN met the first connection's TIME_WAIT and drew an
    ACK where a SYN-ACK belonged), and the kernel answers each SYN with a SYN-ACK."""
    if not tshark:
        skip("tshark is not installed")
    pcaps = [f"/tmp/lwip_netns_{os.getpid()}_{i}.pcapng" for i in (0, 1)]

    def syns(pcap):
        out = subprocess.run([tshark, "-n", "-r", pcap, "-Y", "tcp.flags.syn==1 && tcp.flags.ack==0",
                              "-T", "fields", "-e", "tcp.srcport", "-e", "tcp.seq_raw"],
                             capture_output=True, text=True).stdout
        return [tuple(line.split()) for line in out.splitlines() if line.strip()]

    def answers(pcap):
        """What the kernel sent first on each connection of the trace: SYN-ACK or not."""
        out = subprocess.run([tshark, "-n", "-r", pcap, "-Y", f"ip.src=={ADDR['kernel']}",
                              "-T", "fields", "-e", "tcp.dstport", "-e", "tcp.flags.syn"],
                             capture_output=True, text=True).stdout
        first = {}
        for line in out.splitlines():
            f = line.split()
            if len(f) == 2:
                first.setdefault(f[0], f[1])
        return first

    def run():
        for pcap in pcaps:
            rping("kernel", opts=("--pcap", pcap), count=2)
        got = [syns(p) for p in pcaps]
        expect(all(got), f"fresh ports: each client's SYN traced ({got})", "")
        if all(got):
            (port0, isn0), (port1, isn1) = got[0][0], got[1][0]
            expect(port0 != port1, f"fresh ports: two processes, two ports ({port0}, {port1})", "")
            expect(isn0 != isn1, f"fresh ports: two processes, two ISNs ({isn0}, {isn1})", "")
            first = answers(pcaps[1])
            expect(first and all(v in ("1", "True") for v in first.values()),
                   f"fresh ports: the kernel answered the second client's SYN with a SYN-ACK "
                   f"({first})", "")
    try:
        with_hosts(run)
    finally:
        for p in pcaps:
            if os.path.exists(p):
                os.remove(p)


def set_offloads(side, on):
    """Transmit checksum and TCP segmentation offload of `side`'s veth on or off (SIOCETHTOOL
    ETHTOOL_STXCSUM and ETHTOOL_STSO; no ethtool here). Off, the kernel cuts a super-segment and
    completes each segment's checksum itself before the veth, as for a NIC without them
    (gso_max_segs does not: a packet socket's GSO frames carry no segment count)."""
    code = ("import ctypes, fcntl, socket, struct\n"
            "for cmd in (0x17, 0x1f):\n"
            f"    buf = ctypes.create_string_buffer(struct.pack('II', cmd, {1 if on else 0}))\n"
            f"    ifr = struct.pack('16sP', b'{IFACE[side]}', ctypes.addressof(buf))\n"
            "    fcntl.ioctl(socket.socket(), 0x8946, ifr)\n")
    r = subprocess.run(["ip", "netns", "exec", NS[side], sys.executable, "-c", code],
                       capture_output=True, text=True)
    expect(r.returncode == 0, f"offloads {'on' if on else 'off'} on {IFACE[side]}", r.stderr)


def case_offload():
    """lwIP's data segments (large ones, of up to 16 wire segments) leave af_packet (af_xdp in
    copy mode, xdp_offload, through the same packet socket) joined, for
    the link's segmentation offload: with the lwIP side's veth made to cut every super-segment
    (offloads off) the segments on the wire are, field for field, the ones its trace shows (IPv4
    IDs, sequence numbers, lengths, flags, checksums), none beyond the MSS; left whole, frames
    larger than the MTU cross the veth and the kernel's TCP takes them."""
    if not tshark:
        skip("tshark is not installed")
    tmp = f"/tmp/lwip_netns_{os.getpid()}"
    data = "tcp.len>0 && ip.src==" + ADDR["lwip"]
    fields = ["ip.id", "tcp.seq_raw", "tcp.len", "tcp.flags", "tcp.checksum", "ip.checksum"]

    def segments(pcap):
        args = [tshark, "-n", "-r", pcap, "-Y", data, "-T", "fields"]
        for f in fields:
            args += ["-e", f]
        out = subprocess.run(args, capture_output=True, text=True).stdout
        return [tuple(line.split("\t")) for line in out.splitlines() if line.strip()]

    def transfer(name, trace, wire):
        # A 64 MiB capture buffer (dumpcap's default is 2 MiB): under load the default lost a
        # run of segments now and then (dumpcap counted them as pcap drops), and the wire then
        # lacked segments the trace has.
        cap = subprocess.Popen(["ip", "netns", "exec", NS["kernel"], "dumpcap", "-q", "-B", "64",
                                "-i", IFACE["kernel"], "-f", f"tcp and src host {ADDR['lwip']}",
                                "-w", wire], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            expect(wait_for(lambda: os.path.exists(wire), 10, interval=0.1, proc=cap),
                   f"{name}: dumpcap started", "")
            # 20000 bytes: 14 segments, the pushed last one joined with the others.
            args = ["ib_write_bw", "-R", "-p", str(PORT), "-s", "20000", "-n", "300", "-F"]
            pair(name, "kernel", args, args + [ADDR["kernel"]], opts=("--pcap", trace))
            traced = segments(trace)
            expect(len(traced) > 1000, f"{name}: lwIP's data segments traced ({len(traced)})", "")
            # dumpcap writes as it goes: the capture is whole once it holds as many bytes (or it
            # ended).
            def carried(segs):
                return sum(int(x[2]) for x in segs)
            wait_for(lambda: carried(segments(wire)) >= carried(traced), 10, interval=0.2,
                     proc=cap)
        finally:
            cap.send_signal(signal.SIGINT)
            cap.wait(timeout=10)
        # dumpcap's own count of what it lost, for a failure's output.
        summary = " ".join(cap.stderr.read().decode(errors="replace").split())
        return traced, segments(wire), summary

    def run():
        set_offloads("lwip", False)
        traced, wire, summary = transfer("offload cut on the veth", f"{tmp}_t1.pcapng",
                                         f"{tmp}_w1.pcapng")
        expect(wire == traced, f"offload: the wire's {len(wire)} segments are the trace's "
               f"{len(traced)}", "first differences: " +
               str([(a, b) for a, b in zip(traced, wire) if a != b][:3]) + "\ndumpcap: " + summary)
        # lwIP's large segments (20000-byte FPDUs) are traced as the wire segments they become.
        longest = max((int(t[2]) for t in traced), default=0)
        expect(longest == 1460, f"offload: the trace's segments at most the MSS ({longest})", "")
        set_offloads("lwip", True)
        _, wire, _ = transfer("offload whole on the veth", f"{tmp}_t2.pcapng", f"{tmp}_w2.pcapng")
        big = [w for w in wire if int(w[2]) > 1460]
        expect(len(big) > 0, f"offload: super-segments crossed the veth ({len(big)} of "
               f"{len(wire)} frames above 1460 bytes of data)", "")
    try:
        with_hosts(run)
    finally:
        for n in ("t1", "w1", "t2", "w2"):
            if os.path.exists(f"{tmp}_{n}.pcapng"):
                os.remove(f"{tmp}_{n}.pcapng")


def case_rx_join():
    """Data segments that arrive one by one (from a NIC without GRO; here the kernel side's veth
    made to cut its super-segments, offloads off) join before lwIP takes them: ib_write_bw -R
    from kernel TCP into lwIP on af_xdp has lwIP count joined segments and send under a quarter
    as many frames as it receives (lwIP acknowledges every second segment it takes: about half,
    unjoined); rping of 60000 bytes the same way, every ping's data checked."""
    global backend
    backend = "af_xdp"

    def run():
        set_offloads("kernel", False)
        args = ["ib_write_bw", "-R", "-p", str(PORT), "-s", "65536", "-n", "2000", "-F"]
        _, sout = pair("rx_join: ib_write_bw into lwIP", "lwip", args, args + [ADDR["lwip"]],
                       opts=("--stats",))
        c = stats(sout)
        rx, tx = c.get("tcp_rx_frames", 0), c.get("tcp_tx_frames", 0)
        joined = c.get("tcp_rx_joined_segments", 0)
        expect(rx > 10000 and joined > rx // 2, f"rx_join: {joined} of {rx} segments joined", sout)
        expect(tx * 4 < rx, f"rx_join: {tx} frames sent for {rx} received", sout)
        _, sout = rping("lwip", opts=("--stats",), count=20, size=60000)
        joined = stats(sout).get("tcp_rx_joined_segments", 0)
        expect(joined > 0, f"rx_join: rping's segments joined ({joined})", sout)
    with_hosts(run)


def case_xdp_rx_whole():
    """Kernel TCP's super-segments reach lwIP on af_xdp whole (its XDP program runs in generic
    mode, where a veth keeps its peer's segmentation offloads and the kernel's GRO comes first):
    rping of 60000 bytes from kernel TCP, data checked, and lwIP's trace holds received data
    segments longer than the MSS (the program in native mode gets every one cut to 1448 bytes);
    then lwIP at both ends, where lwIP's own TCP GSO frames arrive whole the same way."""
    if not tshark:
        skip("tshark is not installed")
    global backend
    backend = "af_xdp"
    tmp = f"/tmp/lwip_netns_{os.getpid()}_whole"
    os.makedirs(tmp, exist_ok=True)

    def longer_than_mss(to):
        """Data segments to `to`, longer than the MSS, in the traces (one a process)."""
        found = []
        for f in os.listdir(tmp):
            out = subprocess.run([tshark, "-n", "-r", os.path.join(tmp, f), "-Y",
                                  f"ip.dst=={to} && tcp.len>1460", "-T", "fields", "-e",
                                  "tcp.len"], capture_output=True, text=True).stdout
            found += [int(x) for x in out.split()]
            os.remove(os.path.join(tmp, f))
        return found

    def run():
        trace = ("--pcap", f"{tmp}/%p.pcapng")
        rping("lwip", opts=trace, count=20, size=60000)
        big = longer_than_mss(ADDR["lwip"])
        expect(len(big) > 0, f"xdp_rx_whole: {len(big)} received segments beyond the MSS, the "
               f"longest {max(big, default=0)} bytes", "")
        rping("lwip", opts=trace, client_side="lwip2", count=20, size=60000)
        big = longer_than_mss(ADDR["lwip"])
        expect(len(big) > 0, f"xdp_rx_whole: from lwIP, {len(big)} received segments beyond "
               "the MSS", "")
    try:
        with_hosts(run)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def case_xdp_offload():
    global backend
    backend = "af_xdp"
    case_offload()


def case_xdp_trace():
    global backend
    backend = "af_xdp"
    traced(lint=True)


def stats(output):
    """The counters of the `softrdma: stats softiwarp0 tcp:` line of `output`."""
    for line in output.splitlines():
        if line.startswith("softrdma: stats softiwarp0 tcp:"):
            return {k: int(v) for k, v in (f.split("=") for f in line.split(":", 2)[2].split())}
    return {}


def send(*args):
    """send_segment.py in hl-a, from the kernel's address to the lwIP side's."""
    subprocess.run(["ip", "netns", "exec", NS["kernel"], sys.executable, SENDER, *map(str, args)],
                   check=True)


def case_bad_input():
    """Segments for no connection, a RST for none, a corrupted segment, a TCP header shorter
    than 20 bytes: lwIP answers the SYN with a reset and ignores the rest; each is counted, and
    rping still runs after them."""
    def run():
        srv = start("lwip", ["rping", "-s", "-a", ADDR["lwip"], "-p", str(PORT), "-C", "3", "-V"],
                    ("--stats",))
        listening("lwip", srv, "bad input")
        to = (ADDR["kernel"], ADDR["lwip"])
        send(*to, PORT + 1, "S", 1)  # no listener there: answered with a reset
        send(*to, PORT + 1, "R", 1)  # a reset of no connection: ignored
        send(*to, PORT, "S", 0)      # a bad checksum: dropped
        send(*to, PORT, "S", 1, 1, "short")  # a 8-byte header (data offset 2): dropped
        cli = start("kernel", ["rping", "-c", "-a", ADDR["lwip"], "-p", str(PORT), "-C", "3",
                               "-V"])
        crc, cout = finish(cli, 60)
        src, sout = finish(srv, 60)
        expect(crc == 0 and src == 0, f"bad input: rping after it (exits {crc}, {src})",
               cout + sout)
        c = stats(sout)
        expect(c.get("tcp_tx_rst", 0) >= 1, f"bad input: a reset sent ({c})", sout)
        expect(c.get("tcp_rx_rst", 0) >= 1, f"bad input: a reset received ({c})", sout)
        expect(c.get("tcp_rx_malformed", 0) >= 2, f"bad input: two malformed segments ({c})",
               sout)
    with_hosts(run)


FAULTS = "drop=0.02,reorder=0.02,duplicate=0.02,corrupt=0.01,seed={}"


def case_faults():
    """--faults on every frame lwIP sends (seeded): the TCPs under MPA recover, rping -V checks
    each ping's data, and --stats counts each kind of fault. lwIP as server and as client
    against kernel TCP on af_packet, and on both ends on af_xdp and dpdk (each side's faults
    recovered by the other's lwIP); on af_packet and af_xdp lwIP's segments are large ones, cut
    into wire segments before the faults."""
    def run():
        global backend
        counted = {}
        for i, (server_side, client_side, raw) in enumerate(
                (("lwip", "kernel", "af_packet"), ("kernel", "lwip", "af_packet"),
                 ("lwip", "lwip2", "af_xdp"), ("lwip", "lwip2", "dpdk"))):
            backend = raw
            opts = ("--faults", FAULTS.format(7 + i), "--stats")
            cout, sout = rping(server_side, opts=opts, mpa="rev=2,crc", client_side=client_side,
                               count=15, size=16000)
            for out in (cout, sout):
                for k, v in stats(out).items():
                    counted[k] = counted.get(k, 0) + v
        for k in ("dropped", "duplicated", "reordered", "corrupted"):
            expect(counted.get(f"tcp_fault_{k}", 0) > 0, f"faults: frames {k} ({counted})", "")
        # 16000-byte pings leave as large segments, cut before the faults: their wire segments
        # are lost and resent like any.
        expect(counted.get("tcp_tx_large_segments", 0) > 0,
               f"faults: large segments cut ({counted})", "")
    with_hosts(run)


def case_jumbo():
    """On an MTU 9000 link the lwIP side's SYNs offer an MSS of 8960 (lwIP is built with 1460)
    and its connections take the smaller of both offers: lwIP against kernel TCP (as server and
    as client) on af_packet, and against lwIP on af_xdp; rping checks the data, the traces show
    each lwIP side's offer and its data segments as sent above 1460 bytes and none above 8960.
    (dpdk:
    the af_packet PMD's port keeps a 1500-byte MTU.)"""
    if not tshark:
        skip("tshark is not installed")
    stem = f"/tmp/lwip_netns_{os.getpid()}_jumbo"

    def traces():
        return glob.glob(stem + "_*.pcapng")

    def fields(filt, field):
        got = []
        for pcap in traces():
            out = subprocess.run([tshark, "-n", "-r", pcap, "-Y", filt, "-T", "fields", "-e",
                                  field], capture_output=True, text=True).stdout
            got += [int(x) for x in out.split() if x.strip()]
        return got

    def clean():
        for pcap in traces():
            os.remove(pcap)

    def run():
        global backend
        for ns, iface in (("hl-a", "hl-v0"), ("hl-b", "hl-v1")):
            expect(sh(f"ip -n {ns} link set {iface} mtu 9000"), f"jumbo: {iface} at MTU 9000", "")
        for server_side, client_side, raw in (("lwip", "kernel", "af_packet"),
                                              ("kernel", "lwip", "af_packet"),
                                              ("lwip", "lwip2", "af_xdp")):
            backend = raw
            what = f"jumbo {raw}, {server_side} server, {client_side} client"
            clean()
            cout, sout = rping(server_side, opts=("--stats", "--pcap", stem + "_%p.pcapng"),
                               mpa="rev=2,crc", client_side=client_side, count=10, size=30000)
            for side, out in ((server_side, sout), (client_side, cout)):
                if not side.startswith("lwip"):
                    continue
                c = stats(out)
                expect(c.get("tcp_jumbo_connections", 0) >= 1,
                       f"{what}: {side} made a jumbo connection ({c})", out)
                mine = f"ip.src=={ADDR[side]}"
                offers = fields(f"{mine} && tcp.flags.syn==1", "tcp.options.mss_val")
                expect(offers and all(m == 8960 for m in offers),
                       f"{what}: {side} offers 8960 ({offers})", "")
                # As sent (outbound): on af_xdp the other side's trace holds them received
                # whole, as the super-segments they left as.
                sizes = fields(f"{mine} && tcp.len>0 && frame.packet_flags_direction==2",
                               "tcp.len")
                expect(sizes and max(sizes) == 8960,
                       f"{what}: {side}'s data segments up to 8960 bytes (longest "
                       f"{max(sizes, default=0)} of {len(sizes)})", "")
    try:
        with_hosts(run)
    finally:
        clean()


def case_vlan():
    """--vlan 5: lwIP's frames leave tagged and only VLAN 5's come to it. lwIP takes 10.231.5.2
    in hl-b and 10.231.5.3 in hl-a on the veths (this kernel has no 802.1Q devices, so no kernel
    TCP peer on a VLAN). rping (data checked) with lwIP at both ends on af_packet (each way),
    af_xdp and dpdk, lwIP's counters showing it carried each, in large segments on af_packet
    and af_xdp in copy mode (the tag in the super-segment the kernel segments); both traces
    show lwIP's segments tagged with VLAN 5 as on the wire, and a capture on hl-v0 shows them
    tagged and none untagged (not on af_xdp, whose program there takes them first, and only
    VLAN 5's)."""
    global ADDR, backend
    if not tshark:
        skip("tshark is not installed")
    ADDR = {"kernel": "10.231.2.1", "lwip": "10.231.5.2", "lwip2": "10.231.5.3"}
    tmp = f"/tmp/lwip_netns_{os.getpid()}_vlan"

    def count(pcap, filt):
        out = subprocess.run([tshark, "-n", "-r", pcap, "-Y", filt, "-T", "fields", "-e",
                              "frame.number"], capture_output=True, text=True).stdout
        return len(out.split())

    def run():
        global backend
        for server_side, client_side, raw in (("lwip", "lwip2", "af_packet"),
                                              ("lwip2", "lwip", "af_packet"),
                                              ("lwip", "lwip2", "af_xdp"),
                                              ("lwip", "lwip2", "dpdk")):
            backend = raw
            what = f"vlan {raw}, {server_side} server, {client_side} client"
            trace, wire = f"{tmp}_t.pcapng", f"{tmp}_w.pcapng"
            # On the peer's end of the veth: a packet socket's own sends bypass the taps.
            cap = subprocess.Popen(["ip", "netns", "exec", NS["lwip2"], "dumpcap", "-q", "-i",
                                    IFACE["lwip2"], "-w", wire],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            try:
                expect(wait_for(lambda: os.path.exists(wire), 10, interval=0.1, proc=cap),
                       f"{what}: dumpcap started", "")
                cout, sout = rping(server_side, opts=("--vlan", "5", "--stats", "--pcap",
                                                      trace.replace("_t.", "_t_%p.")),
                                   client_side=client_side, count=10, size=30000)
                time.sleep(0.5)
            finally:
                cap.send_signal(signal.SIGINT)
                cap.wait(timeout=10)
            expect_lwip_carried(what, sout)
            expect_lwip_carried(what, cout)
            large = sum(stats(o).get("tcp_tx_large_segments", 0) for o in (sout, cout))
            if raw != "dpdk":  # (no large segments there)
                expect(large > 0, f"{what}: large segments sent ({large})", "")
            mine = f"ip.src=={ADDR['lwip']} && tcp"
            traces = glob.glob(f"{tmp}_t_*.pcapng")
            expect(len(traces) == 2, f"{what}: two traces ({traces})", "")
            for t in traces:
                tagged, all_ = count(t, f"{mine} && vlan.id==5"), count(t, mine)
                os.remove(t)
                expect(all_ >= 20 and tagged == all_, f"{what}: the trace's segments from "
                       f"{ADDR['lwip']} tagged ({tagged} of {all_})", "")
            if raw == "af_xdp":
                continue  # the peer's XDP program takes the frames before any tap sees them
            tagged, untagged = count(wire, f"{mine} && vlan.id==5"), count(wire, f"{mine} && !vlan")
            expect(tagged >= 20 and untagged == 0, f"{what}: on the wire {tagged} tagged segments "
                   f"from lwIP, {untagged} untagged", "")
    try:
        with_hosts(run)
    finally:
        for f in glob.glob(tmp + "*"):
            os.remove(f)


def case_syn_flood():
    """2000 SYNs to the listener from an address nobody answers for (half-open connections lwIP
    keeps, 256 at most: the oldest go for newer ones), 200 to a port nobody listens on (each
    answered with a reset), then an rping that must still connect and verify its data; the SYNs,
    resets and pushed-out connections are counted."""
    def run():
        srv = start("lwip", ["rping", "-s", "-a", ADDR["lwip"], "-p", str(PORT), "-C", "3", "-V"],
                    ("--stats",))
        listening("lwip", srv, "syn flood")
        send("10.231.2.99", ADDR["lwip"], PORT, "S", 1, 2000)
        send(ADDR["kernel"], ADDR["lwip"], PORT + 1, "S", 1, 200)
        cli = start("kernel", ["rping", "-c", "-a", ADDR["lwip"], "-p", str(PORT), "-C", "3",
                               "-V", "-v"])
        crc, cout = finish(cli, 120)
        src, sout = finish(srv, 120)
        expect(crc == 0 and src == 0, f"syn flood: rping after it (exits {crc}, {src})",
               cout + sout)
        expect(cout.count("ping data:") == 3, "syn flood: 3 pings verified", cout)
        c = stats(sout)
        # Each SYN counted: taken by lwIP, or lost for want of room in the ring (a flood).
        seen = c.get("tcp_rx_syn", 0) + c.get("tcp_ring_dropped", 0)
        expect(seen >= 2201, f"syn flood: the SYNs counted ({c})", sout)
        expect(c.get("tcp_tx_rst", 0) >= 200, f"syn flood: a reset for each closed port ({c})",
               sout)
        peak = c.get("tcp_half_open_peak", 0)
        taken = 2000 - c.get("tcp_ring_dropped", 0)  # those lwIP saw (a flood can fill the ring)
        expect(min(256, taken) - 56 <= peak <= 256,
               f"syn flood: at most 256 half-open connections ({c})", sout)
        expect(c.get("tcp_syn_evicted", 0) >= taken - 256,
               f"syn flood: the oldest pushed out for each request beyond them ({c})", sout)
    with_hosts(run)


def case_no_lwip():
    """lwIP is loaded at run time: neither softrdma nor the libraries beside it NEED liblwip,
    and with the library hidden (/dev/null bound over it in a mount namespace of the test's
    own) softiwarp0 on a raw backend says what it needs, and the program fails."""
    libdir = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(softrdma))), "lib")
    for f in [softrdma] + [os.path.join(libdir, n) for n in ("libibverbs.so", "librdmacm.so")]:
        d = subprocess.run(["readelf", "-d", f], capture_output=True, text=True)
        expect(d.returncode == 0 and "NEEDED" in d.stdout, f"readelf -d {f}", d.stderr)
        needed = [l for l in d.stdout.splitlines() if "(NEEDED)" in l]
        expect(not any("liblwip" in l for l in needed), f"{f} does not NEED liblwip", d.stdout)
    found = [l.split("=>")[-1].strip() for l in subprocess.run(
        ["ldconfig", "-p"], capture_output=True, text=True).stdout.splitlines()
        if "liblwip.so.0 " in l]
    if not found:
        skip("liblwip.so.0 is not installed")
    lib = os.path.realpath(found[0])

    def run():
        cmd = (f"mount --bind /dev/null {lib} && exec ip netns exec {NS['lwip']} {softrdma} run "
               f"--transport iwarp --netdev {netdev('lwip')} -- rping -s -a {ADDR['lwip']} "
               f"-p {PORT} -C 1")
        p = subprocess.Popen(["unshare", "-m", "sh", "-c", cmd], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
        rc, out = finish(p, 60)
        expect(rc not in (0, None), f"no lwIP: the program fails (exit {rc})", out)
        expect("userspace TCP needs liblwip.so.0" in out, "no lwIP: a message saying so", out)
    with_hosts(run)


def case_lwip_checksum():
    """lwIP's checksum routine is softrdma's (lwtcp/lwip_loader.cpp): in a program linked with
    libibverbs, the dynamic linker binds lwIP's calls of lwip_standard_chksum to the definition
    libibverbs.so.1 exports (LD_DEBUG=bindings); and what lwIP sums with it is right both ways
    (rping -V against kernel TCP, whose checks would drop a bad checksum)."""
    def run():
        log = f"/tmp/lwip_netns_{os.getpid()}_ld"
        env = dict(os.environ, LD_DEBUG="bindings", LD_DEBUG_OUTPUT=log)
        r = subprocess.run(["ip", "netns", "exec", NS["lwip"], softrdma, "run", "--transport",
                            "iwarp", "--netdev", netdev("lwip"), "--", "ibv_devinfo"],
                           capture_output=True, text=True, env=env, timeout=60)
        bindings = ""
        for f in os.listdir("/tmp"):
            if f.startswith(os.path.basename(log) + "."):
                with open(os.path.join("/tmp", f), errors="replace") as fh:
                    bindings += "".join(l for l in fh if "lwip_standard_chksum" in l)
                os.remove(os.path.join("/tmp", f))
        expect(r.returncode == 0, "lwip_checksum: ibv_devinfo on softiwarp0 over lwIP",
               r.stdout + r.stderr)
        expect(re.search(r"binding file \S*liblwip\.so\S* \[0\] to \S*libibverbs\.so\.1 "
                         r"\[0\]: normal symbol `lwip_standard_chksum'", bindings),
               "lwip_checksum: lwIP's checksum calls bound to libibverbs.so.1", bindings)
        rping("lwip", count=10, size=30000)
        rping("kernel", count=10, size=30000)
    with_hosts(run)


if os.geteuid() != 0:
    skip("needs root for network namespaces and packet sockets")
for tool in ("rping", "ib_send_bw"):
    if subprocess.run(["which", tool], capture_output=True).returncode != 0:
        skip(f"{tool} is not installed")
run_case(globals(), case)
