#!/usr/bin/env python3
"""Acceptance: a backend's UDP GSO batches (the udp backend's sockets, the vnet headers of
af_packet and of af_xdp in copy mode) are what a NIC on the other side accepts.

usage: wire_gso_ids.py SOFTRDMA [udp|af_packet|af_xdp]
Two network namespaces joined by a veth pair (10.97.6.1/24 and 10.97.6.2/24 for udp, 10.97.7.x
for af_packet, 10.97.8.x for af_xdp, only inside them; always deleted). With the veth's segmentation limited to one
segment (the kernel then cuts each UDP GSO message before the veth, as a NIC's segmentation
offload would on a wire), an ibv_rc_pingpong pair of 16 KiB messages (-c: data checked) runs through
`softrdma run --netdev BACKEND:…` (default udp) while dumpcap captures the client's veth.
Checks:
- every captured RoCEv2 frame passes `softrdma lint` (its ICRC is right for the IPv4 header as it
  is on the wire, ID included);
- per flow, each frame's IPv4 ID is 0 (a message of its own, or a GSO message's first segment)
  or one past the previous frame's, and messages of several segments were sent (IDs above 0);
- the client's own trace (--pcap) shows the same IDs and the same datagram bytes, in order, as
  the wire;
- then, with segmentation left to the veth (whole GSO messages cross it, as to a receiver that
  coalesces them), the pair runs again; neither side counts an ICRC error, either time, and a
  raw backend's server cut whole GSO messages itself (netdev_rx_gso_frames above 0: af_packet is
  told their segment size, af_xdp on a veth, in generic XDP mode, finds it), dropping none as
  malformed.
Exits 77 (skipped, saying why) when not root, a program is missing or the backend cannot start
here for want of a privilege, a kernel feature or a build dependency."""
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile

from veth_pair import VethPair

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from testlib import in_netns, skip, wait_for  # noqa: E402

softrdma = sys.argv[1]
BACKEND = sys.argv[2] if len(sys.argv) > 2 else "udp"
if BACKEND not in ("udp", "af_packet", "af_xdp"):
    sys.exit(f"wire_gso_ids.py: unknown backend {BACKEND}")
if os.geteuid() != 0:
    skip("needs root to create network namespaces and a veth pair")
for tool in ("ip", "ibv_rc_pingpong", "dumpcap"):
    if shutil.which(tool) is None:
        skip(f"{tool} is missing")
try:
    from scapy.all import IP, UDP, rdpcap  # noqa: E402
except ImportError:
    skip("python3-scapy is missing")

PAIR = VethPair(f"sr15-gso-{os.getpid()}", {"udp": 6, "af_packet": 7, "af_xdp": 8}[BACKEND])
NS, IFACE, ADDR = PAIR.ns, PAIR.iface, PAIR.addr
failures = []


def check(what, ok, detail=""):
    print(("ok   " if ok else "FAIL ") + what + ("" if ok or not detail else f": {detail}"))
    if not ok:
        failures.append(what)


