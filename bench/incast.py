#!/usr/bin/python3
"""Incast bench: per-QP rate over time through an emulated switch port, with and without DCQCN.

usage: incast.py SOFTRDMA OUT.png [--switch SPEC] [--qps N] [--line-rate RATE] [--seconds S]

Runs ib_write_bw -q N (16 writes of 64 KiB outstanding per QP) into a server behind
--switch SPEC, once with --cc dcqcn,line_rate=RATE and once with --cc none, samples the client's
QPs every 50 ms with `softrdma res qp --json -p PID` (sent packets of 4 KiB), and draws each QP's
rate over time, one panel per run, with the port's rate. Prints per run the mean aggregate, each
QP's share and the switch's counters. A figure, never an assertion (docs/congestion.md)."""
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


def run(cc):
    port = str(free_port())
    args = ["ib_write_bw", "-q", str(a.qps), "-t", "16", "-s", "65536", "-D", str(a.seconds),
            "-p", port]
    srv = subprocess.Popen([a.softrdma, "run", "--stats", "--switch", a.switch, "--cc", cc, "--",
                            *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    time.sleep(0.5)
    cli = subprocess.Popen([a.softrdma, "run", "--stats", "--cc", cc, "--", *args, "127.0.0.1"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    t0 = time.monotonic()
    samples = []  # (t, {qpn: sent packets})
    while cli.poll() is None:
        r = subprocess.run([a.softrdma, "res", "qp", "--json", "-p", str(cli.pid)],
                           capture_output=True, text=True)
        try:
            rows = json.loads(r.stdout)
        except ValueError:
            rows = []
        qps = {q["lqpn"]: q.get("sent-pkts", 0) for q in rows if q.get("type") == "RC"}
        if qps:
            samples.append((time.monotonic() - t0, qps))
        time.sleep(0.05)
    c_out = cli.communicate()[0]
    s_out = srv.communicate(timeout=60)[0]
    return samples, stats(s_out), stats(c_out)


fig, axes = plt.subplots(2, 1, figsize=(9, 7), sharex=True)
for ax, cc in zip(axes, (f"dcqcn,line_rate={a.line_rate}", "none")):
    samples, s, c = run(cc)
    qpns = sorted({q for _, d in samples for q in d})
    totals = []
    for q in qpns:
        ts, rates = [], []
        for (t1, d1), (t2, d2) in zip(samples, samples[1:]):
            if q in d1 and q in d2 and t2 > t1:
                ts.append(t2)
                rates.append((d2[q] - d1[q]) * 4096 * 8 / (t2 - t1) / 1e6)
        ax.plot(ts, rates, label=f"QP {q:#x}")
        totals.append(sum(rates) / max(len(rates), 1))
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
fig.suptitle(f"ib_write_bw -q {a.qps} into --switch {a.switch}")
fig.tight_layout()
fig.savefig(a.out, dpi=100)
print("wrote", a.out)
