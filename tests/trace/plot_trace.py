#!/usr/bin/env python3
"""Acceptance: `softrdma trace plot` of a faulted run's trace (docs/monitoring.md).

usage: plot_trace.py SOFTRDMA TSHARK
An ib_write_bw pair with injected drops traces through `softrdma run --pcap`; the merged trace is
plotted: a PNG is written, and the points it says it drew per series (first transmissions,
retransmissions, NAKs) are those the trace itself shows, counted here with tshark's RoCE decoder
and softrdma's annotations (dir=tx, retrans=1). Bad input exits 2."""
import collections
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from testlib import expect, failures, free_port, wait_listening  # noqa: E402

softrdma, tshark = sys.argv[1:3]


with tempfile.TemporaryDirectory() as tmp:
    port = str(free_port())
    opts = ["--pcap", os.path.join(tmp, "t%p.pcapng"), "--pcap-filter", "snaplen=96"]
    args = ["ib_write_bw", "-s", "16384", "-n", "200", "-p", port]
    srv = subprocess.Popen([softrdma, "run", "--faults", "drop=0.02,seed=3", *opts, "--", *args],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    wait_listening(port, proc=srv)
    cli = subprocess.run([softrdma, "run", "--faults", "drop=0.02,seed=4", *opts, "--", *args,
                          "127.0.0.1"], capture_output=True, text=True, timeout=120)
    sout, _ = srv.communicate(timeout=120)
    expect(cli.returncode == 0 and srv.returncode == 0, "the faulted pair completes",
           cli.stdout + cli.stderr + sout)
    traces = sorted(os.path.join(tmp, f) for f in os.listdir(tmp) if f.endswith(".pcapng"))
    merged = os.path.join(tmp, "merged.pcapng")
    r = subprocess.run([softrdma, "trace", "merge", *traces, "-o", merged], capture_output=True,
                       text=True)
    expect(r.returncode == 0, "trace merge", r.stderr)
    png = os.path.join(tmp, "plot.png")
    r = subprocess.run([softrdma, "trace", "plot", merged, "-o", png], capture_output=True,
                       text=True, timeout=120)
    expect(r.returncode == 0, f"trace plot: exit {r.returncode}", r.stdout + r.stderr)
    with open(png, "rb") as f:
        expect(f.read(8) == b"\x89PNG\r\n\x1a\n", "a PNG is written")
    drawn = collections.Counter()
    for m in re.finditer(r"^flow \d+: .*: first (\d+) retransmissions (\d+) naks (\d+) "
                         r"rnr_naks (\d+) cnps (\d+)$", r.stdout, re.M):
        for k, v in zip(("first", "retrans", "nak", "rnr", "cnp"), m.groups()):
            drawn[k] += int(v)
    expect(drawn["first"] > 0, "it drew flows", r.stdout)

    # The trace's own account: what each device sent (dir=tx), decoded by tshark.
    t = subprocess.run([tshark, "-r", merged, "-Y", "infiniband", "-T", "fields", "-e",
                        "frame.comment", "-e", "infiniband.bth.opcode", "-e",
                        "infiniband.aeth.syndrome"], capture_output=True, text=True)
    seen = collections.Counter()
    for line in t.stdout.splitlines():
        comment, opcode, syndrome = (line.split("\t") + ["", "", ""])[:3]
        if "dir=tx" not in comment or not opcode:
            continue
        op = int(opcode, 0)
        if op == 0x11 and syndrome:
            kind = int(syndrome, 0) >> 5
            seen["nak"] += kind == 3
            seen["rnr"] += kind == 1
        elif op < 0x40 and op not in (0x0D, 0x0E, 0x0F, 0x10, 0x11, 0x12):
            seen["retrans" if "retrans=1" in comment else "first"] += 1
    for k in ("first", "retrans", "nak", "rnr"):
        expect(drawn[k] == seen[k], f"{k}: drew {drawn[k]}, the trace has {seen[k]}")
    expect(seen["retrans"] > 0 and seen["nak"] > 0, "the faults caused resends and NAKs", seen)
    print("drawn:", dict(drawn), "trace:", dict(seen))

    # Bad input: not a capture, a flow that is not there.
    bad = os.path.join(tmp, "bad.pcapng")
    with open(bad, "wb") as f:
        f.write(b"not a capture at all")
    for a in ([bad, "-o", png], [merged, "-o", png, "--flow", "99"], [merged]):
        r = subprocess.run([softrdma, "trace", "plot", *a], capture_output=True, text=True)
        expect(r.returncode == 2 and r.stderr.strip(), f"trace plot {a}: exit 2", r.stderr)

print(f"plot: {len(failures)} failures")
sys.exit(1 if failures else 0)
