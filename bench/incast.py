#!/usr/bin/python3
"""Incast bench: per-QP rate over time through an emulated switch port, with and without DCQCN.

usage: incast.py SOFTRDMA OUT.png [--switch SPEC] [--qps N | --processes N] [--line-rate RATE]
                 [--seconds S]

Runs ib_write_bw -q N (16 writes of 64 KiB outstanding per QP) into a server behind
--switch SPEC, or with --processes N as many fio client processes (rdma engine, RDMA WRITE of
64 KiB, 16 outstanding, one QP each, for S seconds) into one fio server process (--thread, a
job per client) behind it; once with --cc dcqcn,line_rate=RATE and once with --cc none. Samples
the clients' QPs every 50 ms with `softrdma res qp --json -p PID` (sent packets of 4 KiB) and
draws each QP's rate over time, one panel per run, with the port's rate. Prints per run the mean
aggregate (while every QP was sending), each QP's share and the switch's counters. A figure,
never an assertion (docs/congestion.md)."""
import argparse
import json
import re
import socket
import subprocess
import time

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("softrdma")
ap.add_argument("out")
ap.add_argument("--switch", default="rate=2G,buffer=2M,ecn=200K:800K:0.2")
ap.add_argument("--qps", type=int, default=4)
ap.add_argument("--processes", type=int, default=0)
ap.add_argument("--line-rate", default="1G")
ap.add_argument("--seconds", type=int, default=4)
a = ap.parse_args()
port_bps = float(re.search(r"rate=([\d.]+)([KMG]?)", a.switch).group(1)) * \
    {"": 1, "K": 1e3, "M": 1e6, "G": 1e9}[re.search(r"rate=[\d.]+([KMG]?)", a.switch).group(1)]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stats(text):
    m = re.search(r"softrdma: stats softroce0 \S+:((?: \w+=\d+)+)$", text, re.M)
    return {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", m.group(1))} if m else {}


def start(args):
    return subprocess.Popen([a.softrdma, "run", "--stats", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def run(cc):
    if a.processes:
        fio = ["fio", "--ioengine=rdma", "--thread", "--bs=64k", "--size=64m", "--verb=write",
               "--iodepth=16"]
        ports = [free_port() for _ in range(a.processes)]
        srv = start(["--switch", a.switch, "--cc", cc, "--", *fio, "--rw=read",
                     *[x for i, p in enumerate(ports) for x in (f"--name=s{i}", f"--port={p}")]])
        time.sleep(1.5)
        clis = [start(["--cc", cc, "--", *fio, "--rw=write", "--time_based",
                       f"--runtime={a.seconds}", "--hostname=127.0.0.1", f"--port={p}",
                       f"--name=c{i}"]) for i, p in enumerate(ports)]
    else:
        port = str(free_port())
        args = ["ib_write_bw", "-q", str(a.qps), "-t", "16", "-s", "65536", "-D",
                str(a.seconds), "-p", port]
        srv = start(["--switch", a.switch, "--cc", cc, "--", *args])
        time.sleep(0.5)
        clis = [start(["--cc", cc, "--", *args, "127.0.0.1"])]
    t0 = time.monotonic()
    samples = []  # (t, {(client, qpn): sent packets})
    while any(c.poll() is None for c in clis):
        if time.monotonic() - t0 > a.seconds + 30:
            # fio does not exit after a QP error (e.g. retry exceeded): say so, end the run.
            print(f"--cc {cc}: clients still running after {a.seconds + 30} s; killed")
            for c in clis + [srv]:
                c.kill()
            break
        qps = {}
        for i, c in enumerate(clis):
            r = subprocess.run([a.softrdma, "res", "qp", "--json", "-p", str(c.pid)],
                               capture_output=True, text=True)
            try:
                rows = json.loads(r.stdout)
            except ValueError:
                rows = []
            qps.update({(i, q["lqpn"]): q.get("sent-pkts", 0) for q in rows
                        if q.get("type") == "RC"})
        if qps:
            samples.append((time.monotonic() - t0, qps))
        time.sleep(0.05)
    c_stats = {}
    for c in clis:
        for k, v in stats(c.communicate()[0]).items():
            c_stats[k] = c_stats.get(k, 0) + v
    s_out = srv.communicate(timeout=60)[0]
    return samples, stats(s_out), c_stats


fig, axes = plt.subplots(2, 1, figsize=(9, 7), sharex=True)
for ax, cc in zip(axes, (f"dcqcn,line_rate={a.line_rate}", "none")):
    samples, s, c = run(cc)
    qpns = sorted({q for _, d in samples for q in d})
    # The aggregate and the shares count the intervals in which every QP was there (processes
    # start and end a little apart) and something was sent.
    steady = [(t1, d1, t2, d2) for (t1, d1), (t2, d2) in zip(samples, samples[1:])
              if t2 > t1 and all(q in d1 and q in d2 for q in qpns)
              and any(d2[q] > d1[q] for q in qpns)]
    totals = []
    for q in qpns:
        ts, rates = [], []
        for (t1, d1), (t2, d2) in zip(samples, samples[1:]):
            if q in d1 and q in d2 and t2 > t1:
                ts.append(t2)
                rates.append((d2[q] - d1[q]) * 4096 * 8 / (t2 - t1) / 1e6)
        ax.plot(ts, rates, label=f"QP {q[1]:#x}" + (f" (client {q[0]})" if a.processes else ""))
        span = sum(t2 - t1 for t1, _, t2, _ in steady)
        totals.append(sum(d2[q] - d1[q] for _, d1, _, d2 in steady) * 4096 * 8 / span / 1e6
                      if span else 0)
    ax.axhline(port_bps / 1e6, color="k", ls="--", lw=1, label="port")
    ax.axhline(port_bps / 1e6 / max(len(qpns), 1), color="grey", ls=":", lw=1, label="fair share")
    agg = sum(totals)
    ax.set_title(f"--cc {cc}: aggregate {agg:.0f} Mb/s, switch dropped "
                 f"{s.get('switch_dropped')}, retransmits {c.get('retransmits')}")
    ax.set_ylabel("Mb/s (sent, incl. resends)")
    ax.legend(loc="upper right", fontsize=7)
    shares = " ".join(f"{t / (agg / len(totals)):.2f}" for t in totals) if agg else "-"
    print(f"--cc {cc}: aggregate {agg:.0f} Mb/s of {port_bps / 1e6:.0f}; shares {shares}; "
          f"switch marked {s.get('switch_ce_marked')} dropped {s.get('switch_dropped')} peak "
          f"{s.get('switch_queue_peak')} B; CNPs {s.get('np_cnp_sent')} handled "
          f"{c.get('rp_cnp_handled')}; retransmits {c.get('retransmits')}")
axes[-1].set_xlabel("s")
fig.suptitle(f"{a.processes} fio processes" if a.processes else f"ib_write_bw -q {a.qps}"
             + f" into --switch {a.switch}")
fig.tight_layout()
fig.savefig(a.out, dpi=100)
print("wrote", a.out)
