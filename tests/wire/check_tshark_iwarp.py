#!/usr/bin/env python3
"""The iWARP part of `softrdma sample-trace` decodes in tshark and lints clean.

usage: check_tshark_iwarp.py SOFTRDMA TSHARK WORKDIR

tshark must show no malformed frame, a good MPA CRC on every FPDU, the MPA request and
reply of both connections with their revisions, and the RDMAP opcodes and DDP fields the
sample was built with; `softrdma lint --json` must find no violation and count the same
FPDUs."""
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from testlib import lint_json  # noqa: E402

softrdma, tshark, work = sys.argv[1:4]
os.makedirs(work, exist_ok=True)
pcap = os.path.join(work, "sample_iwarp.pcap")
subprocess.run([softrdma, "sample-trace", pcap], check=True, capture_output=True)

fields = ["frame.number", "_ws.malformed", "tcp.srcport", "iwarp_mpa.req", "iwarp_mpa.rep",
          "iwarp_mpa.rev", "iwarp_mpa.crc_flag", "iwarp_mpa.marker_flag", "iwarp_mpa.fpdu",
          "iwarp_mpa.crc_check", "iwarp_mpa.marker_fpduptr", "iwarp_rdma.opcode",
          "iwarp_ddp.last_flag", "iwarp_ddp.stag", "iwarp_ddp.tagged_offset", "iwarp_ddp.qn",
          "iwarp_ddp.msn", "iwarp_rdma.inval_stag", "iwarp_rdma.rdmardsz"]
cmd = [tshark, "-n", "-r", pcap, "--disable-protocol", "rpcordma", "-T", "fields",
       "-E", "separator=\t", "-E", "occurrence=a", "-E", "aggregator=,", "-Y", "tcp"]
for f in fields:
    cmd += ["-e", f]
rows = [dict(zip(fields, line.split("\t")))
        for line in subprocess.run(cmd, check=True, capture_output=True,
                                   text=True).stdout.splitlines()]

# tshark prints the CRC check as a number; "Good CRC32" is only in the verbose text.
verbose = subprocess.run([tshark, "-n", "-r", pcap, "--disable-protocol", "rpcordma", "-V"],
                         check=True, capture_output=True, text=True).stdout
good_crcs = verbose.count("(Good CRC32)")
bad_crcs = verbose.count("(Bad CRC32")

failures = []


def expect(cond, what):
    if not cond:
        failures.append(what)


for r in rows:
    expect(r["_ws.malformed"] == "", f"frame {r['frame.number']}: malformed")

mpa = [r for r in rows if r["iwarp_mpa.req"] or r["iwarp_mpa.rep"]]
expect(len(mpa) == 4, f"4 MPA request/reply frames, found {len(mpa)}")
by_port = {r["tcp.srcport"]: r for r in mpa}
# Connection 1 (40001 > 40002): revision 2, CRC, no markers. Connection 2 (40003 > 40004):
# revision 1, CRC and markers both ways.
for port, rev, markers in (("40001", "2", "0"), ("40002", "2", "0"), ("40003", "1", "1"),
                           ("40004", "1", "1")):
    r = by_port.get(port)
    expect(r is not None, f"an MPA frame from port {port}")
    if r:
        expect(r["iwarp_mpa.rev"] == rev, f"port {port}: MPA revision {rev}, got {r['iwarp_mpa.rev']}")
        expect(r["iwarp_mpa.crc_flag"] in ("1", "True"), f"port {port}: C flag set")
        expect(r["iwarp_mpa.marker_flag"] in ((markers,) + (("True",) if markers == "1" else ("False",))),
               f"port {port}: M flag {markers}, got {r['iwarp_mpa.marker_flag']}")

fpdus = [r for r in rows if r["iwarp_mpa.fpdu"] != "" or r["iwarp_rdma.opcode"] != ""]
expect(len(fpdus) == 17, f"17 FPDUs, tshark shows {len(fpdus)}")
expect(good_crcs == len(fpdus) and bad_crcs == 0,
       f"a good CRC on every FPDU: {good_crcs} good, {bad_crcs} bad, {len(fpdus)} FPDUs")
for r in fpdus:
    expect(r["iwarp_mpa.crc_check"] != "", f"frame {r['frame.number']}: no CRC check shown")

