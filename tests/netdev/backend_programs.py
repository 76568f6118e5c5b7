#!/usr/bin/env python3
"""Acceptance: unmodified verbs programs over the raw backends across a veth pair.

usage: backend_programs.py SOFTRDMA NAME SERVER/CLIENT...
Creates two network namespaces (sr7-NAME-PID-a and -b) joined by a veth pair (10.97.N.1/24 and
10.97.N.2/24, only inside them; N from NAME), runs ibv_rc_pingpong, ib_write_bw and ib_read_lat
server/client pairs through `softrdma run --netdev BACKEND` for each SERVER/CLIENT pair of
backends (af_packet, af_xdp, dpdk, udp, each with a 6 suffix for IPv6 addresses fd97:N::1 and
fd97:N::2; the server in namespace a, the client in b), checks both exit 0, and always deletes
the namespaces. Exits 77 (skipped, saying why) when not root, when
`ip` or a program is missing, or when a backend cannot start on this machine for want of a
privilege, a kernel feature or a build dependency."""
import os
import shutil
import subprocess
import sys
import time

from veth_pair import VethPair

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from testlib import in_netns, skip, wait_for  # noqa: E402

softrdma, name, pairs = sys.argv[1], sys.argv[2], [p.split("/") for p in sys.argv[3:]]
SUBNET = {"af_packet": 2, "af_xdp": 3, "dpdk": 4}.get(name, 5)

if os.geteuid() != 0:
    skip("needs root to create network namespaces and a veth pair")
for tool in ("ip", "ibv_rc_pingpong", "ib_write_bw", "ib_read_lat"):
    if shutil.which(tool) is None:
        skip(f"{tool} is missing")

PAIR = VethPair(f"sr7-{name}-{os.getpid()}", SUBNET)
NS, IFACE, ADDR, ADDR6 = PAIR.ns, PAIR.iface, PAIR.addr, PAIR.addr6
# Reasons a backend cannot start that are the machine's, not softrdma's.
ENVIRONMENTAL = ("needs CAP_", "does not support", "a kernel without", "this build has no",
                 "EAL could not start")


def setup():
    PAIR.up()
    if any(k.startswith("dpdk") for p in pairs for k in p):
        # DPDK's af_packet PMD cannot split the peer's UDP GSO frames (a veth carries them
        # whole; a NIC would have segmented them): have the kernel segment before the veth.
        PAIR.gso_max_segs(1)


def cleanup():
    PAIR.delete()


def netdev(side, kind):
    v6 = kind.endswith("6")
    kind = kind.rstrip("6")
    addr = (ADDR6 if v6 else ADDR)[side]
    if kind == "udp":
        return f"udp:{addr}"
    if kind == "dpdk":
        return f"dpdk:net_af_packet{side},iface={IFACE[side]}@{addr}"
    return f"{kind}:{IFACE[side]}:{addr}" if v6 else f"{kind}:{IFACE[side]}"





def command(side, kind, program):
    return ["ip", "netns", "exec", NS[side], softrdma, "run", "--netdev", netdev(side, kind),
            "--", *program]


def probe(side, kind):
    """None when the backend starts in this namespace, else why it cannot (skip) or the
    failure itself (fail)."""
    env = dict(os.environ, SOFTRDMA_NETDEV=netdev(side, kind))
    r = subprocess.run(["ip", "netns", "exec", NS[side], softrdma, "devices"], env=env,
                       capture_output=True, text=True, timeout=60)
    out = r.stdout + r.stderr
    if r.returncode == 0 and f" {kind.rstrip('6')} " in out.replace("\t", " "):
        return None
    return out.strip() or f"exit {r.returncode}"


failures = []


def pair(label, server_kind, client_kind, program, timeout=120):
    """The server in namespace a, the client in b, each on its backend."""
    srv = subprocess.Popen(command("a", server_kind, program), stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
    port = program[program.index("-p") + 1]
    wait_for(lambda: in_netns(NS["a"], "tcp_listening", port), 30, interval=0.1, proc=srv)
    try:
        # The programs exchange their GIDs over TCP to the server's IPv4 address, whatever
        # the devices' family (their servers listen on IPv4 only).
        cli = subprocess.run(command("b", client_kind, program + [ADDR["a"]]),
                             capture_output=True, text=True, timeout=timeout)
        s_out, _ = srv.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        srv.kill()
        srv.communicate()
        failures.append(f"{label}: timed out")
        print(f"FAIL: {label}: timed out")
        return
    ok = srv.returncode == 0 and cli.returncode == 0
    print(f"{'ok  ' if ok else 'FAIL'}: {label} (server {server_kind} exit {srv.returncode}, "
          f"client {client_kind} exit {cli.returncode})")
    if not ok:
        failures.append(label)
        print("---- server ----\n" + s_out[-2000:])
        print("---- client ----\n" + (cli.stdout + cli.stderr)[-2000:])


try:
    setup()
    for server_kind, client_kind in pairs:
        for side, kind in (("a", server_kind), ("b", client_kind)):
            why = probe(side, kind)
            if why is not None and any(w in why for w in ENVIRONMENTAL):
                skip(f"{kind} cannot start here: {why}")
            if why is not None:
                print(f"FAIL: {kind} does not start: {why}")
                sys.exit(1)
    programs = {
        "ibv_rc_pingpong": ["ibv_rc_pingpong", "-g", "1", "-p", "18515", "-n", "200"],
        # -x 1: the device's address (0 is the link-local default GID, which perftest takes
        # on an IPv6-only device and softrdma cannot send from; docs/verbs-abi.md).
        "ib_write_bw": ["ib_write_bw", "-x", "1", "-p", "18516", "-s", "65536", "-n", "200"],
        "ib_read_lat": ["ib_read_lat", "-x", "1", "-p", "18517", "-s", "64", "-n", "200"],
    }
    for server_kind, client_kind in pairs:
        for label, program in programs.items():
            pair(f"{label} {server_kind}/{client_kind}", server_kind, client_kind, program)
except subprocess.CalledProcessError as e:
    cleanup()
    skip(f"cannot set up the namespaces: {' '.join(e.cmd)}: {e.stderr.strip()}")
finally:
    cleanup()

if failures:
    print(f"{len(failures)} failed: {', '.join(failures)}")
    sys.exit(1)
print("all passed")
