#!/usr/bin/env python3
"""`softrdma lint` on the conformance captures, damaged files and bad options:
exact violations, exit codes 0/1/2, and --json.

usage: check_lint_cli.py SOFTRDMA CONFORMANCE_DIR WORKDIR"""
import json
import os
import subprocess
import sys

softrdma, conf, work = sys.argv[1:4]
os.makedirs(work, exist_ok=True)
failures = []


def lint(*args):
    return subprocess.run([softrdma, "lint", *args], capture_output=True, text=True, timeout=60)


def expect(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def violations(path):
    r = lint("--json", path)
    doc = json.loads(r.stdout)
    return r.returncode, doc, [(v["frame"], v["rule"]) for v in doc["violations"]]


# The RoCE capture: exactly the bad ICRC (frame 2) and the truncation (frame 3).
rc, doc, v = violations(os.path.join(conf, "roce-good-badicrc-truncated.pcap"))
expect(rc == 1, f"roce capture exit 1, got {rc}")
expect(v == [(2, "roce.icrc"), (3, "roce.truncated")], f"roce capture violations {v}")
expect(doc["packets"] == 3 and doc["roce_packets"] == 3, f"roce capture counters {doc}")
icrc = [x for x in doc["violations"] if x["rule"] == "roce.icrc"]
expect(icrc and icrc[0]["expected"] == "9d8844e5" and icrc[0]["found"] == "9c8844e5",
       f"ICRC expected/found {icrc}")

# Text output names frame, rule, expected and found, and ends with a summary line.
r = lint(os.path.join(conf, "roce-good-badicrc-truncated.pcap"))
lines = r.stdout.strip().splitlines()
expect(len(lines) == 3 and lines[0].startswith("frame 2: ") and "roce.icrc" in lines[0]
       and "expected 9d8844e5, found 9c8844e5" in lines[0], f"text output {lines}")
expect("3 packets read, 3 RoCEv2 packets, 0 iWARP FPDUs, 2 violations" in lines[-1],
       f"summary line {lines[-1:]}")

# MPA captures: clean with CRC, two CRC violations when the CRC is byte-swapped.
for name in ("mpa-crc-rev1.pcap", "mpa-crc-rev2.pcap"):
    rc, doc, v = violations(os.path.join(conf, name))
    expect(rc == 0 and v == [], f"{name}: exit {rc}, violations {v}")
    expect(doc["iwarp_fpdus"] == 2 and doc["mpa_frames"] == 2, f"{name}: counters {doc}")
rc, doc, v = violations(os.path.join(conf, "mpa-crc-wrong-byte-order.pcap"))
expect(rc == 1 and [r for _, r in v] == ["fpdu.crc", "fpdu.crc"],
       f"wrong byte order: exit {rc}, violations {v}")

# Unreadable input: exit 2 with a message, never a crash.
good = open(os.path.join(conf, "roce-good-badicrc-truncated.pcap"), "rb").read()
cases = {
    "missing": None,
    "empty": b"",
    "garbage": bytes(range(256)) * 8,
    "header-only": good[:24],
    "cut-mid-record": good[:24 + 16 + 30],
    "cut-mid-header": good[:30],
}
for name, data in cases.items():
    path = os.path.join(work, name + ".pcap")
    if data is None:
        if os.path.exists(path):
            os.unlink(path)
    else:
        open(path, "wb").write(data)
    r = lint(path)
    if name == "header-only":
        expect(r.returncode == 0, f"{name}: a capture with no packet is clean, got {r.returncode}")
        continue
    expect(r.returncode == 2, f"{name}: exit 2, got {r.returncode} ({r.stderr.strip()})")
    expect(r.stderr.strip() != "", f"{name}: a message on stderr")
    expect(r.returncode >= 0, f"{name}: killed by signal {-r.returncode}")

# Bad options are usage errors.
for args in (["--bogus", "x.pcap"], ["--roce-port", "70000", "x.pcap"], ["--roce-port"], []):
    r = lint(*args)
    expect(r.returncode == 2 and "usage" in r.stderr, f"args {args}: exit {r.returncode}")

# --roce-port: the same RoCE packets on another port are found only when asked.
moved = bytearray(good)
off = 24
while off < len(moved):
    caplen = int.from_bytes(moved[off + 8:off + 12], "little")
    frame = off + 16
    moved[frame + 36:frame + 38] = (5000).to_bytes(2, "big")  # UDP destination port
    off = frame + caplen
path = os.path.join(work, "port5000.pcap")
open(path, "wb").write(moved)
rc, doc, v = violations(path)
expect(rc == 0 and doc["roce_packets"] == 0, f"port 5000 without --roce-port: {rc} {doc}")
r = lint("--json", "--roce-port", "5000", path)
doc = json.loads(r.stdout)
# The ICRC covers the UDP header, so moving the port breaks both ICRCs.
expect(r.returncode == 1 and [(x["frame"], x["rule"]) for x in doc["violations"]]
       == [(1, "roce.icrc"), (2, "roce.icrc"), (3, "roce.truncated")],
       f"port 5000 with --roce-port: {r.returncode} {doc}")

print(f"{len(failures)} failures")
sys.exit(1 if failures else 0)
