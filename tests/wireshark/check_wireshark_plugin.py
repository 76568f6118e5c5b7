#!/usr/bin/env python3
"""tshark with the softrdma plugin: the plugin loads from WIRESHARK_PLUGIN_DIR, a bad ICRC is
flagged (expert info "Bad ICRC", filterable) and good ones are not, MPA revision 2 IRD/ORD
words decode, and softrdma pcapng packet comments become softrdma.* fields.

usage: check_wireshark_plugin.py TSHARK SOFTRDMA PLUGIN_DIR CONFORMANCE_DIR WORKDIR

tshark ignores WIRESHARK_PLUGIN_DIR (and the personal plugin folder) when it starts as root, so
as root every tshark here runs as nobody through setpriv."""
import atexit
import os
import shutil
import struct
import subprocess
import sys
import tempfile

tshark, softrdma, plugin_dir, conf, work = sys.argv[1:6]
os.makedirs(work, exist_ok=True)
os.chmod(work, 0o755)
failures = []

prefix = []
if os.geteuid() == 0:
    setpriv = shutil.which("setpriv")
    if not setpriv:
        print("SKIP: running as root and setpriv is missing; tshark would not load the plugin")
        sys.exit(77)
    prefix = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]
    # nobody may not be able to enter the build tree (a checkout under /root, say): give
    # tshark copies of the plugin and the inputs in a directory it can read.
    readable = tempfile.mkdtemp(prefix="softrdma-wireshark-")
    atexit.register(shutil.rmtree, readable, True)
    os.chmod(readable, 0o755)
    shutil.copytree(plugin_dir, os.path.join(readable, "plugins"))
    plugin_dir = os.path.join(readable, "plugins")
    shutil.copy(os.path.join(conf, "roce-good-badicrc-truncated.pcap"), readable)
    conf = readable
    work = readable
    home = os.path.join(work, "home")
    os.makedirs(home, exist_ok=True)
    os.chmod(home, 0o777)
env = dict(os.environ, WIRESHARK_PLUGIN_DIR=plugin_dir)
if prefix:
    env["HOME"] = home


