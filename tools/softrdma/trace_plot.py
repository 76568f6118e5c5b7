#!/usr/bin/env python3
"""softrdma trace plot CAPTURE -o FILE.png [--flow N]: per RC/UC flow of a softrdma trace, the
PSN of each request over time (first transmissions, retransmissions, NAKs, RNR NAKs and CNPs
marked) and the throughput of first transmissions, as tcptrace draws TCP streams. Prints what it
drew, one line per flow. Reads pcapng (Ethernet, raw IP, Linux cooked), matplotlib draws.
Exit status 2: bad usage, or a capture that cannot be read."""
import argparse
import ipaddress
import struct
import sys

ROCE_PORT = 4791
ACK, ATOMIC_ACK, CNP = 0x11, 0x12, 0x81
READ_RESPONSES = {0x0D, 0x0E, 0x0F, 0x10}


def fail(msg):
    print(f"softrdma trace plot: {msg}", file=sys.stderr)
    sys.exit(2)


def pcapng_records(data):
    """(time in seconds, linktype, frame bytes, length on the wire, comment) of each packet of a
    pcapng file."""
    if len(data) < 12 or struct.unpack_from("<I", data, 0)[0] != 0x0A0D0D0A:
        raise ValueError("not a pcapng file")
    off, end, ifaces = 0, "<", []
    while off + 12 <= len(data):
        magic = data[off + 8:off + 12]
        btype = struct.unpack_from(end + "I", data, off)[0]
        if btype == 0x0A0D0D0A:
            end = "<" if magic == b"\x4d\x3c\x2b\x1a" else ">"
            ifaces = []
        blen = struct.unpack_from(end + "I", data, off + 4)[0]
        if blen < 12 or off + blen > len(data):
            raise ValueError(f"block at byte {off} runs past the end")
        body = data[off + 8:off + blen - 4]
        if btype == 1:  # interface description
            linktype = struct.unpack_from(end + "H", body, 0)[0]
            tsresol = 1e-6
            o = 8
            while o + 4 <= len(body):
                code, olen = struct.unpack_from(end + "HH", body, o)
                if code == 0:
                    break
                if code == 9 and olen >= 1:
                    v = body[o + 4]
                    tsresol = 2.0 ** -(v & 0x7F) if v & 0x80 else 10.0 ** -v
                o += 4 + (olen + 3) // 4 * 4
            ifaces.append((linktype, tsresol))
        elif btype == 6:  # enhanced packet
            iface, hi, lo, caplen, origlen = struct.unpack_from(end + "IIIII", body, 0)
            frame = body[20:20 + caplen]
            comment = ""
            o = 20 + (caplen + 3) // 4 * 4
            while o + 4 <= len(body):
                code, olen = struct.unpack_from(end + "HH", body, o)
                if code == 0:
                    break
                if code == 1:
                    comment = body[o + 4:o + 4 + olen].decode(errors="replace")
                o += 4 + (olen + 3) // 4 * 4
            if iface >= len(ifaces):
                raise ValueError(f"packet on undeclared interface {iface}")
            linktype, tsresol = ifaces[iface]
            yield ((hi << 32 | lo) * tsresol, linktype, frame, origlen, comment)
        off += blen


def roce(linktype, frame):
    """(src, dst, BTH and what follows) of a RoCEv2 datagram, or None."""
    if linktype == 1:  # Ethernet, with 802.1Q tags
        o, etype = 14, struct.unpack_from("!H", frame, 12)[0] if len(frame) >= 14 else 0
        while etype in (0x8100, 0x88A8) and len(frame) >= o + 4:
            etype = struct.unpack_from("!H", frame, o + 2)[0]
            o += 4
        ip = frame[o:]
    elif linktype == 113:  # Linux cooked
        ip = frame[16:]
    elif linktype in (101, 228, 229):
        ip = frame
    else:
        return None
    if len(ip) < 20:
        return None
    if ip[0] >> 4 == 4:
        ihl = (ip[0] & 15) * 4
        if ip[9] != 17:
            return None
        src, dst, udp = ip[12:16], ip[16:20], ip[ihl:]
    elif ip[0] >> 4 == 6 and len(ip) >= 48:
        if ip[6] != 17:
            return None
        src, dst, udp = ip[8:24], ip[24:40], ip[40:]
    else:
        return None
    if len(udp) < 8 + 12 or struct.unpack_from("!H", udp, 2)[0] != ROCE_PORT:
        return None
    return str(ipaddress.ip_address(bytes(src))), str(ipaddress.ip_address(bytes(dst))), udp[8:]


def annotations(comment):
    """The key=value pairs of a "softrdma: ..." packet comment."""
    if not comment.startswith("softrdma:"):
        return {}
    return dict(w.split("=", 1) for w in comment[9:].split() if "=" in w)


class Flow:
    def __init__(self, key):
        self.key = key  # (src, dst, destination QPN)
        self.uc = False
        self.first, self.retrans, self.naks, self.rnr, self.cnps = [], [], [], [], []
        self.highest = None  # the highest unwrapped PSN sent
        self.base = None

    def unwrap(self, psn):
        if self.base is None:
            self.base = psn
        rel = (psn - self.base) & 0xFFFFFF
        if rel >= 0x800000:
            rel -= 0x1000000
        if self.highest is not None:  # follow the sequence across wraps
            while rel < self.highest - 0x800000:
                rel += 0x1000000
        return rel


