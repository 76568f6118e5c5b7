#!/usr/bin/env python3
"""Sends TCP segments through a raw IPv4 socket (run inside the test's namespace hl-a):
usage: send_segment.py SRC DST DPORT FLAGS GOOD_CHECKSUM(0|1) [COUNT [short]].
FLAGS: S (SYN) or R (RST). COUNT segments, each from its own source port (a SYN flood when
SRC is an address nobody answers for); "short": a header whose data offset says 8 bytes."""
import socket
import struct
import sys

src, dst, dport, flags, good = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
count = int(sys.argv[6]) if len(sys.argv) > 6 else 1
short = len(sys.argv) > 7 and sys.argv[7] == "short"
bits = {"S": 0x02, "R": 0x04}[flags]


def csum(data):
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_TCP)
s.setsockopt(socket.IPPROTO_IP, socket.IP_HDRINCL, 1)  # SRC may be an address of nobody's
for i in range(count):
    sport = 40000 + i % 20000
    offset = 2 if short else 5
    hdr = struct.pack("!HHIIBBHHH", sport, dport, 12345 + i, 0, offset << 4, bits, 8192, 0, 0)
    pseudo = socket.inet_aton(src) + socket.inet_aton(dst) + struct.pack("!BBH", 0, 6, len(hdr))
    c = csum(pseudo + hdr)
    if good == "0":
        c ^= 0x5A5A  # a corrupted segment
    hdr = hdr[:16] + struct.pack("!H", c) + hdr[18:]
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(hdr), i & 0xFFFF, 0x4000, 64, 6, 0,
                     socket.inet_aton(src), socket.inet_aton(dst))  # the kernel fills the checksum
    s.sendto(ip + hdr, (dst, 0))