# (source port, opcode, last, STag, TO) per FPDU, in capture order; None: not a tagged field.
WRITE, RREQ, RRESP, SEND, SEND_INV, SEND_SE, SEND_SE_INV = 0, 1, 2, 3, 4, 5, 6
want = [
    ("40001", SEND, None, None), ("40001", WRITE, 0x1a01, 0x7f0000001000),
    ("40001", WRITE, 0x1a01, 0x7f0000001400), ("40001", WRITE, 0x1a01, 0x7f0000001800),
    ("40001", RREQ, None, None), ("40002", RRESP, 0x1b02, 0x7f0000008000),
    ("40002", RRESP, 0x1b02, 0x7f0000008400), ("40002", SEND_INV, None, None),
    ("40003", SEND, None, None), ("40003", SEND_SE, None, None),
    ("40003", WRITE, 0x3d04, 0x100000), ("40003", WRITE, 0x3d04, 0x100578),
    ("40003", WRITE, 0x3d04, 0x100af0), ("40003", RREQ, None, None),
    ("40004", RRESP, 0x3e05, 0x200000), ("40004", RRESP, 0x3e05, 0x200578),
    ("40004", SEND_SE_INV, None, None),
]
for r, (port, opcode, stag, to) in zip(fpdus, want):
    n = r["frame.number"]
    expect(r["tcp.srcport"] == port, f"frame {n}: from port {port}")
    expect(r["iwarp_rdma.opcode"] != "" and int(r["iwarp_rdma.opcode"], 0) == opcode,
           f"frame {n}: RDMAP opcode {opcode}, got {r['iwarp_rdma.opcode']!r}")
    if stag is not None:
        expect(r["iwarp_ddp.stag"] != "" and int(r["iwarp_ddp.stag"], 0) == stag,
               f"frame {n}: STag {stag:#x}, got {r['iwarp_ddp.stag']!r}")
        expect(r["iwarp_ddp.tagged_offset"] != "" and int(r["iwarp_ddp.tagged_offset"], 0) == to,
               f"frame {n}: TO {to:#x}, got {r['iwarp_ddp.tagged_offset']!r}")
    else:
        expect(r["iwarp_ddp.qn"] != "", f"frame {n}: untagged, a queue number")
        want_qn = 1 if opcode == RREQ else 0
        expect(r["iwarp_ddp.qn"] != "" and int(r["iwarp_ddp.qn"], 0) == want_qn,
               f"frame {n}: QN {want_qn}, got {r['iwarp_ddp.qn']!r}")
    if opcode in (SEND_INV, SEND_SE_INV):
        expect(r["iwarp_rdma.inval_stag"] != "", f"frame {n}: an Invalidate STag")
    if opcode == RREQ:
        expect(r["iwarp_rdma.rdmardsz"] != "", f"frame {n}: a Read Message Size")
# Only the last DDP segment of each message has L set.
lasts = [r["iwarp_ddp.last_flag"] in ("1", "True") for r in fpdus]
expect(lasts == [True, False, False, True, True, False, True, True, True, True, False, False, True,
                 True, False, True, True], f"DDP L flags {lasts}")
# The marker connection carries markers (its short Read Request crosses no 512 boundary);
# the first FPDU in each direction begins on one.
markers = [r for r in fpdus if r["iwarp_mpa.marker_fpduptr"] != ""]
expect(len(markers) == 8, f"8 FPDUs with markers (not the Read Request), found {len(markers)}")
firsts = [r for r in markers if r["iwarp_mpa.marker_fpduptr"].split(",")[0] == "0"]
expect(len(firsts) == 2, f"2 FPDUs led by a marker with FPDUPTR 0, found {len(firsts)}")

code, doc, out = lint_json(softrdma, pcap)
expect(doc is not None, f"softrdma lint --json printed JSON: {out!r}")
doc = doc or {}
expect(code == 0, f"softrdma lint exit status {code}")
expect(doc.get("violation_count") == 0, f"lint violations: {doc.get('violations')}")
expect(doc.get("iwarp_fpdus") == 17, f"lint counts 17 FPDUs, got {doc.get('iwarp_fpdus')}")
expect(doc.get("mpa_frames") == 4, f"lint counts 4 MPA frames, got {doc.get('mpa_frames')}")

for f in failures:
    print(f)
print(f"{len(rows)} TCP frames, {len(fpdus)} FPDUs, {good_crcs} good CRCs, "
      f"{len(failures)} failures")
sys.exit(1 if failures else 0)
