#!/usr/bin/env python3
"""softiwarp0 traces to the process's --pcap file: the verbs test's connection (made through
softrdma_iwarp_cm(), CRC on) decodes in tshark with good CRCs and nothing malformed, and
`softrdma lint` finds no violation.

usage: check_verbs_trace.py VERBS_IWARP_TESTS SOFTRDMA TSHARK WORKDIR"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from testlib import lint_json, skip  # noqa: E402

tests, softrdma, tshark, work = sys.argv[1:5]
if not tshark:
    skip("tshark is not installed")
os.makedirs(work, exist_ok=True)
pcap = os.path.join(work, "verbs_iwarp.pcapng")
if os.path.exists(pcap):
    os.remove(pcap)
env = dict(os.environ, SOFTRDMA_PCAP=pcap)
r = subprocess.run([tests, "--gtest_filter=*ConnectThroughTheCm*"], env=env, capture_output=True,
                   text=True, timeout=120)
failures = []
if r.returncode != 0:
    failures.append("the verbs test failed:\n" + r.stdout[-3000:] + r.stderr[-2000:])
verbose = subprocess.run([tshark, "-n", "-r", pcap, "--disable-protocol", "rpcordma", "-V"],
                         capture_output=True, text=True).stdout
good = verbose.count("(Good CRC32)")
if "Malformed" in verbose:
    failures.append("tshark shows a malformed frame")
if "Bad CRC32" in verbose:
    failures.append("tshark shows a bad CRC")
if good < 3:
    failures.append(f"tshark shows {good} good CRCs, expected the WRITE, SEND and RTR FPDUs")
if "softrdma: dir=tx dev=softiwarp0" not in verbose:
    failures.append("frames are not annotated as softiwarp0's")
code, doc, out = lint_json(softrdma, pcap)
if doc is None:
    failures.append(f"softrdma lint printed no JSON: {out!r}")
elif code != 0 or doc.get("violation_count") != 0:
    failures.append(f"lint: exit {code}, violations {doc.get('violations')}")
if doc.get("mpa_frames") != 2 or not doc.get("iwarp_fpdus"):
    failures.append(f"lint counts {doc.get('mpa_frames')} MPA frames, {doc.get('iwarp_fpdus')} FPDUs")
for f in failures:
    print("FAIL:", f)
print(f"{good} good CRCs, lint {doc.get('iwarp_fpdus')} FPDUs, {len(failures)} failures")
sys.exit(1 if failures else 0)
