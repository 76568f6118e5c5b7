#!/usr/bin/env python3
"""A NIC-behaviour peer: plays a real RoCEv2 NIC's side of UD and RC exchanges with a softrdma QP.

The softrdma side is nicpeer_qp under `softrdma run --netdev udp:SW`; this script sends
NIC-shaped packets (built with python3-scapy, its RoCE layer computing the ICRC) through an
IPv4 raw socket from PEER to SW:4791, and reads softrdma's answers on a UDP socket bound to
PEER:4791. Shapes real NICs put on the wire (shared notes, nic-behaviours.md): BTH byte 4 =
0x10 (Huawei), MigReq = 1 (ConnectX, Huawei), IPv4 IDs counting, DF clear, UDP checksum 0 or
a real one, any UDP source port (69), TOS with ECN bits (0xC2).

usage: nicpeer.py SOFTRDMA NICPEER_QP      (needs CAP_NET_RAW; exits 77 without it)
"""
import os
import random
import select
import socket
import struct
import subprocess
import sys
import tempfile
import time
import zlib

SKIP = 77
softrdma, qp_prog = sys.argv[1:3]

try:
    RAW = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
except PermissionError:
    print("SKIP: an IPv4 raw socket needs CAP_NET_RAW (run as root)")
    sys.exit(SKIP)

try:
    from scapy.all import IP, UDP, Raw, raw, load_contrib  # noqa: E402
    load_contrib("roce")
    from scapy.contrib.roce import BTH  # noqa: E402
except ImportError as e:
    print(f"SKIP: python3-scapy with its RoCE layer is needed ({e})")
    sys.exit(SKIP)

rng = random.Random(int(os.environ.get("NICPEER_SEED", "16")))
# Our own pair of loopback addresses (softrdma's default ones are 127.1.x.y).
_net = (random.SystemRandom().randrange(100, 200), random.SystemRandom().randrange(0, 256))
SW = f"127.{_net[0]}.{_net[1]}.1"
PEER = f"127.{_net[0]}.{_net[1]}.2"
RX = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
RX.bind((PEER, 4791))

# RC opcodes (IBTA table 38), UD SEND
SEND_FIRST, SEND_MIDDLE, SEND_LAST, SEND_LAST_IMM, SEND_ONLY, SEND_ONLY_IMM = range(6)
WRITE_FIRST, WRITE_MIDDLE, WRITE_LAST, WRITE_LAST_IMM, WRITE_ONLY, WRITE_ONLY_IMM = range(6, 12)
READ_REQ, READ_FIRST, READ_MIDDLE, READ_LAST, READ_ONLY, ACK = range(12, 18)
ATOMIC_ACK, CMP_SWAP, FETCH_ADD = range(0x12, 0x15)
UD_SEND_ONLY, UD_SEND_ONLY_IMM = 0x64, 0x65
CNP = 0x81
ACK_SYN, NAK_PSN_SEQ, NAK_INV_REQ, NAK_REM_ACCESS = 0x1F, 0x60, 0x61, 0x62
MTU = 1024
QKEY = 0x11111111
PEER_QPN = 0x5A5A5A & 0xFFFFFF

failures = []
passes = []
received = []
cnps = 0


def check(name, ok, detail=""):
    (passes if ok else failures).append(name)
    print(f"{'ok  ' if ok else 'FAIL'} {name}" + ("" if ok else f"\n     {detail}"))
    return ok


# ---- the wire ---------------------------------------------------------------------------

class Shape:
    """How a NIC dresses a packet: IPv4 ID/flags, TOS, UDP source port and checksum, BTH bits."""

    def __init__(self, name, ident=1, df=False, tos=0, sport=0xC001, udp_csum=True, migreq=1,
                 byte4=0x10, resv7=0, ttl=64):
        self.name, self.ident, self.df, self.tos, self.sport = name, ident, df, tos, sport
        self.udp_csum, self.migreq, self.byte4, self.resv7, self.ttl = udp_csum, migreq, byte4, resv7, ttl

    def __repr__(self):
        return (f"{self.name}(id={self.ident:#x} df={int(self.df)} tos={self.tos:#04x} sport={self.sport} "
                f"udp_csum={'real' if self.udp_csum else 0} migreq={self.migreq} byte4={self.byte4:#04x} "
                f"resv7={self.resv7:#x})")


_ident = [0x3F00]


def nic_shape(name="nic"):
    """A random NIC-looking shape (IDs counting, DF clear, ports, ECN-capable TOS)."""
    _ident[0] = (_ident[0] + rng.randrange(1, 40)) & 0xFFFF or 1
    return Shape(name, ident=_ident[0], df=rng.random() < 0.2, tos=rng.choice([0, 0x02, 0xC2, 0x62, 0xA0]),
                 sport=rng.choice([69, 4791, 49152 + rng.randrange(16384), rng.randrange(1024, 65536)]),
                 udp_csum=rng.random() < 0.5, migreq=rng.choice([0, 1]), byte4=rng.choice([0, 0x10, 0x3F]),
                 resv7=rng.choice([0, 0, 0x7F, 0x01]))


def build(opcode, dqpn, psn, payload=b"", shape=None, ackreq=False, se=False, tver=0, pkey=0xFFFF):
    s = shape or nic_shape()
    pad = (-len(payload)) % 4
    ip = IP(src=PEER, dst=SW, id=s.ident, flags="DF" if s.df else 0, tos=s.tos, ttl=s.ttl)
    udp = UDP(sport=s.sport, dport=4791, chksum=None if s.udp_csum else 0)
    bth = BTH(opcode=opcode, solicited=int(se), migreq=s.migreq, padcount=pad, version=tver, pkey=pkey,
              fecn=s.byte4 >> 7, becn=(s.byte4 >> 6) & 1, resv6=s.byte4 & 0x3F, dqpn=dqpn,
              ackreq=int(ackreq), resv7=s.resv7, psn=psn & 0xFFFFFF)
    return raw(ip / udp / bth / Raw(payload + b"\0" * pad))


def send_bytes(frame):
    RAW.sendto(frame, (SW, 0))


def send(opcode, dqpn, psn, payload=b"", shape=None, ackreq=False, se=False):
    frame = build(opcode, dqpn, psn, payload, shape, ackreq, se)
    send_bytes(frame)
    return frame


def deth(src_qp, qkey=QKEY, resv=0):
    return struct.pack("!IB", qkey, resv) + (src_qp & 0xFFFFFF).to_bytes(3, "big")


def reth(va, rkey, length):
    return struct.pack("!QII", va, rkey, length)