def expect(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def run_tshark(*args):
    r = subprocess.run(prefix + [tshark, *args], capture_output=True, text=True, env=env,
                       timeout=120)
    if r.returncode != 0:
        print(f"tshark {' '.join(args)} exited {r.returncode}: {r.stderr.strip()}")
    return r


def fields(path, names, dfilter=None):
    args = ["-r", path, "-T", "fields", "-E", "separator=|"]
    for n in ["frame.number", *names]:
        args += ["-e", n]
    if dfilter:
        args += ["-Y", dfilter]
    r = run_tshark(*args)
    rows = {}
    for line in r.stdout.splitlines():
        cols = line.split("|")
        rows[int(cols[0])] = cols[1:]
    return rows


# 1. The plugin loads.
r = run_tshark("-G", "plugins")
expect(any(line.startswith("softrdma.so") and plugin_dir.rstrip("/") in line
           for line in r.stdout.splitlines()), f"tshark -G plugins lists softrdma.so: {r.stdout}")

# 2. ICRC: frame 2 of the conformance capture carries a wrong ICRC, frame 1 a good one.
roce = os.path.join(conf, "roce-good-badicrc-truncated.pcap")
r = run_tshark("-r", roce, "-q", "-z", "expert")
bad_lines = [line for line in r.stdout.splitlines() if "Bad ICRC" in line]
expect(len(bad_lines) == 1 and "softrdma" in bad_lines[0] and "Checksum" in bad_lines[0]
       and bad_lines[0].split()[0] == "1", f"one Bad ICRC in tshark -z expert: {r.stdout}")
errors = r.stdout.split("Errors", 1)
expect(len(errors) == 2 and "Bad ICRC" in errors[1].split("Warns", 1)[0],
       "Bad ICRC is listed under Errors")
rows = fields(roce, ["softrdma.icrc.computed", "softrdma.icrc.status"])
expect(rows.get(1) == ["0x9d8844e5", "1"], f"frame 1 ICRC good: {rows.get(1)}")
expect(rows.get(2) == ["0x9d8844e5", "2"], f"frame 2 ICRC bad, computed 9d8844e5: {rows.get(2)}")
for flt in ("softrdma.icrc.bad", 'softrdma.icrc.status == "bad"', "_ws.expert.severity == error"
            " && _ws.expert.group == checksum"):
    rows = fields(roce, [], flt)
    expect(sorted(rows) == [2], f"filter {flt!r} selects frame 2 only: {sorted(rows)}")

# The sample trace: every RoCEv2 opcode over IPv4, IPv6 and a VLAN, all ICRCs good.
sample = os.path.join(work, "sample.pcap")
subprocess.run([softrdma, "sample-trace", sample], check=True, capture_output=True)
os.chmod(sample, 0o644)
rows = fields(sample, ["softrdma.icrc.status", "ipv6.src", "vlan.id"], "udp.dstport == 4791")
expect(len(rows) >= 40 and all(v[0] == "1" for v in rows.values()),
       f"all sample RoCEv2 ICRCs good: {rows}")
expect(any(v[1] for v in rows.values()) and any(v[2] for v in rows.values()),
       "the sample has IPv6 and VLAN RoCEv2 frames")

# IBTA 1.5, which tshark 4.0 does not know: sample-trace's FLUSH (global visibility, a range of
# 4096 bytes) and ATOMIC WRITE (bytes 00..07) decode as the plugin's fields.
rows = fields(sample, ["infiniband.bth.opcode", "softrdma.feth.placement",
                       "softrdma.feth.selectivity", "softrdma.reth.va", "softrdma.reth.dmalen",
                       "softrdma.atomic_write.data", "_ws.malformed"],
              "infiniband.bth.opcode == 28 || infiniband.bth.opcode == 29")
got = sorted(v for v in rows.values())
expect(got == [["28", "1", "0", "0x00007f0000001000", "4096", "", ""],
               ["29", "", "", "0x00007f0000001000", "8", "0001020304050607", ""]],
       f"FLUSH and ATOMIC WRITE fields: {got}")

# XRC (annex A14), whose headers tshark 4.0 does not decode: sample-trace's XRC SEND ONLY names
# SRQ 1, its WRITE ONLY carries the sample's RETH, its ACK an AETH; nothing is malformed.
rows = fields(sample, ["softrdma.xrc.opcode", "softrdma.xrceth.srqn", "softrdma.reth.va",
                       "softrdma.aeth.syndrome", "_ws.malformed"],
              "infiniband.bth.opcode >= 160 && infiniband.bth.opcode <= 183")
got = {v[0]: v[1:] for v in rows.values()}
expect(len(rows) >= 23 and all(v[0] for v in rows.values()) and
       not any(v[4] for v in rows.values()), f"every XRC opcode decoded: {rows}")
expect(got.get("0xa4") == ["0x00000001", "", "", ""], f"XRC SEND ONLY: {got.get('0xa4')}")
expect(got.get("0xaa") == ["0x00000001", "0x00007f0000001000", "", ""],
       f"XRC RDMA WRITE ONLY: {got.get('0xaa')}")
expect(got.get("0xb1") == ["", "", "0x1f", ""], f"XRC ACKNOWLEDGE: {got.get('0xb1')}")

# 3. MPA revision 2: sample-trace's request carries IRD 16, ORD 8 (its reply 8, 16).
rows = fields(sample, ["softrdma.mpa.ird", "softrdma.mpa.ord", "iwarp_mpa.req"],
              "softrdma.mpa.ird")
req = [v for v in rows.values() if v[2] == "1"]
expect(len(req) >= 1 and all(v[:2] == ["16", "8"] for v in req),
       f"MPA rev 2 request IRD 16 ORD 8: {rows}")


# 4. A pcapng with softrdma packet comments, and MPA frames with the RTR flags set.
def ipv4_checksum(h):
    s = sum(struct.unpack("!10H", h))
    while s > 0xFFFF:
        s = (s & 0xFFFF) + (s >> 16)
    return (~s) & 0xFFFF


def frame(proto, sport, dport, payload):
    eth = bytes.fromhex("020000000002" "020000000001" "0800")
    if proto == 17:
        l4 = struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload
    else:
        l4 = struct.pack("!HHIIBBHHH", sport, dport, 1000, 0, 5 << 4, 0x18, 65535, 0, 0) + payload
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(l4), 1, 0x4000, 64, proto, 0,
                     bytes([192, 0, 2, 1]), bytes([192, 0, 2, 2]))
    ip = ip[:10] + struct.pack("!H", ipv4_checksum(ip)) + ip[12:]
    return eth + ip + l4


