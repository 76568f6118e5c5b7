#!/usr/bin/env python3
"""Acceptance: perftest's --odp (on-demand paging regions) over softrdma through `softrdma run`.

usage: odp.py SOFTRDMA CASE
Each CASE runs an ib_*_bw pair with --odp on this host, checks both exit codes, the result line
and, from `--stats`, which path carried the data: direct placement (the sender writes into the
receiver's ODP region itself) or packets through the rings."""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from testlib import expect, failures, free_port, run_pair, run_stats as stats  # noqa: E402

softrdma, case = sys.argv[1:3]


def pair(args, run_opts):
    port = str(free_port())
    server = [*args, "-p", port]
    return run_pair(softrdma, server, [*server, "127.0.0.1"], server_opts=run_opts)


# CASE: the program, its options, --local, and whether the writes are placed directly.
CASES = {
    # Only a QP's oldest outstanding WRITE is placed: with perftest's 128 in flight, a loaded
    # machine's queue may never drain (0 placed of 31344 in a CI run), so one at a time; for 2 s,
    # as the first writes go before the ring that placement needs is up.
    "write": ("ib_write_bw", ["-s", "65536", "-D", "2", "-t", "1"], "direct", True),
    "write_lat": ("ib_write_lat", ["-s", "2", "-n", "2000"], "direct", True),
    "write_rings": ("ib_write_bw", ["-s", "65536", "-n", "500"], "rings", False),
    "read": ("ib_read_bw", ["-s", "65536", "-n", "500"], "direct", False),
    "send": ("ib_send_bw", ["-s", "65536", "-n", "500"], "direct", False),
    "send_srq": ("ib_send_bw", ["-s", "65536", "-n", "500", "--use-srq"], "direct", False),
    "send_ud": ("ib_send_bw", ["-c", "UD", "-s", "1024", "-n", "500", "--rate_limit=4",
                               "--rate_limit_type=SW"], "direct", False),
}

prog, opts, local, placed = CASES[case]
(src, sout), (crc, cout) = pair([prog, "--odp", *opts], ("--stats", "--local", local))
name = f"{prog} --odp {' '.join(opts)} --local {local}"
size = opts[opts.index("-s") + 1]
expect(src == 0 and crc == 0, f"{name}: both exit 0", cout + sout)
expect(re.search(rf"^\s*{size}\s+\d+\s+[\d.]+\s+[\d.]+", cout, re.M),
       f"{name}: a result line", cout + sout)
expect("Failed to" not in cout + sout and "not supported" not in cout + sout,
       f"{name}: perftest took the ODP caps", cout + sout)
s_stats, c_stats = stats(sout), stats(cout)
expect(s_stats is not None and c_stats is not None, f"{name}: stats lines", cout + sout)
if s_stats and c_stats:
    for side, mine in (("server", s_stats), ("client", c_stats)):
        expect(mine["odp_faults"] == 0 and mine["resp_remote_access_errors"] == 0,
               f"{name}: no ODP faults or access errors on the {side}", cout + sout)
    # ib_write_bw's client writes, ib_read_bw's client reads; the server of write/read only
    # answers.
    sent = c_stats["placed_sent"] + s_stats["placed_sent"]
    print(f"{name}: sent_pkts {c_stats['sent_pkts']}/{s_stats['sent_pkts']}, placed_sent "
          f"{c_stats['placed_sent']}/{s_stats['placed_sent']} (client/server)")
    if placed:
        # One WRITE in flight: all but those before the ring was up (ib_write_lat: its warm-up
        # writes, on both sides; ib_write_bw: most of its packets).
        want = 1500 * 2 if prog == "ib_write_lat" else c_stats["sent_pkts"] // 2
        expect(sent >= want, f"{name}: writes were placed directly in the ODP region ({sent})",
               cout + sout)
        expect(sent == c_stats["placed_rcvd"] + s_stats["placed_rcvd"],
               f"{name}: every placed write was received as placed", cout + sout)
    else:
        expect(sent == 0, f"{name}: nothing placed directly (packets carried the data)",
               cout + sout)
        expect(c_stats["sent_pkts"] + s_stats["sent_pkts"] >= 500,
               f"{name}: packets carried the data", cout + sout)
sys.exit(1 if failures else 0)