def main():
    ap = argparse.ArgumentParser(prog="softrdma trace plot", add_help=True)
    ap.add_argument("capture")
    ap.add_argument("-o", dest="output", required=True)
    ap.add_argument("--flow", type=int, help="draw only flow N (as numbered in the listing)")
    try:
        args = ap.parse_args()
    except SystemExit as e:
        sys.exit(0 if e.code == 0 else 2)
    try:
        with open(args.capture, "rb") as f:
            data = f.read()
        records = list(pcapng_records(data))
    except (OSError, ValueError, struct.error) as e:
        fail(f"{args.capture}: {e}")

    # Packets a device sent (dir=tx) when the trace says; both sides' traces merged would list
    # each packet twice (sent and received).
    annotated = any(annotations(c).get("dir") for _, _, _, _, c in records)
    flows, order = {}, []
    t0 = records[0][0] if records else 0
    responses = []
    for ts, linktype, frame, wire_len, comment in records:
        a = annotations(comment)
        if annotated and a.get("dir") != "tx":
            continue
        r = roce(linktype, frame)
        if not r:
            continue
        src, dst, bth = r
        opcode, destqp = bth[0], int.from_bytes(bth[5:8], "big")
        psn = int.from_bytes(bth[9:12], "big")
        t = ts - t0
        if opcode in (ACK, ATOMIC_ACK, CNP) or opcode in READ_RESPONSES:
            if opcode == CNP or (opcode == ACK and len(bth) >= 13):
                responses.append((t, src, dst, opcode, bth[12] if opcode == ACK else 0, psn,
                                  destqp))
            continue
        if opcode >= 0x40:  # UD and others: no PSN sequence to draw
            continue
        key = (src, dst, destqp)
        flow = flows.get(key)
        if not flow:
            flow = flows[key] = Flow(key)
            order.append(flow)
        flow.uc = opcode >= 0x20
        p = flow.unwrap(psn)
        resend = a.get("retrans") == "1" if annotated else (
            flow.highest is not None and p <= flow.highest)
        (flow.retrans if resend else flow.first).append((t, p, wire_len))
        if flow.highest is None or p > flow.highest:
            flow.highest = p
    # NAKs and CNPs go back to the requester: the flow from their destination to their source.
    for t, src, dst, opcode, syndrome, psn, destqp in responses:
        cands = [f for f in order if f.key[0] == dst and f.key[1] == src]
        if not cands:
            continue
        flow = cands[0]
        p = flow.unwrap(psn)
        if opcode == CNP:
            flow.cnps.append((t, p))
        elif syndrome >> 5 == 3:
            flow.naks.append((t, p))
        elif syndrome >> 5 == 1:
            flow.rnr.append((t, p))
    if not order:
        fail(f"{args.capture}: no RC or UC flow in it")
    chosen = list(enumerate(order, 1))
    if args.flow is not None:
        if not 1 <= args.flow <= len(order):
            fail(f"no flow {args.flow} (the capture has {len(order)})")
        chosen = [(args.flow, order[args.flow - 1])]

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 1, figsize=(11, 7), sharex=True)
    psn_ax, bw_ax = axes
    for n, f in chosen:
        name = f"flow {n}: {f.key[0]} -> {f.key[1]} qp 0x{f.key[2]:06x} ({'UC' if f.uc else 'RC'})"
        print(f"{name}: first {len(f.first)} retransmissions {len(f.retrans)} naks {len(f.naks)} "
              f"rnr_naks {len(f.rnr)} cnps {len(f.cnps)}")
        if f.first:
            psn_ax.plot([t for t, _, _ in f.first], [p for _, p, _ in f.first], ".", ms=2,
                        label=f"{n}: first transmissions")
        for pts, mark, size, label in ((f.retrans, "x", 3, "retransmissions"),
                                       (f.naks, "v", 7, "NAKs"), (f.rnr, "s", 7, "RNR NAKs"),
                                       (f.cnps, "^", 7, "CNPs")):
            if pts:
                psn_ax.plot([p[0] for p in pts], [p[1] for p in pts], mark, ms=size,
                            label=f"{n}: {label}")
        # Throughput of first transmissions in 10 ms bins.
        if f.first:
            span = max(t for t, _, _ in f.first) + 0.01
            bins = [0.0] * (int(span / 0.01) + 1)
            for t, _, size in f.first:
                bins[int(t / 0.01)] += size
            bw_ax.plot([i * 0.01 for i in range(len(bins))], [b / 0.01 / 1e6 for b in bins],
                       label=f"{n}")
    psn_ax.set_ylabel("PSN (from the flow's first)")
    psn_ax.legend(fontsize="small", loc="upper left")
    psn_ax.set_title(f"softrdma trace plot: {args.capture}")
    bw_ax.set_ylabel("MB/s (first transmissions)")
    bw_ax.set_xlabel("seconds")
    bw_ax.legend(fontsize="small", loc="upper left", title="flow")
    fig.tight_layout()
    try:
        fig.savefig(args.output, dpi=100)
    except OSError as e:
        fail(f"{args.output}: {e}")
    print(f"wrote {args.output}")


main()
