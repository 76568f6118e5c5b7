#!/usr/bin/env python3
"""Acceptance: softiwarp0 over lwIP on af_packet (namespace hiw-b, address 10.231.2.2, which the
kernel there does not hold) against softiwarp0 over kernel TCP (namespace hiw-a, 10.231.2.1),
on a veth pair; Debian's rping (data checked) and perftest (-R), each side as server and client;
the lwIP side's trace holds its real TCP segments, which tshark decodes with good CRCs.

usage: lwip_netns.py SOFTRDMA TSHARK CASE"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from testlib import expect, finish, run_case, skip, wait_for  # noqa: E402

softrdma, tshark, case = sys.argv[1:4]
NS = {"kernel": "hiw-a", "lwip": "hiw-b"}
ADDR = {"kernel": "10.231.2.1", "lwip": "10.231.2.2"}
NETDEV = {"kernel": "udp:10.231.2.1", "lwip": "af_packet:hiwv1:10.231.2.2"}
PORT = 18621


def sh(cmd):
    return subprocess.run(cmd.split(), capture_output=True).returncode == 0


def up():
    """hiwv0 in hiw-a with 10.231.2.1/24; hiwv1 in hiw-b up with no IPv4 address of its own."""
    down()
    ok = (sh("ip netns add hiw-a") and sh("ip netns add hiw-b") and
          sh("ip link add hiwv0 netns hiw-a type veth peer name hiwv1 netns hiw-b") and
          sh("ip -n hiw-a addr add 10.231.2.1/24 dev hiwv0") and
          sh("ip -n hiw-a link set hiwv0 up") and sh("ip -n hiw-b link set hiwv1 up") and
          sh("ip -n hiw-a link set lo up") and sh("ip -n hiw-b link set lo up"))
    if not ok:
        down()
        skip("cannot create network namespaces with a veth pair here")


def down():
    for ns in NS.values():
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def start(side, args, opts=()):
    cmd = ["ip", "netns", "exec", NS[side], softrdma, "run", "--transport", "iwarp", "--netdev",
           NETDEV[side], *opts, "--", *args]
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


def pair(name, server_side, server, client, opts=(), timeout=90, both=()):
    """`opts` go to the lwIP side's `softrdma run`, `both` to both sides'."""
    client_side = "lwip" if server_side == "kernel" else "kernel"
    srv = start(server_side, server, (*both, *(opts if server_side == "lwip" else ())))
    expect(wait_for(lambda: cm_listening(NS[server_side], srv.pid), 15, interval=0.1, proc=srv),
           f"{name}: server listening", "")
    cli = start(client_side, client, (*both, *(opts if client_side == "lwip" else ())))
    crc, cout = finish(cli, timeout)
    src, sout = finish(srv, timeout)
    expect(crc == 0, f"{name}: client exits 0 (got {crc})", cout)
    expect(src == 0, f"{name}: server exits 0 (got {src})", sout)
    return cout, sout


def rping(server_side, opts=(), mpa="rev=2"):
    srv = ["rping", "-s", "-a", ADDR[server_side], "-p", str(PORT), "-C", "20", "-S", "4000", "-V"]
    cli = ["rping", "-c", "-a", ADDR[server_side], "-p", str(PORT), "-C", "20", "-S", "4000", "-V",
           "-v"]
    cout, _ = pair(f"rping server on {server_side} ({mpa})", server_side, srv, cli, opts,
                   both=("--mpa", mpa))
    expect(cout.count("ping data:") == 20, "rping: 20 pings verified", cout)


def perftest(tool, server_side):
    args = [tool, "-R", "-p", str(PORT), "-s", "65536", "-n", "200", "-F"]
    cout, sout = pair(f"{tool} server on {server_side}", server_side, args,
                      args + [ADDR[server_side]])
    expect("BW average" in cout or "BW average" in sout or "#bytes" in cout,
           f"{tool}: a result line", cout + sout)


def with_hosts(fn):
    up()
    try:
        fn()
    finally:
        down()


def case_rping():
    def run():
        rping("lwip")
        rping("kernel")
        rping("lwip", mpa="rev=1,crc,markers")  # markers cross lwIP's segment boundaries
    with_hosts(run)


def case_perftest():
    def run():
        for tool in ("ib_send_bw", "ib_write_bw"):
            perftest(tool, "lwip")
            perftest(tool, "kernel")
    with_hosts(run)


def case_trace():
    if not tshark:
        skip("tshark is not installed")
    pcap = os.environ.get("LWIP_TRACE_KEEP") or f"/tmp/lwip_netns_{os.getpid()}.pcapng"

    def run():
        rping("lwip", opts=("--pcap", pcap), mpa="rev=2,crc")
        verbose = subprocess.run([tshark, "-n", "-r", pcap, "--disable-protocol", "rpcordma", "-V"],
                                 capture_output=True, text=True).stdout
        syn = subprocess.run([tshark, "-n", "-r", pcap, "-Y", "tcp.flags.syn==1 && tcp.flags.ack==1",
                              "-T", "fields", "-e", "ip.src"], capture_output=True, text=True).stdout
        good = verbose.count("(Good CRC32)")
        expect("Bad CRC32" not in verbose, "trace: no bad CRC", "")
        expect("Malformed" not in verbose, "trace: nothing malformed", "")
        expect(good >= 40, f"trace: good CRCs on the FPDUs ({good})", verbose[-3000:])
        expect(ADDR["lwip"] in syn, "trace: lwIP's own SYN-ACK, as sent", syn)
        expect("softrdma: dir=tx dev=softiwarp0" in verbose, "trace: annotated frames", "")
    try:
        with_hosts(run)
    finally:
        if os.path.exists(pcap) and not os.environ.get("LWIP_TRACE_KEEP"):
            os.remove(pcap)


def stats(output):
    """The counters of the `softrdma: stats softiwarp0 tcp:` line of `output`."""
    for line in output.splitlines():
        if line.startswith("softrdma: stats softiwarp0 tcp:"):
            return {k: int(v) for k, v in (f.split("=") for f in line.split(":", 2)[2].split())}
    return {}


def case_bad_input():
    """Segments for no connection, a RST for none, a corrupted segment: lwIP answers the SYN
    with a reset and ignores the rest; each is counted, and rping still runs after them."""
    sender = os.path.join(os.path.dirname(os.path.abspath(__file__)), "send_segment.py")

    def send(*args):
        subprocess.run(["ip", "netns", "exec", NS["kernel"], sys.executable, sender,
                        ADDR["kernel"], ADDR["lwip"], *map(str, args)], check=True)

    def run():
        srv = start("lwip", ["rping", "-s", "-a", ADDR["lwip"], "-p", str(PORT), "-C", "3", "-V"],
                    ("--stats",))
        expect(wait_for(lambda: cm_listening(NS["lwip"], srv.pid), 15, interval=0.1, proc=srv),
               "bad input: server listening", "")
        send(PORT + 1, "S", 1)  # no listener there: answered with a reset
        send(PORT + 1, "R", 1)  # a reset of no connection: ignored
        send(PORT, "S", 0)      # a bad checksum: dropped
        cli = start("kernel", ["rping", "-c", "-a", ADDR["lwip"], "-p", str(PORT), "-C", "3",
                               "-V"])
        crc, cout = finish(cli, 60)
        src, sout = finish(srv, 60)
        expect(crc == 0 and src == 0, f"bad input: rping after it (exits {crc}, {src})",
               cout + sout)
        c = stats(sout)
        expect(c.get("tcp_tx_rst", 0) >= 1, f"bad input: a reset sent ({c})", sout)
        expect(c.get("tcp_rx_rst", 0) >= 1, f"bad input: a reset received ({c})", sout)
        expect(c.get("tcp_rx_malformed", 0) >= 1, f"bad input: a malformed segment ({c})", sout)
    with_hosts(run)


if os.geteuid() != 0:
    skip("needs root for network namespaces and packet sockets")
for tool in ("rping", "ib_send_bw"):
    if subprocess.run(["which", tool], capture_output=True).returncode != 0:
        skip(f"{tool} is not installed")
run_case(globals(), case)
