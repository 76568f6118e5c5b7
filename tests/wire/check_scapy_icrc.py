#!/usr/bin/env python3
"""ICRCs computed by wire/ equal those python3-scapy's RoCE layer computes (IPv4 only).

usage: check_scapy_icrc.py GEN WORKDIR"""
import os
import subprocess
import sys

from scapy.all import rdpcap, raw, load_contrib
load_contrib("roce")
from scapy.contrib.roce import BTH  # noqa: E402

gen, work = sys.argv[1:3]
os.makedirs(work, exist_ok=True)
pcap = os.path.join(work, "scapy_icrc.pcap")
subprocess.run([gen, "29", "500", pcap, "--ipv4-only"], check=True, capture_output=True)

packets = rdpcap(pcap)
mismatches = 0
for i, pkt in enumerate(packets, 1):
    if BTH not in pkt:
        print(f"frame {i}: scapy found no BTH")
        mismatches += 1
        continue
    ours = raw(pkt)[-4:]
    copy = pkt.copy()
    copy[BTH].icrc = None
    theirs = raw(copy)[-4:]
    if ours != theirs:
        print(f"frame {i}: wire/ ICRC {ours.hex()} scapy {theirs.hex()}")
        mismatches += 1
print(f"{len(packets)} packets compared, {mismatches} mismatches")
sys.exit(1 if mismatches or len(packets) != 500 else 0)