def pingpong(port, trace=None):
    """Server in a, client in b; returns (server, client) outputs, both having exited 0."""
    def cmd(side, *extra):
        where = ADDR[side] if BACKEND == "udp" else IFACE[side]
        opts = ["--stats", "--netdev", f"{BACKEND}:{where}"] + (["--pcap", trace] if trace and side == "b" else [])
        return ["ip", "netns", "exec", NS[side], softrdma, "run", *opts, "--", "timeout", "30",
                "ibv_rc_pingpong", "-g", "1", "-c", "-p", str(port), "-s", "16384", "-n", "40", *extra]
    srv = subprocess.Popen(cmd("a"), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    wait_for(lambda: in_netns(NS["a"], "tcp_listening", port), 30, interval=0.1, proc=srv)
    cli = subprocess.run(cmd("b", ADDR["a"]), capture_output=True, text=True, timeout=60)
    out_srv = srv.communicate(timeout=60)[0]
    check(f"ibv_rc_pingpong pair on port {port} exits 0", srv.returncode == 0 and cli.returncode == 0,
          f"server {srv.returncode}: {out_srv[-400:]} client {cli.returncode}: {(cli.stdout + cli.stderr)[-400:]}")
    return out_srv, cli.stdout + cli.stderr


def counted(name, out):
    return [int(x) for x in re.findall(rf"\b{name}=(\d+)", out)]


def icrc_errors(out):
    return counted("icrc_err", out)


def roce_frames(path, src):
    """(IPv4 ID, UDP payload) of each RoCEv2 frame from `src`, in capture order."""
    out = []
    for p in rdpcap(path):
        if IP in p and UDP in p and p[UDP].dport == 4791 and p[IP].src == src:
            out.append((p[UDP].sport, p[IP].id, bytes(p[UDP].payload)))
    return out


def caught_frames(path, src):
    """roce_frames of a capture still being written: those of its whole blocks so far."""
    try:
        return roce_frames(path, src)
    except Exception:  # a block cut short: scapy's errors are of several kinds
        return []


def main():
    work = tempfile.mkdtemp(prefix="sr15-gso-")
    wire_cap = os.path.join(work, "wire.pcapng")
    trace = os.path.join(work, "client.pcapng")
    PAIR.up()
    if BACKEND != "udp":  # a raw backend may not start here for want of a privilege or a feature
        env = dict(os.environ, SOFTRDMA_NETDEV=f"{BACKEND}:{IFACE['b']}")
        r = subprocess.run(["ip", "netns", "exec", NS["b"], softrdma, "devices"], env=env,
                           capture_output=True, text=True, timeout=60)
        out = (r.stdout + r.stderr).strip()
        if r.returncode != 0 and any(k in out for k in ("needs CAP_", "does not support",
                                                        "a kernel without", "this build has no")):
            skip(out)
    PAIR.gso_max_segs(1)
    cap = subprocess.Popen(["ip", "netns", "exec", NS["b"], "dumpcap", "-q", "-i", IFACE["b"], "-f",
                            "udp port 4791", "-w", wire_cap], stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True)
    # dumpcap writes its file once it has opened the interface with its filter.
    wait_for(lambda: os.path.exists(wire_cap), 10, interval=0.1, proc=cap)
    srv, cli = pingpong(18731, trace)
    # The client's trace is whole (it has exited); dumpcap writes what it catches as it goes, so
    # the wire capture is whole once it holds as many of the client's frames (or dumpcap ended).
    traced = roce_frames(trace, ADDR["b"])
    wait_for(lambda: len(caught_frames(wire_cap, ADDR["b"])) >= len(traced), 10, interval=0.1, proc=cap)
    cap.send_signal(signal.SIGINT)
    cap.wait(timeout=10)
    check("no ICRC errors counted by either side (segmented on the way)",
          icrc_errors(srv) == [0] and icrc_errors(cli) == [0], f"server {icrc_errors(srv)}, client {icrc_errors(cli)}")

    lint = subprocess.run([softrdma, "lint", wire_cap], capture_output=True, text=True)
    check("softrdma lint passes the wire capture", lint.returncode == 0, (lint.stdout + lint.stderr)[-800:])

    wire = roce_frames(wire_cap, ADDR["b"])
    prev, bad, multi = {}, [], 0
    for sport, ip_id, _ in wire:
        if ip_id != 0 and ip_id != (prev.get(sport, -2) + 1) & 0xFFFF:
            bad.append((sport, ip_id, prev.get(sport)))
        multi += ip_id > 0
        prev[sport] = ip_id
    check(f"{len(wire)} client frames on the wire: each IPv4 ID is 0 or one past the previous frame's of its flow",
          len(wire) > 0 and not bad, f"out of order: {bad[:5]}")
    check(f"the client sent UDP GSO messages of several segments ({multi} frames with IDs above 0)", multi > 0)

    check(f"the client's trace ({len(traced)} frames) shows the wire's IDs and bytes in order",
          traced == wire,
          next((f"frame {k}: trace {t[:2]} {t[2][:16].hex()} wire {w[:2]} {w[2][:16].hex()}"
                for k, (t, w) in enumerate(zip(traced, wire)) if t != w), f"{len(traced)} vs {len(wire)} frames"))

    PAIR.gso_max_segs(65535)
    srv, cli = pingpong(18732)
    check("no ICRC errors counted by either side (GSO messages whole across the veth)",
          icrc_errors(srv) == [0] and icrc_errors(cli) == [0], f"server {icrc_errors(srv)}, client {icrc_errors(cli)}")
    if BACKEND != "udp":
        cut, bad = counted("netdev_rx_gso_frames", srv), counted("netdev_rx_malformed", srv)
        check("the server cut whole GSO messages itself and dropped none as malformed",
              len(cut) == 1 and cut[0] > 0 and bad == [0], f"netdev_rx_gso_frames {cut}, netdev_rx_malformed {bad}")
    shutil.rmtree(work, ignore_errors=True)


try:
    main()
finally:
    PAIR.delete()
print(f"{len(failures)} failed")
sys.exit(1 if failures else 0)
