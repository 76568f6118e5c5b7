#!/usr/bin/env python3
"""Acceptance: unmodified Debian rdma_cm programs over softrdma's librdmacm.so.1.

usage: programs.py SOFTRDMA TSHARK CASE [CM_RELISTEN]
Each CASE runs servers and clients on this host through `softrdma run` and checks exit
codes and what they print (and, for `trace`, what tshark and `softrdma lint` make of the
capture)."""
import os
import random
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from testlib import (expect, expect_relisten, finish, in_netns, low_port as port,  # noqa: E402
                     rdma_cm_listening, run_case, skip, tcp_listening, wait_connected,
                     wait_for)

softrdma, tshark, case = sys.argv[1:4]
relisten_helper = sys.argv[4] if len(sys.argv) > 4 else None  # tests/lwtcp/cm_relisten.c


# Options every `softrdma run` of the case gets (the iWARP cases set the transport).
BASE_OPTS = []


def start(args, run_opts=()):
    return subprocess.Popen([softrdma, "run", *BASE_OPTS, *run_opts, "--", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def wait_tcp(port, timeout=15):
    """Waits until a kernel TCP socket listens on `port` (qperf's own control port)."""
    return wait_for(lambda: tcp_listening(port), timeout, interval=0.05)


def wait_bound(port, timeout=15):
    """Waits until some process listens on rdma_cm port `port`: over iWARP a real TCP socket;
    over RoCE an entry of softrdma's registry of bound ports, or a kernel TCP listener
    (rstream -T s)."""
    if "iwarp" in BASE_OPTS or "softiwarp0" in BASE_OPTS:
        return wait_tcp(port, timeout)
    return wait_for(lambda: tcp_listening(port) or rdma_cm_listening(port), timeout,
                    interval=0.05)


def pair(name, server, client, patterns=(), client_patterns=(), timeout=90, run_opts=(),
         port=None, ready=None):
    """Runs `server`, then `client` once the server is ready (`ready()` holds, or it listens
    on rdma_cm `port`); checks both."""
    srv = start(server, run_opts)
    if ready is not None:
        wait_for(ready, 15, interval=0.05, proc=srv)
    elif port is not None:
        wait_bound(port)
    cli = start(client, run_opts)
    crc, cout = finish(cli, timeout)
    src, sout = finish(srv, timeout)
    expect(src == 0, f"{name}: server exit {src}", sout)
    expect(crc == 0, f"{name}: client exit {crc}", cout)
    for p in patterns:
        expect(re.search(p, sout), f"{name}: server output lacks /{p}/", sout)
        expect(re.search(p, cout), f"{name}: client output lacks /{p}/", cout)
    for p in client_patterns:
        expect(re.search(p, cout), f"{name}: client output lacks /{p}/", cout)
    return sout, cout


def rping(name, extra=(), count=10, run_opts=(), size=None):
    p = str(port())
    args = ["-a", "127.0.0.1", "-p", p, "-C", str(count), *extra]
    if size:
        args += ["-S", str(size)]
    pair(name, ["rping", "-s", *args], ["rping", "-c", "-v", *args],
         client_patterns=[rf"rdma-ping-{count - 1}:"], run_opts=run_opts, port=p)


def case_rping():
    rping("rping", count=20)


def case_rping_sizes():
    for size in (23, 4096, 65535):
        rping(f"rping -S {size}", count=5, size=size)


def case_rping_self_qp():
    rping("rping -q", extra=["-q"], count=10)


def case_ucmatose():
    p = str(port())
    pair("ucmatose", ["ucmatose", "-p", p, "-c", "4", "-C", "20"],
         ["ucmatose", "-p", p, "-s", "127.0.0.1", "-c", "4", "-C", "20"], port=p,
         patterns=[r"test complete", r"return status 0"])


def case_udaddy():
    pair("udaddy", ["udaddy", "-c", "2"], ["udaddy", "-s", "127.0.0.1", "-c", "2"], port=7174,
         patterns=[r"test complete", r"return status 0"])


def case_rdma_server_client():
    p = str(port())
    pair("rdma_server", ["rdma_server", "-p", p], ["rdma_client", "-s", "127.0.0.1", "-p", p],
         patterns=[r": end 0"], port=p)
    p = str(port())
    pair("rdma_xserver", ["rdma_xserver", "-p", p],
         ["rdma_xclient", "-s", "127.0.0.1", "-p", p], patterns=[r": end 0"], port=p)


def case_rdma_xserver_xrc():
    """rdma_xserver/rdma_xclient -c x: XRC through rdma_cm. The REQ offers XRC (transport
    service type 3, extended type 1), the server's XRC target QP and XRC SRQ take the client's
    XRC SEND (opcode 164), whose SRQ number came in the REP's private data."""
    if not tshark:
        skip("no tshark")
    with tempfile.TemporaryDirectory() as d:
        pcaps = [os.path.join(d, "s.pcapng"), os.path.join(d, "c.pcapng")]
        p = str(port())
        srv = start(["rdma_xserver", "-c", "x", "-p", p], run_opts=["--pcap", pcaps[0]])
        expect(wait_bound(p), "rdma_xserver -c x: server up")
        cli = start(["rdma_xclient", "-c", "x", "-s", "127.0.0.1", "-p", p],
                    run_opts=["--pcap", pcaps[1]])
        crc, cout = finish(cli)
        src, sout = finish(srv)
        expect(crc == 0 and src == 0 and ": end 0" in cout and ": end 0" in sout,
               "rdma_xserver/rdma_xclient -c x", cout + sout)
        for f in pcaps:
            r = subprocess.run([tshark, "-r", f, "-T", "fields", "-e", "infiniband.bth.opcode",
                                "-e", "infiniband.cm.req.transpsvctype",
                                "-e", "infiniband.cm.req.ext_transport"],
                               capture_output=True, text=True, timeout=60)
            rows = [line.split("\t") for line in r.stdout.splitlines()]
            name = os.path.basename(f)
            req = {(int(row[1], 0), int(row[2], 0)) for row in rows if len(row) > 2 and row[1]}
            expect(req == {(3, 1)}, f"rdma_xserver {name}: the REQ offers XRC: {req}", r.stdout)
            sends = [row for row in rows if row[0] and int(row[0], 0) == 164]
            expect(len(sends) == 1, f"rdma_xserver {name}: one XRC SEND Only", r.stdout)
            lint = subprocess.run([softrdma, "lint", f], capture_output=True, text=True)
            expect(lint.returncode == 0, f"rdma_xserver {name}: lint", lint.stdout)


def case_mckey():
    grp = f"239.{random.randint(1, 254)}.{random.randint(1, 254)}.7"
    # Multicast is unreliable: what the sender sends before the receiver has joined is lost and
    # the receiver waits for it forever, so the sender starts once the receiver's device has
    # joined the group on its UDP socket (/proc/net/igmp lists it).
    # Line-buffered (stdbuf), so that a run that hangs shows how far it got.
    pair("mckey", ["stdbuf", "-oL", "mckey", "-m", grp, "-C", "10"],
         ["stdbuf", "-oL", "mckey", "-m", grp, "-s", "-C", "10"],
         patterns=[r"joined dgid: ::ffff:" + re.escape(grp), r"return status 0"],
         ready=lambda: igmp_joined(grp))


def igmp_joined(group):
    """True when some socket of this host has joined IPv4 multicast `group`."""
    want = "%08X" % int.from_bytes(socket.inet_aton(group), "little")
    with open("/proc/net/igmp") as f:
        return any(line.split()[0] == want for line in f if line.startswith("\t\t"))


def case_perftest():
    # Bandwidth tests print their figures on both sides, latency tests on the client.
    for prog, args in (("ib_send_bw", ["-n", "500"]), ("ib_write_bw", ["-n", "500"]),
                       ("ib_read_lat", ["-n", "500"])):
        p = str(port())
        both, client = ([r"#bytes"], []) if "bw" in prog else ([], [r"#bytes.*t_avg"])
        pair(f"{prog} -R", [prog, "-R", "-p", p, *args],
             [prog, "-R", "-p", p, *args, "127.0.0.1"], patterns=both, client_patterns=client,
             port=p)


def case_qperf():
    p = str(port())
    srv = start(["qperf", "-lp", p])
    expect(wait_tcp(p), "qperf server up")
    cli = start(["qperf", "-lp", p, "127.0.0.1", "-cm1", "-t", "1", "rc_bw", "rc_lat"])
    crc, cout = finish(cli, 60)
    srv.send_signal(signal.SIGTERM)
    finish(srv, 10)
    expect(crc == 0, f"qperf -cm1: client exit {crc}", cout)
    expect(re.search(r"rc_bw:\s+bw\s+=\s+[\d.]+ [KMG]B/sec", cout), "qperf rc_bw figure", cout)
    expect(re.search(r"rc_lat:\s+latency\s+=\s+[\d.]+ [nmu]?s", cout), "qperf rc_lat figure", cout)


def case_rsockets():
    # rstream (stream sockets: latency and bandwidth at every size, blocking, async with
    # rpoll, non-blocking, rdma_cm resolution, data verification; -T s is the same test over
    # kernel TCP sockets, for comparison) and riostream (riomap + riowrite).
    for prog, args, check in (("rstream", [], r"1m_bw"),
                              ("rstream", ["-T", "a", "-S", "65536", "-C", "300"], r"custom"),
                              ("rstream", ["-T", "v", "-S", "100000", "-C", "50"], r"custom"),
                              ("rstream", ["-T", "n", "-S", "4096", "-C", "200"], r"custom"),
                              ("rstream", ["-T", "r", "-S", "4096", "-C", "200"], r"custom"),
                              ("rstream", ["-T", "s", "-S", "65536", "-C", "200"], r"custom"),
                              ("riostream", ["-S", "65536", "-C", "300"], r"custom"),
                              ("riostream", ["-T", "v", "-S", "4096", "-C", "100"], r"custom")):
        p = str(port())
        pair(f"{prog} {' '.join(args)}", [prog, "-p", p, *args],
             [prog, "-s", "127.0.0.1", "-p", p, *args], patterns=[check], port=p,
             timeout=270 if os.environ.get("SOFTRDMA_SANITIZED") else 90)


def case_no_listener():
    p = str(port())
    t0 = time.monotonic()
    r = subprocess.run([softrdma, "run", "--", "rping", "-c", "-a", "127.0.0.1", "-p", p, "-C", "1"],
                       capture_output=True, text=True, timeout=30)
    out = r.stdout + r.stderr
    expect(r.returncode != 0, "rping to nobody: should fail", out)
    expect("RDMA_CM_EVENT_REJECTED, error 8" in out, "rping to nobody: REJECTED (8)", out)
    expect(time.monotonic() - t0 < 10, "rping to nobody: bounded time", out)


def case_peer_killed():
    for victim in ("client", "server"):
        p = str(port())
        args = ["-a", "127.0.0.1", "-p", p, "-C", "100000000"]
        srv = start(["rping", "-s", *args])
        expect(wait_bound(p), "peer_killed: server up")
        cli = start(["rping", "-c", *args])
        expect(wait_connected(softrdma, [srv.pid, cli.pid]), "peer_killed: connected")
        dead, survivor = (cli, srv) if victim == "client" else (srv, cli)
        # `softrdma run` execs the program, so the pid is the program's.
        os.kill(dead.pid, signal.SIGKILL)
        finish(dead, 10)
        rc, out = finish(survivor, 15)
        expect(rc is not None, f"{victim} killed: the survivor hangs", out)
        expect("DISCONNECT EVENT" in out, f"{victim} killed: survivor got no DISCONNECTED", out)


def case_multi_listen():
    # Two servers on two ports of one address at once, a client for each, concurrently.
    p1, p2 = str(port()), str(port() + 1)
    s1 = start(["rping", "-s", "-a", "127.0.0.1", "-p", p1, "-C", "30"])
    s2 = start(["rping", "-s", "-a", "127.0.0.1", "-p", p2, "-C", "30"])
    expect(wait_bound(p1) and wait_bound(p2), "multi_listen: servers up")
    c1 = start(["rping", "-c", "-v", "-a", "127.0.0.1", "-p", p1, "-C", "30"])
    c2 = start(["rping", "-c", "-v", "-a", "127.0.0.1", "-p", p2, "-C", "30"])
    for name, proc in (("client 1", c1), ("client 2", c2), ("server 1", s1), ("server 2", s2)):
        rc, out = finish(proc, 60)
        expect(rc == 0, f"multi_listen: {name} exit {rc}", out)
        if name.startswith("client"):
            expect("rdma-ping-29:" in out, f"multi_listen: {name} pings", out)
    # The same port twice: the second server is refused.
    p = str(port())
    s1 = start(["rping", "-s", "-a", "127.0.0.1", "-p", p, "-C", "1"])
    expect(wait_bound(p), "multi_listen: server up")
    r = subprocess.run([softrdma, "run", "--", "rping", "-s", "-a", "0.0.0.0", "-p", p, "-C", "1"],
                       capture_output=True, text=True, timeout=30)
    expect(r.returncode != 0 and "Address already in use" in r.stdout + r.stderr,
           "a second listener on a taken port is refused", r.stdout + r.stderr)
    c = subprocess.run([softrdma, "run", "--", "rping", "-c", "-a", "127.0.0.1", "-p", p, "-C", "1"],
                       capture_output=True, text=True, timeout=30)
    expect(c.returncode == 0, "the first listener still serves", c.stdout + c.stderr)
    finish(s1, 30)


def case_faults():
    rping("rping drop=0.05", count=30, run_opts=["--faults", "drop=0.05,seed=11"])


def case_trace():
    with tempfile.TemporaryDirectory() as d:
        srv_pcap, cli_pcap = os.path.join(d, "s.pcapng"), os.path.join(d, "c.pcapng")
        p = str(port())
        args = ["-a", "127.0.0.1", "-p", p, "-C", "3"]
        srv = start(["rping", "-s", *args], run_opts=["--pcap", srv_pcap])
        expect(wait_bound(p), "trace: server up")
        cli = start(["rping", "-c", *args], run_opts=["--pcap", cli_pcap])
        crc, cout = finish(cli)
        src, sout = finish(srv)
        expect(crc == 0 and src == 0, "trace: rping", cout + sout)
        # The client exits right after its DREQ: the DREP is in the server's trace only.
        both = ("ConnectRequest", "ConnectReply", "ReadyToUse", "DisconnectRequest")
        for f, msgs in ((cli_pcap, both), (srv_pcap, both + ("DisconnectReply",))):
            r = subprocess.run([tshark, "-r", f], capture_output=True, text=True)
            for msg in msgs:
                expect(f"CM: {msg}" in r.stdout, f"trace {os.path.basename(f)}: no CM {msg}",
                       r.stdout)
            v = subprocess.run([tshark, "-r", f, "-V"], capture_output=True, text=True)
            expect("Malformed" not in v.stdout and "IP CM ServiceID" in v.stdout and
                   "Local Communication ID" in v.stdout,
                   f"trace {os.path.basename(f)}: CM decodes cleanly", v.stdout[-2000:])
            lint = subprocess.run([softrdma, "lint", f], capture_output=True, text=True)
            expect(lint.returncode == 0, f"trace {os.path.basename(f)}: lint", lint.stdout)


def case_partition():
    """rdma_cm on a partition of its own (--pkeys 0x8001,0xffff: index 0 is 0x8001): every
    packet, the CM MADs on QP1 included, carries P_Key 0x8001 and the REQ names it; a limited
    member (0x0001) connects to a full one; a peer without the partition drops the request and
    the client fails, saying so, instead of hanging."""
    if not tshark:
        skip("no tshark")
    opts = ["--pkeys", "0x8001,0xffff"]
    with tempfile.TemporaryDirectory() as d:
        pcaps = [os.path.join(d, "s.pcapng"), os.path.join(d, "c.pcapng")]
        p = str(port())
        args = ["-a", "127.0.0.1", "-p", p, "-C", "5"]
        srv = start(["rping", "-s", *args], run_opts=[*opts, "--pcap", pcaps[0]])
        expect(wait_bound(p), "partition: server up")
        cli = start(["rping", "-c", "-v", *args], run_opts=[*opts, "--pcap", pcaps[1]])
        crc, cout = finish(cli)
        src, sout = finish(srv)
        expect(crc == 0 and src == 0 and "rdma-ping-4:" in cout,
               "partition: rping on partition 0x8001", cout + sout)
        for f in pcaps:
            r = subprocess.run([tshark, "-r", f, "-T", "fields", "-e", "infiniband.bth.destqp",
                                "-e", "infiniband.bth.p_key", "-e", "infiniband.cm.req.pkey"],
                               capture_output=True, text=True, timeout=60)
            rows = [line.split("\t") for line in r.stdout.splitlines()]
            keys = {int(k, 0) for _, k, *_ in rows if k}
            cm = [row for row in rows if int(row[0], 0) == 1]
            req = {int(row[2], 0) for row in rows if len(row) > 2 and row[2]}
            name = os.path.basename(f)
            expect(keys == {0x8001}, f"partition {name}: every packet carries 0x8001: {keys}",
                   r.stdout)
            expect(len(cm) >= 3 and len(rows) > len(cm), f"partition {name}: CM MADs and data",
                   r.stdout)
            expect(req == {0x8001}, f"partition {name}: the REQ names partition 0x8001: {req}",
                   r.stdout)
            lint = subprocess.run([softrdma, "lint", f], capture_output=True, text=True)
            expect(lint.returncode == 0, f"partition {name}: lint", lint.stdout)
    # A limited member of the partition (0x0001) and a full one (0x8001) match.
    p = str(port())
    args = ["-a", "127.0.0.1", "-p", p, "-C", "5"]
    srv = start(["rping", "-s", *args], run_opts=["--pkeys", "0x0001,0xffff"])
    expect(wait_bound(p), "partition: limited server up")
    cli = start(["rping", "-c", "-v", *args], run_opts=opts)
    crc, cout = finish(cli)
    src, sout = finish(srv)
    expect(crc == 0 and src == 0 and "rdma-ping-4:" in cout,
           "partition: a full member connects to a limited one", cout + sout)
    # No common partition: the server drops the CM MADs, the client fails in bounded time.
    p = str(port())
    args = ["-a", "127.0.0.1", "-p", p, "-C", "5"]
    srv = start(["rping", "-s", *args], run_opts=["--pkeys", "0x8002,0xffff"])
    expect(wait_bound(p), "partition: other server up")
    cli = start(["rping", "-c", "-v", *args], run_opts=opts)
    crc, cout = finish(cli, timeout=60)
    srv.kill()
    finish(srv)
    expect(crc not in (0, None), f"partition: a client of another partition fails ({crc})", cout)
    expect("no answer to the connection request on partition 0x8001" in cout and
           "RDMA_CM_EVENT_UNREACHABLE" in cout, "partition: the client says why", cout)


def case_rping_ipv6():
    p = str(port())
    args = ["-a", "::1", "-p", p, "-C", "5"]
    pair("rping ::1", ["rping", "-s", *args], ["rping", "-c", "-v", *args],
         client_patterns=[r"rdma-ping-4:"], port=p)


def sh(cmd):
    return subprocess.run(cmd, shell=True, capture_output=True, text=True).returncode == 0


def case_namespaces():
    """Two hosts: network namespaces joined by a veth pair, a device on each side's address.
    Also: a peer that does not exist on the link is UNREACHABLE in bounded time."""
    a, b = f"srcm{os.getpid()}a", f"srcm{os.getpid()}b"
    addr_a, addr_b = "10.96.0.1", "10.96.0.2"
    try:
        ok = (sh(f"ip netns add {a}") and sh(f"ip netns add {b}") and
              sh(f"ip link add veth0 netns {a} type veth peer name veth1 netns {b}") and
              sh(f"ip -n {a} addr add {addr_a}/24 dev veth0") and
              sh(f"ip -n {b} addr add {addr_b}/24 dev veth1") and
              sh(f"ip -n {a} link set veth0 up") and sh(f"ip -n {b} link set veth1 up") and
              sh(f"ip -n {a} link set lo up") and sh(f"ip -n {b} link set lo up"))
        if not ok:
            skip("cannot create network namespaces with a veth pair here")
        def rping_across(what, run_opts=()):
            p = str(port())
            srv = subprocess.Popen(["ip", "netns", "exec", a, softrdma, "run", "--netdev",
                                    f"udp:{addr_a}", *run_opts, "--", "rping", "-s", "-a",
                                    addr_a, "-p", p, "-C", "10"], stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True)
            expect(wait_for(lambda: in_netns(a, "rdma_cm_listening", p), 15, interval=0.1,
                            proc=srv), f"{what}: server up")
            cli = subprocess.run(["ip", "netns", "exec", b, softrdma, "run", "--netdev",
                                  f"udp:{addr_b}", *run_opts, "--", "rping", "-c", "-v", "-a",
                                  addr_a, "-p", p, "-C", "10"], capture_output=True, text=True,
                                 timeout=60)
            src, sout = finish(srv, 30)
            expect(cli.returncode == 0 and "rdma-ping-9:" in cli.stdout,
                   f"{what}: client exit {cli.returncode}", cli.stdout + cli.stderr)
            expect(src == 0, f"{what}: server exit {src}", sout)
            return p

        p = rping_across("namespaces")
        if relisten_helper:
            # perftest -R's pattern across hosts: the server closes its listener for 50 ms
            # between two connects; the REQ that meets no listener (REJ 8) goes again until it
            # finds the new one.
            pr = str(port())
            srv = subprocess.Popen(["ip", "netns", "exec", a, softrdma, "run", "--netdev",
                                    f"udp:{addr_a}", "--", relisten_helper, "server", addr_a, pr,
                                    "50"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   text=True)
            expect(wait_for(lambda: in_netns(a, "rdma_cm_listening", pr), 15, interval=0.1,
                            proc=srv), "namespaces, relisten: server up")
            cli = subprocess.run(["ip", "netns", "exec", b, softrdma, "run", "--netdev",
                                  f"udp:{addr_b}", "--", relisten_helper, "client", addr_a, pr],
                                 capture_output=True, text=True, timeout=60)
            src, sout = finish(srv, 30)
            expect_relisten("namespaces, relisten", cli.returncode, cli.stdout, src, sout,
                            cli.stderr)
        # The same two hosts on a partition of their own (index 0 is 0x8001 on both).
        rping_across("namespaces, partition 0x8001", ["--pkeys", "0x8001,0xffff"])
        # XRC through rdma_cm between the two hosts.
        px = str(port())
        srv = subprocess.Popen(["ip", "netns", "exec", a, softrdma, "run", "--netdev",
                                f"udp:{addr_a}", "--", "rdma_xserver", "-c", "x", "-p", px],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        expect(wait_for(lambda: in_netns(a, "rdma_cm_listening", px), 15, interval=0.1,
                        proc=srv), "namespaces, XRC: server up")
        cli = subprocess.run(["ip", "netns", "exec", b, softrdma, "run", "--netdev",
                              f"udp:{addr_b}", "--", "rdma_xclient", "-c", "x", "-s", addr_a,
                              "-p", px], capture_output=True, text=True, timeout=60)
        src, sout = finish(srv, 30)
        expect(cli.returncode == 0 and ": end 0" in cli.stdout and ": end 0" in sout,
               "namespaces: rdma_xclient -c x to rdma_xserver -c x", cli.stdout + sout)
        t0 = time.monotonic()
        r = subprocess.run(["ip", "netns", "exec", b, softrdma, "run", "--netdev",
                            f"udp:{addr_b}", "--", "rping", "-c", "-a", "10.96.0.3", "-p", p,
                            "-C", "1"], capture_output=True, text=True, timeout=60)
        out = r.stdout + r.stderr
        expect(r.returncode != 0 and "RDMA_CM_EVENT_UNREACHABLE" in out,
               "namespaces: nobody at the address: UNREACHABLE", out)
        expect(time.monotonic() - t0 < 15, "namespaces: UNREACHABLE in bounded time", out)
    finally:
        sh(f"ip netns del {a}")
        sh(f"ip netns del {b}")


# ---- iWARP (softiwarp0 through `--transport iwarp`): label iwarp

MPA_MATRIX = ["rev=2", "rev=1", "rev=2,crc", "rev=1,crc", "rev=2,markers", "rev=1,markers",
              "rev=2,crc,markers", "rev=1,crc,markers"]


def iwarp(mpa="rev=2"):
    BASE_OPTS[:] = ["--transport", "iwarp", "--mpa", mpa]


def case_iwarp_rping():
    for mpa in MPA_MATRIX:
        iwarp(mpa)
        rping(f"iwarp rping {mpa}", count=10, size=4096)


def case_iwarp_programs():
    for mpa in ("rev=2", "rev=1,crc,markers"):
        iwarp(mpa)
        p = str(port())
        pair(f"iwarp ucmatose {mpa}", ["ucmatose", "-p", p, "-c", "2", "-C", "10"],
             ["ucmatose", "-p", p, "-s", "127.0.0.1", "-c", "2", "-C", "10"], port=p,
             patterns=[r"test complete", r"return status 0"])
        p = str(port())
        pair(f"iwarp rdma_server {mpa}", ["rdma_server", "-p", p],
             ["rdma_client", "-s", "127.0.0.1", "-p", p], patterns=[r": end 0"], port=p)


def case_iwarp_perftest():
    for mpa in ("rev=2", "rev=1,crc,markers"):
        iwarp(mpa)
        for prog in ("ib_send_bw", "ib_write_bw", "ib_read_bw", "ib_send_lat", "ib_write_lat",
                     "ib_read_lat"):
            p = str(port())
            both, client = ([r"#bytes"], []) if "bw" in prog else ([], [r"#bytes.*t_avg"])
            pair(f"iwarp {prog} -R {mpa}", [prog, "-R", "-p", p, "-n", "300"],
                 [prog, "-R", "-p", p, "-n", "300", "127.0.0.1"], patterns=both,
                 client_patterns=client, port=p)


def case_iwarp_qperf():
    # qperf's rc_bw has no flow control of its own: its server posts 1024 receives and reposts
    # as it polls, while the client's SENDs complete once TCP has taken them. On iWARP (siw and
    # iWARP NICs alike) a SEND that finds no receive posted ends the connection (TERMINATE,
    # DDP "no buffer"; the server then reports "WR flush failure"), so a server descheduled
    # while 1024 of its messages arrive fails the run: with 64 KiB messages, tens of ms on a
    # loaded machine. 1 MiB messages make that a whole second's traffic.
    for mpa in ("rev=2", "rev=1,crc,markers"):
        iwarp(mpa)
        p = str(port())
        srv = start(["qperf", "-lp", p])
        expect(wait_tcp(p), "qperf server up")
        cli = start(["qperf", "-lp", p, "127.0.0.1", "-cm1", "-t", "1", "-m", "1M", "rc_bw",
                     "rc_rdma_read_bw"])
        crc, cout = finish(cli, 60)
        cli = start(["qperf", "-lp", p, "127.0.0.1", "-cm1", "-t", "1", "rc_lat"])
        lrc, lout = finish(cli, 60)
        srv.send_signal(signal.SIGTERM)
        finish(srv, 10)
        expect(crc == 0, f"iwarp qperf {mpa}: client exit {crc}", cout)
        expect(len(re.findall(r"bw\s+=\s+[\d.]+ [KMG]B/sec", cout)) == 2,
               f"iwarp qperf {mpa}: two bandwidth figures", cout)
        expect(lrc == 0, f"iwarp qperf {mpa} rc_lat: client exit {lrc}", lout)
        expect(re.search(r"latency\s+=\s+[\d.]+ [nmu]?s", lout), f"iwarp qperf {mpa}: latency", lout)


def iwarp_traced_rping(mpa, count, extra_mpa=""):
    """Runs rping over iWARP with both sides traced; returns (outputs, trace files, dir)."""
    d = tempfile.mkdtemp()
    iwarp(mpa + extra_mpa)
    p = str(port())
    args = ["-a", "127.0.0.1", "-p", p, "-C", str(count)]
    srv = start(["rping", "-s", *args], run_opts=["--pcap", os.path.join(d, "s.pcapng")])
    expect(wait_bound(p), "iwarp trace: server up")
    cli = start(["rping", "-c", "-v", *args], run_opts=["--pcap", os.path.join(d, "c.pcapng")])
    crc, cout = finish(cli)
    src, sout = finish(srv)
    return (src, sout, crc, cout), [os.path.join(d, "s.pcapng"), os.path.join(d, "c.pcapng")], d


def case_iwarp_trace():
    import shutil
    for mpa in MPA_MATRIX:
        (src, sout, crc, cout), files, d = iwarp_traced_rping(mpa, 5)
        expect(src == 0 and crc == 0, f"iwarp trace {mpa}: rping", sout + cout)
        for f in files:
            v = subprocess.run([tshark, "-r", f, "-V", "--disable-protocol", "rpcordma"],
                               capture_output=True, text=True).stdout
            name = f"iwarp trace {mpa} {os.path.basename(f)}"
            expect("Request frame header" in v and "Reply frame header" in v,
                   f"{name}: MPA request and reply decoded", v[:3000])
            rev = "1" if "rev=1" in mpa else "2"
            expect(len(re.findall(rf"\bRevision: {rev}\b", v)) == 2,
                   f"{name}: MPA revision {rev} both ways", v[:3000])
            expect("Malformed" not in v, f"{name}: nothing malformed", v[-3000:])
            # rping's exchange: SENDs, the server's READ of the client's buffer (the zero-length
            # RTR of revision 2 is a Read Request too, so the response and WRITE matter), WRITE.
            for op in ("Send", "Read Request", "Read Response", "Write"):
                expect(re.search(rf"OpCode: {op} \(", v), f"{name}: RDMAP {op} decoded", "")
            if "crc" in mpa:
                expect("Good CRC32" in v and "Bad CRC32" not in v, f"{name}: good CRCs", "")
            lint = subprocess.run([softrdma, "lint", f], capture_output=True, text=True)
            expect(lint.returncode == 0 and "iWARP" in lint.stdout, f"{name}: lint", lint.stdout)
        shutil.rmtree(d, ignore_errors=True)


def case_iwarp_corrupt():
    """A byte flipped in an FPDU after its CRC (fault injection): the receiver's CRC check
    catches it, a TERMINATE is sent, and both sides see the connection end early."""
    import shutil
    (src, sout, crc, cout), files, d = iwarp_traced_rping("rev=2,crc", 50, ",corrupt_fpdu=20")
    expect("rdma-ping-49:" not in cout, "iwarp corrupt: rping should not complete", cout)
    expect("DISCONNECT EVENT" in sout and "DISCONNECT EVENT" in cout,
           "iwarp corrupt: both sides see the connection end", sout + cout)
    for f in files:
        v = subprocess.run([tshark, "-r", f, "-V", "--disable-protocol", "rpcordma"],
                           capture_output=True, text=True).stdout
        expect("Bad CRC32" in v, f"iwarp corrupt {os.path.basename(f)}: the bad CRC is seen", "")
        expect(re.search(r"OpCode: Terminate", v), f"iwarp corrupt {os.path.basename(f)}: TERMINATE", "")
    shutil.rmtree(d, ignore_errors=True)


def stats_lines(text):
    """device -> {counter: value} of the `softrdma: stats DEVICE BACKEND: ...` lines."""
    out = {}
    # (A program's last line may lack its newline: the stats line then follows on it.)
    for dev, counters in re.findall(r"softrdma: stats (\S+) \S+:((?: \w+=\d+)+)$", text, re.M):
        out[dev] = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", counters)}
    return out


def case_device_iwarp():
    # Naming the iWARP device selects iWARP, as --transport iwarp does: rdma_cm connects over
    # softiwarp0 (its TCP counters move) and softroce0, still listed under its own name,
    # carries nothing of the programs'.
    BASE_OPTS[:] = ["--device", "softiwarp0", "--stats"]
    p = str(port())
    args = ["-a", "127.0.0.1", "-p", p, "-C", "10", "-S", "4096"]
    sout, cout = pair("rping --device softiwarp0", ["rping", "-s", *args],
                      ["rping", "-c", "-v", *args], client_patterns=[r"rdma-ping-9:"], port=p)
    p = str(port())
    s2, c2 = pair("ib_send_bw -R --device softiwarp0", ["ib_send_bw", "-R", "-p", p, "-n", "300"],
                  ["ib_send_bw", "-R", "-p", p, "-n", "300", "127.0.0.1"], patterns=[r"#bytes"],
                  port=p)
    for name, out in [("rping server", sout), ("rping client", cout), ("ib_send_bw server", s2),
                      ("ib_send_bw client", c2)]:
        st = stats_lines(out)
        iw = st.get("softiwarp0", {})
        expect(iw.get("tx_fpdus", 0) > 0 and iw.get("rx_fpdus", 0) > 0,
               f"{name}: softiwarp0's stats line (tcp) counts FPDUs both ways", out)
        expect(re.search(r"softrdma: stats softiwarp0 tcp:", out),
               f"{name}: the softiwarp0 line is the iWARP device's", out)
        roce = st.get("softroce0")
        expect(roce is not None and roce.get("sent_pkts", 1) == 0 and roce.get("rcvd_pkts", 1) == 0,
               f"{name}: softroce0 (its own name) carried no RoCE packets", out)
    BASE_OPTS[:] = []


run_case(globals(), case)