class Pkt:
    """A datagram softrdma sent to PEER:4791 (BTH onward)."""

    def __init__(self, data, addr):
        self.data, self.addr = data, addr
        b = data
        self.opcode = b[0]
        self.se, self.migreq, self.pad = b[1] >> 7, (b[1] >> 6) & 1, (b[1] >> 4) & 3
        self.tver, self.pkey, self.byte4, self.resv7 = b[1] & 0xF, int.from_bytes(b[2:4], "big"), b[4], b[8] & 0x7F
        self.dqpn = int.from_bytes(b[5:8], "big")
        self.ackreq = b[8] >> 7
        self.psn = int.from_bytes(b[9:12], "big")
        self.syndrome = self.msn = None
        hdr = 12
        if self.opcode in (ACK, READ_FIRST, READ_LAST, READ_ONLY, ATOMIC_ACK):
            self.syndrome, self.msn = b[12], int.from_bytes(b[13:16], "big")
            hdr = 16
        self.payload = b[hdr:len(b) - 4 - self.pad]

    def icrc_ok(self, ip_id=0):
        """ICRC right for the header Linux gives an unconnected DF socket's datagram (ID ip_id, DF)?

        IBTA 14.6.1 (RoCEv2 annex A17.3.3): CRC-32 over 8 bytes of 1s (the LRH's place), the IPv4
        header with TOS, TTL and checksum as 1s, the UDP header with its checksum as 1s, the BTH
        with byte 4 as 1s, and the payload."""
        f = bytearray(raw(IP(src=SW, dst=PEER, id=ip_id, flags="DF") /
                          UDP(sport=self.addr[1], dport=4791, chksum=0) / Raw(self.data)))
        f[1] = f[8] = 0xFF
        f[10:12] = f[26:28] = b"\xff\xff"
        f[32] = 0xFF
        return struct.pack("<I", zlib.crc32(b"\xff" * 8 + bytes(f[:-4]))) == self.data[-4:]

    def __repr__(self):
        s = f"op={self.opcode:#04x} dqpn={self.dqpn:#x} psn={self.psn} ackreq={self.ackreq} sport={self.addr[1]}"
        if self.syndrome is not None:
            s += f" syndrome={self.syndrome:#04x} msn={self.msn}"
        return s + f" payload={len(self.payload)}B"


def recv(timeout=0.5):
    """The next non-CNP datagram from softrdma, or None."""
    global cnps
    end = time.monotonic() + timeout
    while True:
        left = end - time.monotonic()
        if left <= 0 or not select.select([RX], [], [], left)[0]:
            return None
        data, addr = RX.recvfrom(65536)
        if len(data) < 16:
            continue
        p = Pkt(data, addr)
        received.append(p)
        if p.opcode == CNP:
            cnps += 1
            continue
        return p


def drain(timeout=0.05):
    got = []
    while (p := recv(timeout)) is not None:
        got.append(p)
    return got


# ---- the softrdma side --------------------------------------------------------------------

class Side:
    def __init__(self, kind):
        # What the checks assume (no injected faults, RoCE, the default MTU) is not left to the caller's
        # environment: SOFTRDMA_FAULTS=corrupt=0.2 or duplicate=0.3 makes a dozen checks fail.
        self.err = tempfile.TemporaryFile("w+")  # not a pipe: nobody reads it until something fails
        env = {k: v for k, v in os.environ.items()
               if k not in ("SOFTRDMA_FAULTS", "SOFTRDMA_NETDEV", "SOFTRDMA_TRANSPORT", "SOFTRDMA_MTU",
                            "SOFTRDMA_VLAN", "SOFTRDMA_DEVICE", "SOFTRDMA_MPA")}
        self.proc = subprocess.Popen([softrdma, "run", "--netdev", f"udp:{SW}", "--", qp_prog, kind],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.err,
                                     text=True, bufsize=1, env=env)
        line = self.proc.stdout.readline()
        if not line.startswith("QP "):
            raise RuntimeError(f"nicpeer_qp: {line!r} {self.stderr()}")
        f = dict(kv.split("=") for kv in line.split()[1:])
        self.qpn, self.psn, self.addr, self.rkey = (int(f[k]) for k in ("qpn", "psn", "addr", "rkey"))

    def stderr(self):
        self.err.seek(0)
        return self.err.read()

    def cmd(self, text):
        self.proc.stdin.write(text + "\n")
        self.proc.stdin.flush()
        out = []
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"nicpeer_qp exited during {text!r}: {self.stderr()}")
            line = line.strip()
            if line == "OK":
                return out
            if line.startswith("ERR") or line.startswith("FATAL"):
                raise RuntimeError(f"nicpeer_qp: {text!r}: {line}")
            out.append(line)

    def poll(self, n=1, ms=500):
        wcs = []
        for line in self.cmd(f"poll {n} {ms}"):
            wcs.append({k: int(v) for k, v in (kv.split("=") for kv in line.split()[1:])})
        return wcs

    def dump(self, off, length):
        return bytes.fromhex(self.cmd(f"dump {off} {length}")[0].split()[1])

    def put(self, off, data):
        self.cmd(f"put {off} {data.hex()}")

    def state(self):
        return int(self.cmd("state")[0].split()[1])

    def close(self):
        try:
            self.proc.stdin.write("quit\n")
            self.proc.stdin.flush()
            self.proc.wait(timeout=5)
        except Exception:
            self.proc.kill()
            self.proc.wait()


def data_of(n, tag):
    return bytes((tag * 7 + i * 13) & 0xFF for i in range(n))


# ---- 1. UD: NIC-shaped SENDs complete, corrupted ones do not --------------------------------

