#!/usr/bin/env python3
"""Acceptance: unmodified verbs programs over the AF_PACKET backend across a veth pair.

usage: af_packet_programs.py SOFTRDMA
Creates two network namespaces joined by a veth pair (10.78.0.1/24 and 10.78.0.2/24, only
inside them), runs ibv_rc_pingpong and ib_write_bw server/client pairs through
`softrdma run --netdev af_packet:IFACE` on both sides, then with AF_PACKET on one side and
`--netdev udp:ADDRESS` on the other (both ways), checks both exit 0, and always deletes the
namespaces. Exits 77 (skipped) when not root or when `ip` or a program is missing."""
import os
import shutil
import subprocess
import sys
import time

softrdma = sys.argv[1]
SKIP = 77

if os.geteuid() != 0:
    print("SKIP: needs root to create network namespaces and a veth pair")
    sys.exit(SKIP)
for tool in ("ip", "ibv_rc_pingpong", "ib_write_bw"):
    if shutil.which(tool) is None:
        print(f"SKIP: {tool} is missing")
        sys.exit(SKIP)

prefix = f"softrdma-afpy-{os.getpid()}"
NS = {"a": prefix + "-a", "b": prefix + "-b"}
IFACE = {"a": "veth0", "b": "veth1"}
ADDR = {"a": "10.78.0.1", "b": "10.78.0.2"}


def sh(*args):
    subprocess.run(list(args), check=True, capture_output=True, text=True)


def setup():
    sh("ip", "netns", "add", NS["a"])
    sh("ip", "netns", "add", NS["b"])
    sh("ip", "link", "add", "veth0", "netns", NS["a"], "type", "veth", "peer", "name", "veth1",
       "netns", NS["b"])
    for side in ("a", "b"):
        sh("ip", "-n", NS[side], "addr", "add", ADDR[side] + "/24", "dev", IFACE[side])
        sh("ip", "-n", NS[side], "link", "set", IFACE[side], "up")
        sh("ip", "-n", NS[side], "link", "set", "lo", "up")


def cleanup():
    for ns in NS.values():
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def netdev(side, kind):
    return f"af_packet:{IFACE[side]}" if kind == "af_packet" else f"udp:{ADDR[side]}"


def command(side, kind, program):
    return ["ip", "netns", "exec", NS[side], softrdma, "run", "--netdev", netdev(side, kind),
            "--", *program]


failures = []


def pair(name, server_kind, client_kind, program, timeout=120):
    """The server in namespace a, the client in b, each on its backend."""
    srv = subprocess.Popen(command("a", server_kind, program), stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
    time.sleep(1.0)
    try:
        cli = subprocess.run(command("b", client_kind, program + [ADDR["a"]]),
                             capture_output=True, text=True, timeout=timeout)
        s_out, _ = srv.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        srv.kill()
        srv.communicate()
        failures.append(f"{name}: timed out")
        print(f"FAIL: {name}: timed out")
        return
    ok = srv.returncode == 0 and cli.returncode == 0
    print(f"{'ok  ' if ok else 'FAIL'}: {name} (server {server_kind} exit {srv.returncode}, "
          f"client {client_kind} exit {cli.returncode})")
    if not ok:
        failures.append(name)
        print("---- server ----\n" + s_out[-2000:])
        print("---- client ----\n" + (cli.stdout + cli.stderr)[-2000:])


try:
    setup()
    pingpong = ["ibv_rc_pingpong", "-g", "0", "-p", "18515", "-n", "200"]
    write_bw = ["ib_write_bw", "-p", "18516", "-s", "65536", "-n", "200"]
    for server_kind, client_kind in (("af_packet", "af_packet"), ("af_packet", "udp"),
                                     ("udp", "af_packet")):
        pair(f"ibv_rc_pingpong {server_kind}/{client_kind}", server_kind, client_kind, pingpong)
        pair(f"ib_write_bw {server_kind}/{client_kind}", server_kind, client_kind, write_bw)
except subprocess.CalledProcessError as e:
    print(f"SKIP: cannot set up the namespaces: {' '.join(e.cmd)}: {e.stderr.strip()}")
    cleanup()
    sys.exit(SKIP)
finally:
    cleanup()

if failures:
    print(f"{len(failures)} failed: {', '.join(failures)}")
    sys.exit(1)
print("all passed")
