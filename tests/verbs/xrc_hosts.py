#!/usr/bin/env python3
"""Acceptance: XRC between two hosts, as a veth pair between two network namespaces shows them.

usage: xrc_hosts.py SOFTRDMA
ibv_xsrq_pingpong -c 3 in namespace a (10.97.19.1) and its three clients in namespace b, each on
an address of its own (10.97.19.2, .3 and .4 on b's veth): the clients share the XRC domain of
/tmp/xrc_domain on their host, and the server sends each client's messages through all three
clients' target QPs, which pass those for another client's SRQ to it (rxe/xrc_relay.h, inside
namespace b). Checks every program's exit and `success`, the clients' relay counters, and that
no SRQ was refused. Exits 77 (skipped) when not root or a program is missing; always deletes the
namespaces."""
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "netdev"))
from testlib import expect, failures, skip, wait_for  # noqa: E402
from veth_pair import VethPair, sh  # noqa: E402
from xsrq_check import expect_xsrq_clients, finish_all  # noqa: E402

softrdma = sys.argv[1]
if os.geteuid() != 0:
    skip("needs root to create network namespaces and a veth pair")
for tool in ("ip", "ibv_xsrq_pingpong"):
    if shutil.which(tool) is None:
        skip(f"{tool} is missing")

PAIR = VethPair(f"sr19-xrc-{os.getpid()}", 19)
CLIENTS = ["10.97.19.2", "10.97.19.3", "10.97.19.4"]
N = 30  # messages per client, 4 packets each (4096 bytes at path MTU 1024)


def run(side, addr, args):
    return subprocess.Popen(["ip", "netns", "exec", PAIR.ns[side], softrdma, "run", "--stats",
                             "--netdev", f"udp:{addr}", "--", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def listening(port):
    r = subprocess.run(["ip", "netns", "exec", PAIR.ns["a"], "ss", "-Htln", f"sport = :{port}"],
                       capture_output=True, text=True)
    return bool(r.stdout.strip())


try:
    PAIR.up()
    for addr in CLIENTS[1:]:
        sh("ip", "-n", PAIR.ns["b"], "addr", "add", addr + "/24", "dev", PAIR.iface["b"])
    port = "18519"
    args = ["ibv_xsrq_pingpong", "-g", "1", "-p", port, "-n", str(N)]
    srv = run("a", PAIR.addr["a"], [*args, "-c", "3"])
    expect(wait_for(lambda: listening(port), 30, proc=srv), "server listens", "")
    clients = [run("b", addr, [*args, PAIR.addr["a"]]) for addr in CLIENTS]
    outs = finish_all([srv, *clients])
    lines = expect_xsrq_clients(outs, N, [f"client {a}" for a in CLIENTS])
    if lines:
        expect(lines[0]["xrc_rcvd_requests"] == 3 * N * 4, "the server took every request",
               outs[0][1])
finally:
    PAIR.delete()
sys.exit(1 if failures else 0)