def ud_checks():
    side = Side("ud")
    try:
        shapes = [
            Shape("softrdma-like", ident=0, df=True, tos=0, sport=0xC000 | 0x123, udp_csum=False, migreq=0,
                  byte4=0),
            Shape("huawei", ident=0x1C2E, df=False, tos=0, sport=69, udp_csum=True, migreq=1, byte4=0x10),
            Shape("huawei-csum0", ident=0x1C2F, df=False, tos=0, sport=69, udp_csum=False, migreq=1, byte4=0x10),
            Shape("connectx", ident=0x9B01, df=False, tos=0xC2, sport=0xD1F3, udp_csum=False, migreq=1, byte4=0),
            Shape("connectx-csum", ident=0x9B02, df=False, tos=0xC2, sport=0xD1F3, udp_csum=True, migreq=1,
                  byte4=0),
            Shape("ecn-ce", ident=0x4242, df=False, tos=0x03, sport=50000, udp_csum=False, migreq=1, byte4=0x10),
            Shape("reserved-bits", ident=0xFFFF, df=True, tos=0xB8, sport=1, udp_csum=True, migreq=1,
                  byte4=0x3F, resv7=0x7F, ttl=1),
        ] + [nic_shape(f"random{i}") for i in range(12)]
        for i, s in enumerate(shapes):
            n = [1, 3, 64, 255, 256, 0, 17][i % 7]
            payload = data_of(n, i)
            imm = i % 3 == 2
            src_qp = rng.randrange(1, 1 << 24)
            off = 4096 * i
            side.cmd(f"recv {off} {40 + 256} {i}")
            body = deth(src_qp, resv=0xA5 if s.resv7 else 0)
            if imm:
                body += struct.pack("!I", 0xC0DE0000 | i)
            frame = send(UD_SEND_ONLY_IMM if imm else UD_SEND_ONLY, side.qpn, rng.randrange(1 << 24),
                         body + payload, s, se=i % 2 == 1)
            wcs = side.poll(1, 1000)
            want = f"wr={i} status=0 len={40 + n} src_qp={src_qp:#x}" + (f" imm={0xC0DE0000 | i:#x}" if imm else "")
            ok = (len(wcs) == 1 and wcs[0]["wr"] == i and wcs[0]["status"] == 0 and wcs[0]["len"] == 40 + n
                  and wcs[0]["src_qp"] == src_qp and (not imm or wcs[0]["imm"] == 0xC0DE0000 | i))
            got = side.dump(off, 40 + n) if wcs else b""
            # The GRH of an IPv4 datagram: 20 zero bytes, then the IPv4 header as received.
            ok_data = got[40:] == payload and got[20 + 12:20 + 16] == socket.inet_aton(PEER)
            check(f"ud: NIC-shaped SEND {s!r} ({n} B{', imm' if imm else ''}) completes with its data",
                  ok and ok_data, f"sent {frame.hex()}\n     want {want}; got {wcs} data {got[40:].hex()} "
                  f"grh src {got[32:36].hex()}")

        # IBTA: a UD packet with the wrong Q_Key, or for another QP, is dropped silently.
        side.cmd(f"recv 0 {40 + 256} 998")
        send(UD_SEND_ONLY, side.qpn, 5, deth(7, qkey=QKEY ^ 1) + b"qkey" * 4)
        send(UD_SEND_ONLY, side.qpn ^ 0x800, 6, deth(7) + b"dqpn" * 4)
        send_bytes(build(UD_SEND_ONLY, side.qpn, 6, deth(7) + b"tver" * 4, tver=1))
        send_bytes(build(SEND_ONLY, side.qpn, 6, b"rcop" * 4))
        # IBTA 10.9.3: a P_Key that does not match the port's (0xFFFF) drops the packet; 0 is invalid.
        for bad in (0x1234, 0x8001, 0x0000):
            send_bytes(build(UD_SEND_ONLY, side.qpn, 6, deth(7) + b"pkey" * 4, pkey=bad))
        wcs = side.poll(1, 100)
        check("ud: SENDs with the wrong Q_Key, for another QPN, with BTH TVer 1, an RC opcode or another "
              "partition's P_Key do not complete",
              wcs == [], f"got {wcs}")
        send(UD_SEND_ONLY, side.qpn, 7, deth(7) + b"good" * 4)
        wcs = side.poll(1, 1000)
        check("ud: … and the receive they did not take completes the next good SEND",
              len(wcs) == 1 and wcs[0]["wr"] == 998 and side.dump(40, 16) == b"good" * 4, f"got {wcs}")

        # Corrupted ones: one bit flipped anywhere from the BTH to the ICRC (inclusive).
        side.cmd(f"recv 0 {40 + 256} 999")
        passed_through = []
        for j in range(24):
            s = nic_shape(f"corrupt{j}")
            s.udp_csum = j % 4 == 0  # most with checksum 0: then only the ICRC can catch it
            payload = data_of(64, 100 + j)
            frame = bytearray(build(UD_SEND_ONLY, side.qpn, j, deth(7) + payload, s))
            # Not in BTH byte 4 (frame byte 32: FECN, BECN, reserved), which the ICRC masks and a
            # receiver must ignore.
            bit = rng.choice([b for b in range(28 * 8, len(frame) * 8) if b // 8 != 32])
            frame[bit // 8] ^= 1 << (bit % 8)
            send_bytes(bytes(frame))
            wcs = side.poll(1, 60)
            if wcs:
                passed_through.append((j, bit, bytes(frame).hex(), wcs))
        # An ICRC check that solves the IPv4 ID leaves 16 bits: 1 in 2^15 corruptions gets through.
        check("ud: 24 corrupted NIC-shaped SENDs (one bit flipped) do not complete", not passed_through,
              f"completed: {passed_through}")
        # And the QP still works after them.
        payload = data_of(100, 200)
        send(UD_SEND_ONLY, side.qpn, 1, deth(9) + payload)
        wcs = side.poll(1, 1000)
        check("ud: after the corrupted ones a good SEND completes", len(wcs) == 1 and wcs[0]["wr"] == 999
              and side.dump(40, 100) == payload, f"got {wcs}")
        # IBTA: a UD message longer than the receive completes it with a local length error.
        side.cmd(f"recv 8192 {40 + 100} 997")
        send(UD_SEND_ONLY, side.qpn, 8, deth(9) + b"z" * 200)
        wcs = side.poll(1, 1000)
        check("ud: a SEND longer than the receive → that receive completes with IBV_WC_LOC_LEN_ERR (1), QP RTS",
              len(wcs) == 1 and wcs[0]["wr"] == 997 and wcs[0]["status"] == 1 and side.state() == 3, f"got {wcs}")
    finally:
        side.close()


# ---- 2. RC responder ----------------------------------------------------------------------

def connect_rc(peer_psn=None):
    side = Side("rc")
    if peer_psn is None:
        peer_psn = rng.randrange(1 << 24)
    side.cmd(f"connect {PEER_QPN} {peer_psn} {PEER}")
    return side, peer_psn


def expect_ack(name, syndrome, psn, msn, sent, timeout=1.0):
    p = recv(timeout)
    ok = (p is not None and p.opcode == ACK and p.dqpn == PEER_QPN and p.psn == psn & 0xFFFFFF
          and p.syndrome == syndrome and (msn is None or p.msn == msn))
    check(name, ok, f"sent {sent}; want ACK(syndrome={syndrome:#04x} psn={psn & 0xFFFFFF} msn={msn}), got {p}")
    return p


def rc_responder_checks():
    side, epsn = connect_rc(0xFFFFFD)  # the PSNs wrap to 0 a few packets in
    q = side.qpn
    try:
        for i in range(4):
            side.cmd(f"recv {i * 8192} 8192 {i}")
        msn = 0
        # SEND ONLY, NIC-shaped
        payload = data_of(200, 1)
        send(SEND_ONLY, q, epsn, payload, ackreq=True)
        msn += 1
        expect_ack("rc: SEND ONLY → ACK with its PSN, MSN 1, unlimited-credit syndrome", ACK_SYN, epsn, msn,
                   f"SEND_ONLY psn={epsn}")
        wcs = side.poll(1, 1000)
        check("rc: SEND ONLY completes with its data", len(wcs) == 1 and wcs[0]["wr"] == 0 and wcs[0]["len"] == 200
              and side.dump(0, 200) == payload, f"got {wcs}")
        epsn += 1
        # SEND FIRST/MIDDLE/LAST with an immediate, AckReq on the last only
        parts = [data_of(MTU, 2), data_of(MTU, 3), data_of(300, 4)]
        send(SEND_FIRST, q, epsn, parts[0])
        send(SEND_MIDDLE, q, epsn + 1, parts[1])
        send(SEND_LAST_IMM, q, epsn + 2, struct.pack("!I", 0x11223344) + parts[2], ackreq=True, se=True)
        msn += 1
        expect_ack("rc: SEND FIRST/MIDDLE/LAST_IMM → one ACK for the last PSN, MSN 2", ACK_SYN, epsn + 2, msn,
                   f"SEND_FIRST/MIDDLE/LAST_IMM psn={epsn}..{epsn + 2}")
        wcs = side.poll(1, 1000)
        check("rc: the 3-packet SEND completes whole with its immediate",
              len(wcs) == 1 and wcs[0]["wr"] == 1 and wcs[0]["len"] == 2 * MTU + 300 and wcs[0]["imm"] == 0x11223344
              and side.dump(8192, 2 * MTU + 300) == b"".join(parts), f"got {wcs}")
        epsn += 3
        # RDMA WRITE ONLY and FIRST/LAST into the MR
        w1 = data_of(512, 5)
        send(WRITE_ONLY, q, epsn, reth(side.addr + 65536, side.rkey, len(w1)) + w1, ackreq=True)
        msn += 1
        expect_ack("rc: RDMA WRITE ONLY → ACK, MSN 3", ACK_SYN, epsn, msn, f"WRITE_ONLY psn={epsn}")
        epsn += 1
        w2 = [data_of(MTU, 6), data_of(10, 7)]
        send(WRITE_FIRST, q, epsn, reth(side.addr + 70000, side.rkey, MTU + 10) + w2[0])
        send(WRITE_LAST, q, epsn + 1, w2[1], ackreq=True)
        msn += 1
        expect_ack("rc: RDMA WRITE FIRST/LAST → ACK for the last PSN, MSN 4", ACK_SYN, epsn + 1, msn,
                   f"WRITE_FIRST/LAST psn={epsn},{epsn + 1}")
        epsn += 2
        check("rc: the RDMA WRITEs landed in memory",
              side.dump(65536, 512) == w1 and side.dump(70000, MTU + 10) == b"".join(w2))
        check("rc: RDMA WRITEs consume no receive WQE", side.poll(1, 50) == [])

        # A duplicate (an earlier PSN) → re-ACK of the latest PSN, no second completion
        send(SEND_ONLY, q, epsn - 8, payload, ackreq=True)
        expect_ack("rc: duplicate SEND (earlier PSN) → re-ACK for the last PSN received, same MSN", ACK_SYN,
                   epsn - 1, msn, f"SEND_ONLY psn={epsn - 8} (duplicate)")
        check("rc: the duplicate makes no completion", side.poll(1, 100) == [])

        # A PSN gap → one NAK PSN-sequence-error carrying the expected PSN; later ones are dropped silently
        send(SEND_ONLY, q, epsn + 2, payload, ackreq=True)
        send(SEND_ONLY, q, epsn + 3, payload, ackreq=True)
        expect_ack("rc: PSN gap → NAK PSN sequence error with the expected PSN", NAK_PSN_SEQ, epsn, msn,
                   f"SEND_ONLY psn={epsn + 2},{epsn + 3} (expected {epsn})")
        extra = drain(0.15)
        check("rc: only one NAK for a burst past a gap", extra == [], f"also got {extra}")
        check("rc: out-of-sequence packets make no completion", side.poll(1, 50) == [])
        # Resume at the expected PSN
        send(SEND_ONLY, q, epsn, data_of(40, 9), ackreq=True)
        msn += 1
        expect_ack("rc: resending from the expected PSN → ACK, MSN advances", ACK_SYN, epsn, msn,
                   f"SEND_ONLY psn={epsn}")
        wcs = side.poll(1, 1000)
        check("rc: the resent SEND completes", len(wcs) == 1 and wcs[0]["wr"] == 2 and wcs[0]["len"] == 40,
              f"got {wcs}")
        epsn += 1

        # RDMA READ: multi-packet → FIRST/MIDDLE/LAST with consecutive PSNs; then a READ ONLY
        src = bytes(rng.randrange(256) for _ in range(2500))
        side.put(200000, src)
        send(READ_REQ, q, epsn, reth(side.addr + 200000, side.rkey, len(src)), ackreq=True)
        resp = [recv(1.0) for _ in range(3)]
        ops = [p.opcode if p else None for p in resp]
        ok = (ops == [READ_FIRST, READ_MIDDLE, READ_LAST]
              and [p.psn for p in resp] == [(epsn + k) & 0xFFFFFF for k in range(3)]
              and resp[0].syndrome == ACK_SYN and resp[2].syndrome == ACK_SYN and resp[0].msn == msn + 1
              and b"".join(p.payload for p in resp) == src and all(p.dqpn == PEER_QPN for p in resp))
        check("rc: 2500-byte RDMA READ → READ RESPONSE FIRST/MIDDLE/LAST, PSNs from the request's, AETH on "
              "first/last, the data", ok, f"READ_REQ psn={epsn} len=2500; got {resp}")
        msn += 1
        epsn += 3
        send(READ_REQ, q, epsn, reth(side.addr + 200000 + 7, side.rkey, 33), ackreq=False)
        p = recv(1.0)
        msn += 1
        check("rc: 33-byte RDMA READ (odd address, no AckReq) → READ RESPONSE ONLY with pad, the data",
              p is not None and p.opcode == READ_ONLY and p.psn == epsn & 0xFFFFFF and p.msn == msn
              and p.payload == src[7:40] and p.pad == 3, f"READ_REQ psn={epsn} len=33; got {p}")
        epsn += 1
        # A duplicate READ request is executed again
        send(READ_REQ, q, epsn - 1, reth(side.addr + 200000 + 7, side.rkey, 33), ackreq=True)
        p = recv(1.0)
        check("rc: duplicate READ request → answered again with the same PSN and data",
              p is not None and p.opcode == READ_ONLY and p.psn == (epsn - 1) & 0xFFFFFF and p.payload == src[7:40],
              f"READ_REQ psn={epsn - 1} (duplicate); got {p}")
        # Every datagram of ours had a right ICRC for ID 0 + DF
        send(SEND_ONLY, q, epsn, b"x" * 8, ackreq=True)
        p = recv(1.0)
        check("rc: softrdma's ACK has an ICRC right for IPv4 ID 0 with DF (what its UDP socket sends)",
              p is not None and p.icrc_ok(), f"got {p} {p.data.hex() if p else ''}")
        wcs = side.poll(1, 1000)
        check("rc: … and that SEND completes into the last receive", len(wcs) == 1 and wcs[0]["wr"] == 3,
              f"got {wcs}")
        epsn += 1
        # IBTA 9.6: an opcode of another transport (UD SEND), or TVer 1, is dropped silently
        send(UD_SEND_ONLY, q, epsn, deth(PEER_QPN) + b"ud!!", ackreq=True)
        send_bytes(build(SEND_ONLY, q, epsn, b"tver", ackreq=True, tver=1))
        got = drain(0.1)
        check("rc: a UD opcode or BTH TVer 1 to the RC QP is dropped silently", got == [] and side.poll(1, 20) == [],
              f"got {got}")
        # A CNP (what a ConnectX sends back for ECN-CE marked packets): no PSN meaning, no answer
        send(CNP, q, rng.randrange(1 << 24), b"\0" * 16, Shape("cnp", ident=0x777, tos=0xC0, migreq=1, byte4=0x10))
        got = drain(0.1)
        check("rc: a CNP to the responder is taken silently (no ACK or NAK)", got == [], f"got {got}")
        # No receive posted: RNR NAK (0x20 | min_rnr_timer 12) for that PSN, the QP stays RTS
        send(SEND_ONLY, q, epsn, b"rnr!" * 4, ackreq=True)
        expect_ack("rc: SEND with no receive posted → RNR NAK (syndrome 0x2c: min_rnr_timer 12) for its PSN",
                   0x20 | 12, epsn, None, f"SEND_ONLY psn={epsn}, no receive WQE")
        side.cmd("recv 0 4096 10")
        send(SEND_ONLY, q, epsn, b"rnr!" * 4, ackreq=True)
        msn += 1
        expect_ack("rc: the same SEND again after a receive is posted → ACK", ACK_SYN, epsn, None,
                   f"SEND_ONLY psn={epsn} again")
        wcs = side.poll(1, 1000)
        check("rc: … and it completes once", len(wcs) == 1 and wcs[0]["wr"] == 10 and wcs[0]["len"] == 16,
              f"got {wcs}")
        epsn += 1
        # RDMA WRITE with immediate: takes a receive, completes as RECV_RDMA_WITH_IMM (129)
        side.cmd("recv 0 4096 11")
        send(WRITE_ONLY_IMM, q, epsn, reth(side.addr + 300000, side.rkey, 8) + struct.pack("!I", 0xBEEF) +
             b"12345678", ackreq=True)
        msn += 1
        expect_ack("rc: RDMA WRITE ONLY with immediate → ACK", ACK_SYN, epsn, None, f"WRITE_ONLY_IMM psn={epsn}")
        wcs = side.poll(1, 1000)
        check("rc: … completes as RECV_RDMA_WITH_IMM with the immediate and the data in memory",
              len(wcs) == 1 and wcs[0]["wr"] == 11 and wcs[0]["op"] == 129 and wcs[0]["imm"] == 0xBEEF
              and wcs[0]["len"] == 8 and side.dump(300000, 8) == b"12345678", f"got {wcs}")
        epsn += 1
        # Zero-length RDMA WRITE and READ: no rkey/address check (IBTA 9.4.3, 9.4.4)
        send(WRITE_ONLY, q, epsn, reth(0, 0, 0), ackreq=True)
        expect_ack("rc: zero-length RDMA WRITE with rkey 0 → ACK", ACK_SYN, epsn, None, f"WRITE_ONLY psn={epsn} len 0")
        epsn += 1
        send(READ_REQ, q, epsn, reth(0, 0, 0), ackreq=True)
        p = recv(1.0)
        check("rc: zero-length RDMA READ with rkey 0 → one empty READ RESPONSE ONLY",
              p is not None and p.opcode == READ_ONLY and p.psn == epsn & 0xFFFFFF and p.payload == b"",
              f"got {p}")
        check("rc: the QP is still RTS", side.state() == 3)
    finally:
        side.close()


def atomic_eth(va, rkey, swap_add, compare=0):
    return struct.pack("!QIQQ", va, rkey, swap_add, compare)


def rc_atomics():
    side, epsn = connect_rc()
    q = side.qpn
    try:
        side.put(4096, struct.pack("<Q", 1000))
        va = side.addr + 4096
        send(FETCH_ADD, q, epsn, atomic_eth(va, side.rkey, 5), ackreq=True)
        p = recv(1.0)
        check("rc: FETCH_ADD → ATOMIC ACKNOWLEDGE with its PSN, MSN 1 and the original value; memory added to",
              p is not None and p.opcode == ATOMIC_ACK and p.psn == epsn and p.syndrome == ACK_SYN and p.msn == 1
              and p.payload == struct.pack("!Q", 1000) and side.dump(4096, 8) == struct.pack("<Q", 1005),
              f"FETCH_ADD psn={epsn} +5 on 1000; got {p} memory {side.dump(4096, 8).hex()}")
        send(FETCH_ADD, q, epsn, atomic_eth(va, side.rkey, 5), ackreq=True)
        p = recv(1.0)
        check("rc: a duplicate FETCH_ADD → the saved result again, not executed twice (IBTA 9.4.5)",
              p is not None and p.opcode == ATOMIC_ACK and p.psn == epsn and p.payload == struct.pack("!Q", 1000)
              and side.dump(4096, 8) == struct.pack("<Q", 1005), f"got {p} memory {side.dump(4096, 8).hex()}")
        send(CMP_SWAP, q, epsn + 1, atomic_eth(va, side.rkey, 77, 1005), ackreq=True)
        p = recv(1.0)
        check("rc: CMP_SWAP that matches → original value, memory swapped",
              p is not None and p.opcode == ATOMIC_ACK and p.psn == (epsn + 1) & 0xFFFFFF and p.msn == 2
              and p.payload == struct.pack("!Q", 1005) and side.dump(4096, 8) == struct.pack("<Q", 77), f"got {p}")
        send(CMP_SWAP, q, epsn + 2, atomic_eth(va, side.rkey, 99, 1005), ackreq=True)
        p = recv(1.0)
        check("rc: CMP_SWAP that does not match → original value, memory unchanged",
              p is not None and p.opcode == ATOMIC_ACK and p.payload == struct.pack("!Q", 77)
              and side.dump(4096, 8) == struct.pack("<Q", 77), f"got {p}")
        # A packet from another address (IBTA: RC takes only its peer's) is dropped silently
        side.cmd("recv 0 100 1")
        spoofed = raw(IP(src=PEER[:-1] + "3", dst=SW, id=9) / UDP(sport=5, dport=4791, chksum=0) /
                      BTH(opcode=SEND_ONLY, dqpn=q, psn=(epsn + 3) & 0xFFFFFF, ackreq=1) / Raw(b"spoo"))
        send_bytes(spoofed)
        got = drain(0.1)
        check("rc: a SEND from another IPv4 address is dropped silently", got == [] and side.poll(1, 20) == [],
              f"got {got}")
        send(FETCH_ADD, q, epsn + 3, atomic_eth(va + 4, side.rkey, 5), ackreq=True)
        p = recv(1.0)
        check("rc: a FETCH_ADD at an address not 8-byte aligned → NAK invalid request, QP in ERROR",
              p is not None and p.opcode == ACK and p.syndrome == NAK_INV_REQ and p.psn == (epsn + 3) & 0xFFFFFF
              and side.state() == 6, f"got {p}")
    finally:
        side.close()


def rc_error_check(name, make, syndrome, recv_status=5, psn_offset=0):
    """A request the responder must refuse: NAK with that syndrome, for that PSN; QP to ERROR."""
    side, epsn = connect_rc()
    try:
        side.cmd("recv 0 4096 0")
        desc = make(side, epsn)
        p = recv(1.0)
        check(f"rc: {name} → NAK syndrome {syndrome:#04x} for its PSN",
              p is not None and p.opcode == ACK and p.syndrome == syndrome and p.psn == (epsn + psn_offset) & 0xFFFFFF,
              f"sent {desc}; got {p}")
        # The QP went to ERROR: the posted receive is flushed (or completes with the error)
        wcs = side.poll(1, 500)
        check(f"rc: after {name} the QP is in ERROR, its receive completes with status {recv_status}",
              side.state() == 6 and len(wcs) == 1 and wcs[0]["status"] == recv_status, f"state/wcs {wcs}")
    finally:
        side.close()


def rc_errors():
    def bad_rkey(side, psn):
        send(WRITE_ONLY, side.qpn, psn, reth(side.addr, side.rkey ^ 0x100, 16) + b"y" * 16, ackreq=True)
        return f"WRITE_ONLY psn={psn} rkey={side.rkey ^ 0x100:#x}"

    def out_of_range(side, psn):
        send(READ_REQ, side.qpn, psn, reth(side.addr + (1 << 20) - 8, side.rkey, 64), ackreq=True)
        return f"READ_REQ psn={psn} past the MR's end"

    def middle_first(side, psn):
        send(SEND_MIDDLE, side.qpn, psn, data_of(MTU, 1), ackreq=True)
        return f"SEND_MIDDLE psn={psn} outside a message"

    def short_first(side, psn):
        send(SEND_FIRST, side.qpn, psn, data_of(100, 1), ackreq=True)
        return f"SEND_FIRST psn={psn} of 100 bytes (< MTU {MTU})"

    def too_long(side, psn):
        for k in range(4):
            send(SEND_FIRST if k == 0 else SEND_MIDDLE, side.qpn, psn + k, data_of(MTU, k))
        send(SEND_LAST, side.qpn, psn + 4, data_of(100, 4), ackreq=True)
        return f"SEND FIRST/MIDDLE x3/LAST psn={psn}..{psn + 4}, 4196 B into a 4096-byte receive"

    def write_longer(side, psn):
        send(WRITE_ONLY, side.qpn, psn, reth(side.addr, side.rkey, 100) + b"w" * 200, ackreq=True)
        return f"WRITE_ONLY psn={psn}: RETH length 100, 200 B of payload"

    def write_shorter(side, psn):
        send(WRITE_FIRST, side.qpn, psn, reth(side.addr, side.rkey, 5000) + b"a" * MTU)
        send(WRITE_LAST, side.qpn, psn + 1, b"b" * 76, ackreq=True)
        return f"WRITE_FIRST/LAST psn={psn},{psn + 1}: RETH length 5000, 1100 B of payload"

    rc_error_check("an RDMA WRITE ONLY longer than its RETH length", write_longer, NAK_INV_REQ)
    rc_error_check("an RDMA WRITE ending short of its RETH length", write_shorter, NAK_INV_REQ, psn_offset=1)
    rc_error_check("a SEND longer than the receive", too_long, NAK_INV_REQ, recv_status=1, psn_offset=4)
    rc_error_check("RDMA WRITE with a wrong rkey", bad_rkey, NAK_REM_ACCESS)
    rc_error_check("RDMA READ past the MR's end", out_of_range, NAK_REM_ACCESS)
    rc_error_check("SEND MIDDLE with no message open (opcode sequence)", middle_first, NAK_INV_REQ)
    rc_error_check("SEND FIRST shorter than the MTU", short_first, NAK_INV_REQ)


# ---- 3. RC requester: softrdma sends, the peer ACKs like a NIC (and like a bad one) ---------

def rc_requester_checks():
    side, _ = connect_rc()
    try:
        spsn = side.psn
        for i in range(3):
            side.put(i * 4096, data_of(100 + i, 50 + i))
        side.cmd("send 0 100 1")
        side.cmd("send 4096 101 2")
        p1, p2 = recv(1.0), recv(1.0)
        ok = (p1 is not None and p2 is not None and p1.opcode == SEND_ONLY and p2.opcode == SEND_ONLY
              and p1.psn == spsn and p2.psn == (spsn + 1) & 0xFFFFFF and p1.dqpn == PEER_QPN and p1.ackreq
              and p1.payload == data_of(100, 50) and p2.payload == data_of(101, 51))
        check("rc requester: two SENDs go out as SEND ONLY with consecutive PSNs from sq_psn, AckReq, the data",
              ok, f"sq_psn={spsn}; got {p1} {p2}")
        check("rc requester: its packets' ICRC is right for IPv4 ID 0 with DF",
              p1 is not None and p1.icrc_ok() and p2 is not None and p2.icrc_ok())
        # Ghost ACK (a PSN never sent) and a duplicate ACK (before the oldest outstanding): ignored
        send(ACK, side.qpn, spsn + 40, struct.pack("!B", ACK_SYN) + (1).to_bytes(3, "big"))
        send(ACK, side.qpn, spsn - 1, struct.pack("!B", ACK_SYN) + (0).to_bytes(3, "big"))
        send(ACK, side.qpn, spsn + 30, struct.pack("!B", NAK_PSN_SEQ) + (0).to_bytes(3, "big"))
        wcs = side.poll(1, 150)
        check("rc requester: a ghost ACK (PSN never sent), a duplicate ACK and a ghost NAK complete nothing",
              wcs == [] and side.state() == 3,
              f"sent ACK psn={spsn + 40}, ACK psn={spsn - 1}, NAK psn={spsn + 30}; got {wcs}")
        # NAK PSN sequence error for the second: the first is implicitly ACKed, the second resent
        send(ACK, side.qpn, spsn + 1, struct.pack("!B", NAK_PSN_SEQ) + (1).to_bytes(3, "big"))
        t0 = time.monotonic()
        wcs = side.poll(1, 500)
        check("rc requester: NAK sequence error at PSN+1 completes the first SEND (implied ACK)",
              len(wcs) == 1 and wcs[0]["wr"] == 1 and wcs[0]["status"] == 0, f"got {wcs}")
        re = [p for p in drain(0.2) if p.opcode == SEND_ONLY]
        dt = time.monotonic() - t0
        check("rc requester: … and resends from the NAK's PSN (only the second), quickly",
              len(re) >= 1 and re[0].psn == (spsn + 1) & 0xFFFFFF and re[0].payload == data_of(101, 51)
              and all(p.psn == (spsn + 1) & 0xFFFFFF for p in re) and dt < 0.9,
              f"after NAK psn={spsn + 1}: got {re} within {dt:.3f}s")
        # Coalesced ACK for the second
        send(ACK, side.qpn, spsn + 1, struct.pack("!B", ACK_SYN) + (2).to_bytes(3, "big"))
        wcs = side.poll(1, 500)
        check("rc requester: the ACK completes the second SEND", len(wcs) == 1 and wcs[0]["wr"] == 2
              and wcs[0]["status"] == 0, f"got {wcs}")
        # RDMA READ from the peer: answer with NIC-shaped read responses
        side.cmd(f"read 8192 1500 {0xABCD0000} 4660 3")
        req = recv(1.0)
        src = data_of(1500, 77)
        ok = (req is not None and req.opcode == READ_REQ and req.psn == (spsn + 2) & 0xFFFFFF
              and req.payload[:16] == reth(0xABCD0000, 4660, 1500))
        check("rc requester: RDMA READ goes out as READ REQUEST with the RETH", ok, f"got {req}")
        aeth = struct.pack("!B", ACK_SYN) + (3).to_bytes(3, "big")
        send(READ_FIRST, side.qpn, spsn + 2, aeth + src[:MTU])
        send(READ_FIRST, side.qpn, spsn + 2, aeth + b"X" * MTU)  # a duplicate, other data: ignored
        send(READ_LAST, side.qpn, spsn + 3, aeth + src[MTU:])
        wcs = side.poll(1, 1000)
        check("rc requester: NIC-shaped READ RESPONSE FIRST/(duplicate FIRST)/LAST complete the READ with the "
              "data of the first FIRST",
              len(wcs) == 1 and wcs[0]["wr"] == 3 and wcs[0]["status"] == 0 and side.dump(8192, 1500) == src,
              f"got {wcs}")
        # A SEND after the READ takes the PSN after the READ's two response PSNs
        side.cmd("send 0 100 4")
        p = recv(1.0)
        check("rc requester: the next request's PSN follows the READ's response PSNs",
              p is not None and p.opcode == SEND_ONLY and p.psn == (spsn + 4) & 0xFFFFFF, f"got {p}")
        send(CNP, side.qpn, 0, b"\0" * 16, Shape("cnp", ident=0x778, tos=0xC0, migreq=1, byte4=0x10))
        send(ACK, side.qpn, spsn + 4, struct.pack("!B", ACK_SYN) + (4).to_bytes(3, "big"))
        wcs = side.poll(1, 500)
        check("rc requester: a CNP changes nothing; the ACK completes it", len(wcs) == 1 and wcs[0]["wr"] == 4,
              f"got {wcs}")
        # Three SENDs, one coalesced ACK for the last: all three complete, in order
        for k in range(3):
            side.cmd(f"send 0 64 {5 + k}")
        sent = [recv(1.0) for _ in range(3)]
        check("rc requester: three more SENDs with consecutive PSNs",
              [p.psn if p else None for p in sent] == [(spsn + 5 + k) & 0xFFFFFF for k in range(3)], f"got {sent}")
        send(ACK, side.qpn, spsn + 7, struct.pack("!B", ACK_SYN) + (7).to_bytes(3, "big"))
        wcs = side.poll(3, 1000)
        check("rc requester: one coalesced ACK for the last PSN completes all three, in order",
              [w["wr"] for w in wcs] == [5, 6, 7] and all(w["status"] == 0 for w in wcs), f"got {wcs}")
        # NAK remote access error → the WR completes with IBV_WC_REM_ACCESS_ERR (10), the QP to ERROR
        side.cmd(f"write 0 64 {0xABCD0000} 4660 8")
        p = recv(1.0)
        check("rc requester: RDMA WRITE goes out as WRITE ONLY", p is not None and p.opcode == WRITE_ONLY
              and p.psn == (spsn + 8) & 0xFFFFFF, f"got {p}")
        send(ACK, side.qpn, spsn + 8, struct.pack("!B", NAK_REM_ACCESS) + (7).to_bytes(3, "big"))
        wcs = side.poll(1, 1000)
        check("rc requester: NAK remote access error → IBV_WC_REM_ACCESS_ERR, QP in ERROR",
              len(wcs) == 1 and wcs[0]["wr"] == 8 and wcs[0]["status"] == 10 and side.state() == 6, f"got {wcs}")
    finally:
        side.close()


def icrc_self_check():
    """Pkt.icrc_ok (ours) and scapy's RoCE layer agree on a frame scapy builds for ID 0 + DF."""
    f = raw(IP(src=SW, dst=PEER, id=0, flags="DF", tos=0xC2, ttl=3) / UDP(sport=4242, dport=4791, chksum=0) /
            BTH(opcode=ACK, dqpn=PEER_QPN, psn=77, migreq=1, resv6=0x10) / Raw(b"\x1f\x00\x00\x05"))
    check("peer: our ICRC check agrees with scapy's ICRC", Pkt(f[28:], (SW, 4242)).icrc_ok())


def aeth(syndrome, msn):
    return struct.pack("!B", syndrome) + (msn & 0xFFFFFF).to_bytes(3, "big")


def rc_requester_recovery():
    side, _ = connect_rc()
    try:
        s = side.psn
        side.put(0, data_of(64, 60))
        side.cmd("send 0 64 1")
        p = recv(1.0)
        send(ACK, side.qpn, s, aeth(0x20 | 1, 0))  # RNR NAK, timer code 1 (0.01 ms)
        t0 = time.monotonic()
        p2 = recv(1.0)
        dt = time.monotonic() - t0
        check("rc requester: RNR NAK → the SEND is resent (same PSN, data) after the RNR timer, not the ACK timeout",
              p is not None and p2 is not None and p2.opcode == SEND_ONLY and p2.psn == s and
              p2.payload == data_of(64, 60) and dt < 0.2, f"sent {p}; after RNR NAK got {p2} in {dt:.3f}s")
        send(ACK, side.qpn, s, aeth(ACK_SYN, 1))
        wcs = side.poll(1, 500)
        check("rc requester: … and its ACK completes it once", len(wcs) == 1 and wcs[0]["wr"] == 1 and
              wcs[0]["status"] == 0 and side.poll(1, 20) == [], f"got {wcs}")
        # READ of 2500 B: the peer's MIDDLE response is lost → READ request again for the rest
        side.cmd(f"read 8192 2500 {0xAB000000} 77 2")
        r = recv(1.0)
        src = data_of(2500, 61)
        send(READ_FIRST, side.qpn, s + 1, aeth(ACK_SYN, 2) + src[:MTU])
        send(READ_LAST, side.qpn, s + 3, aeth(ACK_SYN, 2) + src[2 * MTU:])
        t0 = time.monotonic()
        r2 = recv(1.0)
        dt = time.monotonic() - t0
        check("rc requester: a READ RESPONSE LAST after a lost MIDDLE → a new READ REQUEST from the missing PSN "
              "for the rest (va + 1024, 1476 B)",
              r is not None and r2 is not None and r2.opcode == READ_REQ and r2.psn == (s + 2) & 0xFFFFFF
              and r2.payload[:16] == reth(0xAB000000 + MTU, 77, 2500 - MTU) and dt < 0.2,
              f"READ_REQ {r}; after FIRST, LAST got {r2} {r2.payload.hex() if r2 else ''} in {dt:.3f}s")
        send(READ_MIDDLE, side.qpn, s + 2, src[MTU:2 * MTU])
        send(READ_LAST, side.qpn, s + 3, aeth(ACK_SYN, 2) + src[2 * MTU:])
        wcs = side.poll(1, 1000)
        check("rc requester: … answered, the READ completes with all its data",
              len(wcs) == 1 and wcs[0]["wr"] == 2 and wcs[0]["status"] == 0 and side.dump(8192, 2500) == src,
              f"got {wcs}")
        drain(0.05)
        # An ACK past an unanswered READ (its response lost): the READ is sent again, nothing completes early
        side.cmd(f"read 16384 100 {0xAB000000} 77 3")
        side.cmd("send 0 64 4")
        a, b = recv(1.0), recv(1.0)
        send(ACK, side.qpn, s + 5, aeth(ACK_SYN, 4))
        t0 = time.monotonic()
        again = recv(1.0)
        dt = time.monotonic() - t0
        wcs = side.poll(2, 100)
        check("rc requester: an ACK past an unanswered READ → the READ REQUEST again (implied NAK), no "
              "completion before the READ's",
              a is not None and a.opcode == READ_REQ and b is not None and b.opcode == SEND_ONLY and
              again is not None and again.opcode == READ_REQ and again.psn == (s + 4) & 0xFFFFFF and wcs == [],
              f"sent {a} {b}; after ACK psn={s + 5} got {again} in {dt:.3f}s, completions {wcs}")
        send(READ_ONLY, side.qpn, s + 4, aeth(ACK_SYN, 5) + data_of(100, 62))
        send(ACK, side.qpn, s + 5, aeth(ACK_SYN, 6))
        wcs = side.poll(2, 1000)
        check("rc requester: … answered, the READ then the SEND complete",
              [w["wr"] for w in wcs] == [3, 4] and all(w["status"] == 0 for w in wcs)
              and side.dump(16384, 100) == data_of(100, 62), f"got {wcs}")
    finally:
        side.close()


def rc_requester_naks():
    for syndrome, status, name in ((NAK_INV_REQ, 9, "IBV_WC_REM_INV_REQ_ERR"), (0x63, 11, "IBV_WC_REM_OP_ERR")):
        side, _ = connect_rc()
        try:
            side.cmd("send 0 64 1")
            p = recv(1.0)
            send(ACK, side.qpn, side.psn, aeth(syndrome, 0))
            wcs = side.poll(1, 1000)
            check(f"rc requester: NAK {syndrome:#04x} → {name} ({status}), QP in ERROR",
                  p is not None and len(wcs) == 1 and wcs[0]["status"] == status and side.state() == 6,
                  f"sent {p}; got {wcs}")
        finally:
            side.close()


def main():
    t0 = time.monotonic()
    icrc_self_check()
    print(f"softrdma at {SW}, NIC peer at {PEER}")
    for part in (ud_checks, rc_responder_checks, rc_atomics, rc_errors, rc_requester_checks, rc_requester_recovery,
                 rc_requester_naks):
        try:
            part()
        except Exception as e:  # a crash in one part fails it, the others still run
            check(f"{part.__name__} ran to its end", False, repr(e))
        drain(0.01)
    odd = [p for p in received if p.pkey != 0xFFFF or p.tver or p.byte4 or p.resv7]
    check(f"softrdma: all {len(received)} packets it sent have P_Key 0xFFFF, TVer 0, reserved bits 0", not odd,
          f"odd ones: {[(p, p.data[:12].hex()) for p in odd[:5]]}")
    # The UDP socket does not show the IPv4 ID. A datagram is a message of its own (ID 0 with DF)
    # or a UDP GSO segment, which the kernel numbers on from the message's ID 0: one past the
    # previous datagram's of its flow (tests/netdev/wire_gso_ids.py checks the IDs on the wire).
    bad, last_id = [], {}
    for p in received:
        prev = last_id.get(p.addr)
        ip_id = 0 if p.icrc_ok() else (prev + 1) & 0xFFFF if prev is not None and p.icrc_ok((prev + 1) & 0xFFFF) else None
        if ip_id is None:
            bad.append(p)
        last_id[p.addr] = ip_id
    check(f"softrdma: all {len(received)} packets it sent have an ICRC right for IPv4 ID 0 with DF, "
          "or for the next ID of a UDP GSO message", not bad, f"bad ones: {[(p, p.data.hex()) for p in bad[:5]]}")
    print(f"{len(passes)} checks passed, {len(failures)} failed, {cnps} CNPs seen, "
          f"{time.monotonic() - t0:.1f} s")
    for f in failures:
        print(f"FAILED: {f}")
    return 1 if failures else 0


sys.exit(main())
