#!/usr/bin/env python3
"""Plots bench/wire.sh's figures: bandwidth and latency per path and MTU, TCP's as a line.

usage: plot_wire.py FIGURES.tsv OUT.png"""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

rows = [r for r in csv.DictReader(open(sys.argv[1]), delimiter="\t")]


def value(r):
    try:
        return float(r["value"])
    except ValueError:
        return 0.0


mtus = sorted({r["mtu"] for r in rows}, key=int)
fig, axes = plt.subplots(len(mtus), 2, figsize=(13, 4.2 * len(mtus)), squeeze=False)
for i, mtu in enumerate(mtus):
    for j, unit in enumerate(("MB/s", "us")):
        ax = axes[i][j]
        sel = [r for r in rows if r["mtu"] == mtu and r["unit"] == unit and r["path"] != "tcp"]
        tcp = [value(r) for r in rows if r["mtu"] == mtu and r["unit"] == unit and r["path"] == "tcp"]
        labels = [f'{r["path"]} {r["test"]}' for r in sel]
        ax.bar(range(len(sel)), [value(r) for r in sel], color="tab:blue")
        for k, r in enumerate(sel):
            ax.annotate(r["ratio"] + "×", (k, value(r)), ha="center", va="bottom", fontsize=7)
        if tcp:
            ax.axhline(tcp[0], color="tab:red", linestyle="--", label=f"kernel TCP {tcp[0]:g} {unit}")
            ax.legend(loc="upper right", fontsize=8)
        ax.set_xticks(range(len(sel)))
        ax.set_xticklabels(labels, fontsize=7, rotation=45, ha="right")
        ax.set_ylabel("MB/s (64 KiB messages)" if unit == "MB/s" else "µs average (2 B)")
        ax.set_title(f"MTU {mtu}: {'bandwidth' if unit == 'MB/s' else 'latency'} (ratio to TCP above bars)",
                     fontsize=10)
fig.suptitle("softrdma across a veth pair between two network namespaces, against kernel TCP")
fig.tight_layout()
fig.savefig(sys.argv[2], dpi=90)
print(f"{sys.argv[2]}: {len(rows)} figures")
