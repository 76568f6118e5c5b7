#!/usr/bin/env python3
"""Packets built by wire/ decode in tshark with the expected fields and nothing malformed.

usage: check_tshark_decode.py GEN TSHARK WORKDIR
GEN is roce_pcap_gen; it prints the fields each frame must show."""
import os
import subprocess
import sys

gen, tshark, work = sys.argv[1:4]
os.makedirs(work, exist_ok=True)
pcap = os.path.join(work, "tshark_decode.pcap")
expected = subprocess.run([gen, "11", "400", pcap], check=True, capture_output=True,
                          text=True).stdout.splitlines()

names = ["bth.opcode", "bth.destqp", "bth.psn", "deth.q_key", "deth.srcqp", "reth.va",
         "reth.r_key", "reth.dmalen", "atomiceth.swapdt", "atomiceth.cmpdt", "aeth.syndrome",
         "aeth.msn", "atomicacketh.origremdt", "immdt", "ieth"]
# The payloads are random bytes: the heuristics that take an IB payload for Ethernet (EoIB,
# Ethernet over IB) would find malformed frames in them, which say nothing of the headers.
cmd = [tshark, "-n", "-r", pcap, "--disable-protocol", "rpcordma",
       "--disable-heuristic", "mellanox_eoib", "--disable-heuristic", "eth_over_ib", "-T", "fields",
       "-E", "separator=\t", "-E", "occurrence=f", "-e", "frame.number", "-e", "_ws.malformed", "-e", "_ws.expert.severity"]
for n in names:
    cmd += ["-e", "infiniband." + n]
out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.splitlines()
if len(out) != len(expected):
    sys.exit(f"tshark printed {len(out)} lines for {len(expected)} frames")

def norm(name, value):
    if value == "":
        return value
    if name in ("immdt", "ieth"):
        return value.replace(":", "").lower()
    return str(int(value, 0))

failures = 0
for want_line, got_line in zip(expected, out):
    want = want_line.split("\t")
    got = got_line.split("\t")
    frame = want[0]
    fields = dict(kv.split("=", 1) for kv in want[1:])
    fields["bth.opcode"] = fields.pop("opcode")
    fields["bth.destqp"] = fields.pop("destqp")
    fields["bth.psn"] = fields.pop("psn")
    if got[0] != frame:
        sys.exit(f"frame order differs: {got[0]} vs {frame}")
    if got[1]:
        print(f"frame {frame}: tshark marks it malformed: {got_line}")
        failures += 1
    decoded = dict(zip(names, got[3:]))
    for name, value in fields.items():
        have = norm(name, decoded.get(name, ""))
        if have != norm(name, value):
            print(f"frame {frame}: infiniband.{name}: expected {value}, tshark shows {decoded.get(name)!r}")
            failures += 1
print(f"{len(expected)} frames compared, {failures} mismatches")
sys.exit(1 if failures else 0)