def block(btype, body):
    body += b"\0" * (-len(body) % 4)
    return struct.pack("<II", btype, 12 + len(body)) + body + struct.pack("<I", 12 + len(body))


def option(code, value):
    return struct.pack("<HH", code, len(value)) + value + b"\0" * (-len(value) % 4)


def pcapng(path, packets):
    out = block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1))
    out += block(1, struct.pack("<HHI", 1, 0, 65535))
    for i, (data, comments) in enumerate(packets):
        opts = b"".join(option(1, c.encode()) for c in comments)
        if opts:
            opts += option(0, b"")
        ts = 1_700_000_000_000_000 + i
        body = struct.pack("<IIIII", 0, ts >> 32, ts & 0xFFFFFFFF, len(data), len(data))
        body += data + b"\0" * (-len(data) % 4) + opts
        out += block(6, body)
    with open(path, "wb") as f:
        f.write(out)
    os.chmod(path, 0o644)


def mpa(key, flags, rev, private):
    return key + struct.pack("!BBH", flags, rev, len(private)) + private


udp = frame(17, 50000, 9999, b"hello")
annotated = os.path.join(work, "annotated.pcapng")
pcapng(annotated, [
    (udp, ["softrdma: dir=tx dev=softroce0 qp=0x000011 fault=drop"]),
    (udp, ["softrdma: dir=rx dev=softroce1 qp=0x0000ff drop=icrc retrans=1"]),
    (udp, ["an ordinary comment"]),
    (udp, []),
    (frame(6, 40000, 5000, mpa(b"MPA ID Req Frame", 0x50, 2,
                               struct.pack("!HH", 0xC00A, 0x8005) + b"hi")), []),
    (frame(6, 5000, 40000, mpa(b"MPA ID Rep Frame", 0x50, 2,
                               struct.pack("!HH", 0x0005, 0x400A))), []),
    (frame(6, 40001, 5000, mpa(b"MPA ID Req Frame", 0x40, 1, b"")), []),
])
names = ["softrdma.dir", "softrdma.dev", "softrdma.qp", "softrdma.fault", "softrdma.drop",
         "softrdma.retrans"]
rows = fields(annotated, names)
expect(rows.get(1) == ["tx", "softroce0", "0x00000011", "drop", "", ""],
       f"frame 1 annotation: {rows.get(1)}")
expect(rows.get(2) == ["rx", "softroce1", "0x000000ff", "", "icrc", "1"],
       f"frame 2 annotation: {rows.get(2)}")
expect(rows.get(3) == [""] * 6 and rows.get(4) == [""] * 6, f"frames 3-4 carry no annotation")
for flt, want in (('softrdma.fault == "drop"', [1]), ("softrdma.retrans", [2]),
                  ("softrdma.qp == 0x11", [1]), ('softrdma.dir == "rx"', [2]), ("softrdma", [1, 2, 5, 6])):
    got = sorted(fields(annotated, [], flt))
    expect(got == want, f"filter {flt!r}: frames {got}, want {want}")

mpa_names = ["softrdma.mpa.p2p", "softrdma.mpa.rtr_send", "softrdma.mpa.ird",
             "softrdma.mpa.rtr_write", "softrdma.mpa.rtr_read", "softrdma.mpa.ord"]
rows = fields(annotated, mpa_names)
expect(rows.get(5) == ["1", "1", "10", "1", "0", "5"], f"MPA request IRD/ORD words: {rows.get(5)}")
expect(rows.get(6) == ["0", "0", "5", "0", "1", "10"], f"MPA reply IRD/ORD words: {rows.get(6)}")
expect(rows.get(7) == [""] * 6, f"a revision 1 request has no IRD/ORD: {rows.get(7)}")

print(f"{len(failures)} failures")
sys.exit(1 if failures else 0)
