#!/usr/bin/env python3
"""`softrdma lint` on the conformance captures, damaged files and bad options:
exact violations, exit codes 0/1/2, and --json; severities: a capture whose only violations
are reserved bits (built here with scapy, shaped as a Huawei NIC sends them) passes with
warnings, fails with --strict, and an error (a bad ICRC) fails.

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


def lint_json(*args):
    """Exit status and the JSON document (empty when none was printed)."""
    r = lint("--json", *args)
    try:
        return r.returncode, json.loads(r.stdout)
    except json.JSONDecodeError:
        expect(False, f"lint --json {args}: no JSON ({r.stdout!r} {r.stderr!r})")
        return r.returncode, {"violations": []}


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
expect([x.get("severity") for x in doc["violations"]] == ["error", "error"],
       f"roce capture severities {doc['violations']}")
expect(doc["violation_count"] == 2 and doc.get("error_count") == 2
       and doc.get("warning_count") == 0, f"roce capture counts {doc}")

# Text output names frame, rule, expected and found, and ends with a summary line.
r = lint(os.path.join(conf, "roce-good-badicrc-truncated.pcap"))
lines = r.stdout.strip().splitlines()
expect(len(lines) == 3 and lines[0].startswith("frame 2: ")
       and ": error: roce.icrc: expected 9d8844e5, found 9c8844e5" in lines[0],
       f"text output {lines}")
expect("3 packets read, 3 RoCEv2 packets, 0 iWARP FPDUs, 2 violations (2 errors, 0 warnings)"
       in lines[-1], f"summary line {lines[-1:]}")

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
r = lint("--help")
expect(r.returncode == 0 and "--strict" in r.stdout, f"--help: {r.returncode} {r.stdout!r}")

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



def huawei_capture(path, bad_icrc=False):
    """RC SEND, WRITE and ACKs as a Huawei NIC sends them: BTH byte 4 = 0x10 (a reserved bit),
    MigReq 1, UDP source port 69 on some packets; scapy computes correct ICRCs. With
    bad_icrc, the WRITE's payload is changed after its ICRC was computed."""
    import struct
    from scapy.all import Ether, IP, UDP, Raw, raw, wrpcap, load_contrib
    load_contrib("roce")
    from scapy.contrib.roce import BTH, AETH

    def roce(forward, sport, bth, rest=b""):
        src, dst = ("10.0.0.1", "10.0.0.2") if forward else ("10.0.0.2", "10.0.0.1")
        p = Ether() / IP(src=src, dst=dst, flags="DF") / UDP(sport=sport, dport=4791, chksum=0)
        return p / bth / Raw(rest) if rest else p / bth

    hw = dict(migreq=1, resv6=0x10)

    def ack(psn, msn):
        return roce(False, 0xC123, BTH(opcode=0x11, dqpn=0x22, psn=psn, **hw)
                    / AETH(syndrome=0x1F, msn=msn))

    frames = [
        roce(True, 69, BTH(opcode=0x04, dqpn=0x11, psn=100, ackreq=1, **hw), bytes(range(64))),
        ack(100, 1),
        roce(True, 69, BTH(opcode=0x0A, dqpn=0x11, psn=101, ackreq=1, **hw),
             struct.pack(">QII", 0x10000, 0x77, 32) + bytes(32)),  # RETH + 32 bytes
        ack(101, 2),
    ]
    frames = [bytearray(raw(f)) for f in frames]
    for f in frames:
        assert f[14 + 20 + 8 + 4] == 0x10 and f[14 + 20 + 8 + 1] & 0x40  # byte 4, MigReq
    if bad_icrc:
        frames[2][-10] ^= 0x01
    wrpcap(path, [Ether(bytes(f)) for f in frames])


hw = os.path.join(work, "huawei-reserved.pcap")
huawei_capture(hw)
rc, doc = lint_json(hw)
expect(rc == 0, f"reserved bits only: exit 0, got {rc}")
expect([(x["frame"], x["rule"], x.get("severity")) for x in doc["violations"]]
       == [(n, "roce.bth_reserved", "warning") for n in (1, 2, 3, 4)],
       f"reserved bits only: violations {doc['violations']}")
expect(doc.get("violation_count") == 4 and doc.get("error_count") == 0
       and doc.get("warning_count") == 4, f"reserved bits only: counts {doc}")
first = doc["violations"][:1]
expect(first and first[0]["flow"] == "10.0.0.1:69 > 10.0.0.2:4791 qp 0x000011"
       and first[0]["found"] == "byte4 0x10 byte8 0x00",
       f"reserved bits only: first violation {doc['violations'][:1]}")
r = lint(hw)
lines = r.stdout.strip().splitlines()
expect(r.returncode == 0 and len(lines) == 5 and all(": warning: roce.bth_reserved: " in x
                                                      for x in lines[:4]),
       f"reserved bits only, text: exit {r.returncode}, {lines}")
expect(lines and lines[-1].endswith("4 violations (0 errors, 4 warnings)"),
       f"reserved bits only, summary {lines[-1:]}")
r = lint("--strict", hw)
expect(r.returncode == 1, f"reserved bits only with --strict: exit 1, got {r.returncode}")
rc, doc = lint_json("--strict", hw)
expect(rc == 1 and doc.get("warning_count") == 4, f"--strict --json: exit {rc}, {doc}")

bad = os.path.join(work, "huawei-bad-icrc.pcap")
huawei_capture(bad, bad_icrc=True)
for args in ([], ["--strict"]):
    rc, doc = lint_json(*args, bad)
    expect(rc == 1, f"bad ICRC {args}: exit 1, got {rc}")
    expect([(x["frame"], x["rule"], x.get("severity")) for x in doc["violations"]
            if x.get("severity") == "error"] == [(3, "roce.icrc", "error")],
           f"bad ICRC {args}: errors {doc['violations']}")
    expect(doc.get("error_count") == 1 and doc.get("warning_count") == 4,
           f"bad ICRC {args}: counts {doc}")

# A file name with quotes, backslashes, control characters and a byte that is not UTF-8 still
# gives valid (UTF-8) JSON, read and unreadable alike; the bad byte becomes U+FFFD.
import shutil  # noqa: E402
odd = os.path.join(work, 'q"uo\\te\x01\x1f\ttab\nnl')
shutil.copyfile(os.path.join(conf, "roce-good-badicrc-truncated.pcap"), odd)
for name, want in ((os.fsencode(odd), odd),
                   (os.fsencode(odd) + b"\xff.pcap", odd + "\ufffd.pcap")):
    r = subprocess.run([os.fsencode(softrdma), b"lint", b"--json", name], capture_output=True,
                       timeout=60)
    try:
        doc = json.loads(r.stdout.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        doc = {}
        expect(False, f"lint --json {name!r}: not valid UTF-8 JSON ({e}): {r.stdout!r}")
    expect(doc.get("file") == want, f"lint --json {name!r}: file {doc.get('file')!r}")
    expect(("violations" in doc) == (want == odd) and ("error" in doc) == (want != odd),
           f"lint --json {name!r}: read or not {doc}")

print(f"{len(failures)} failures")
sys.exit(1 if failures else 0)
