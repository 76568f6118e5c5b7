#!/usr/bin/env python3
"""ATOMIC WRITE and FLUSH on the wire: the GoogleTests that succeed with both run under
`softrdma run --pcap`; `softrdma lint` finds nothing wrong in the trace and tshark decodes it
with nothing malformed: FLUSH (0x1C) and ATOMIC WRITE (0x1D) requests by their BTH (tshark 4.0
knows neither opcode: the rest shows as unknown data), each answered by an RDMA READ response
ONLY (0x10) without payload.

usage: check_placement_trace.py SOFTRDMA TESTS TSHARK WORKDIR"""
import collections
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from testlib import expect, failures, skip  # noqa: E402

softrdma, tests, tshark, work = sys.argv[1:5]
if not tshark or not os.path.exists(tshark):
    skip("no tshark")
os.makedirs(work, exist_ok=True)
pcap = os.path.join(work, "placement.pcapng")
if os.path.exists(pcap):
    os.remove(pcap)

filt = "Placement.AnAtomicWriteStores*:Placement.AFlushCompletes*"
r = subprocess.run([softrdma, "run", "--pcap", pcap, "--", tests, f"--gtest_filter={filt}"],
                   capture_output=True, text=True, timeout=120)
expect(r.returncode == 0, f"the tests under softrdma run: exit {r.returncode}", r.stdout + r.stderr)

lint = subprocess.run([softrdma, "lint", pcap], capture_output=True, text=True, timeout=60)
expect(lint.returncode == 0 and " 0 violations" in lint.stdout, "softrdma lint of the trace",
       lint.stdout + lint.stderr)

out = subprocess.run([tshark, "-n", "-r", pcap, "-T", "fields", "-E", "separator=\t",
                      "-e", "infiniband.bth.opcode", "-e", "_ws.malformed",
                      "-e", "udp.length"], capture_output=True, text=True, timeout=60,
                     check=True).stdout.splitlines()
count = collections.Counter()
for line in out:
    opcode, malformed, udp_len = (line.split("\t") + ["", "", ""])[:3]
    expect(not malformed, "tshark marks a frame malformed", line)
    count[opcode] += 1
    if opcode == "16":  # READ response ONLY: BTH 12 + AETH 4 + ICRC 4, no payload
        expect(udp_len == "28", "a read response ONLY of this trace carries no payload", line)
    if opcode == "29":  # ATOMIC WRITE: BTH 12 + RETH 16 + 8 bytes + ICRC 4
        expect(udp_len == str(8 + 12 + 16 + 8 + 4), "an ATOMIC WRITE carries 8 bytes", line)
# Both ends trace every packet. Two atomic writes, three flushes (one refused: a NAK), and one
# empty read response for each that succeeded.
expect(count["29"] == 4, f"ATOMIC WRITE packets: {count['29']}", out)
expect(count["28"] == 6, f"FLUSH packets: {count['28']}", out)
expect(count["16"] == 8, f"empty read responses: {count['16']}", out)
sys.exit(1 if failures else 0)
