#!/usr/bin/env python3
"""Sends one TCP segment through a raw IPv4 socket (run inside the test's namespace hiw-a):
usage: send_segment.py SRC DST DPORT FLAGS GOOD_CHECKSUM(0|1). FLAGS: S (SYN) or R (RST)."""
import socket
import struct
import sys

src, dst, dport, flags, good = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
bits = {"S": 0x02, "R": 0x04}[flags]


def csum(data):
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


hdr = struct.pack("!HHIIBBHHH", 40000, dport, 12345, 0, 5 << 4, bits, 8192, 0, 0)
pseudo = socket.inet_aton(src) + socket.inet_aton(dst) + struct.pack("!BBH", 0, 6, len(hdr))
c = csum(pseudo + hdr)
if good == "0":
    c ^= 0x5A5A  # a corrupted segment
hdr = hdr[:16] + struct.pack("!H", c) + hdr[18:]
s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_TCP)
s.sendto(hdr, (dst, 0))
