#!/usr/bin/env python3
"""Soak test (label soak, `make soak`; docs/fuzzing.md#soak): PAIRS pairs of soak_peer processes,
each started by `softrdma run --faults SPEC --stats`, run mixed RC/UC/UD rounds for SOAK_SECONDS
(default 600), creating and destroying QPs every round. Each process reports its RSS and open
fds every ten rounds. Passes when every process exits 0 (data intact, RC lossless, no verbs
error), every pair did rounds of each type, and after the warm-up (the first quarter, at least 60
rounds) neither RSS nor fds grow: the largest RSS of the last quarter is within 8 MiB and 10 % of the largest of the
warm-up's end, and the fds never exceed theirs.

usage: soak.py SOFTRDMA SOAK_PEER [PAIRS]"""
import os
import re
import socket
import subprocess
import sys
import time

FAULTS = "drop=0.01,duplicate=0.01,reorder=0.01,corrupt=0.005,delay=0.01,delay_ms=2,seed={seed}"


def main():
    softrdma, peer = sys.argv[1], sys.argv[2]
    pairs = int(sys.argv[3]) if len(sys.argv) > 3 else 2
    seconds = int(os.environ.get("SOAK_SECONDS", "600"))
    started = time.time()
    procs = []
    for p in range(pairs):
        a, b = socket.socketpair()
        for side, s in ((0, a), (1, b)):
            env = dict(os.environ, SOFTRDMA_VIEW="off")
            cmd = [softrdma, "run", "--faults", FAULTS.format(seed=1 + 2 * p + side), "--stats",
                   "--", peer, str(s.fileno()), str(side), str(seconds)]
            procs.append((f"pair{p}.side{side}",
                          subprocess.Popen(cmd, pass_fds=[s.fileno()], env=env, text=True,
                                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)))
        a.close()
        b.close()
    failed = False
    results = {}
    for name, pr in procs:
        try:
            out, err = pr.communicate(timeout=seconds + 300)
        except subprocess.TimeoutExpired:
            pr.kill()
            out, err = pr.communicate()
            print(f"{name}: did not finish")
            failed = True
        results[name] = (pr.returncode, out, err)
    elapsed = time.time() - started
    for name, (rc, out, err) in results.items():
        samples = [(int(m[1]), int(m[2]), int(m[3])) for m in
                   re.finditer(r"^sample round (\d+) rss_kb (\d+) fds (\d+)$", out, re.M)]
        summary = re.search(r"^summary .*$", out, re.M)
        stats = re.search(r"^softrdma: stats .*$", err, re.M)
        print(f"{name}: exit {rc}; {summary[0] if summary else 'no summary'}")
        if stats:
            print(f"  {stats[0]}")
        if rc != 0:
            print("  stderr: " + err.strip().replace("\n", "\n  "))
            print("  last output: " + "\n  ".join(out.strip().splitlines()[-3:]))
            failed = True
            continue
        late = re.search(r"late_completions (\d+)", summary[0]) if summary else None
        if late and int(late[1]) > 0:
            print("  completions of destroyed QPs turned up (late_completions)")
            failed = True
        if not samples or len(samples) < 4:
            print("  too few samples")
            failed = True
            continue
        # Warm-up: the first quarter, and at least the first 60 rounds (the udp backend's socket
        # pool fills up over the first few dozen rounds, then stays).
        q = max(1, len(samples) // 4)
        w = max(q, sum(1 for s in samples if s[0] <= 60))
        if w >= len(samples):
            print("  too short a run to judge growth after the warm-up")
            failed = True
            continue
        warm, last = samples[:w], samples[-q:]
        rss0, rss1 = max(s[1] for s in warm), max(s[1] for s in last)
        fds0, fds_max = max(s[2] for s in warm), max(s[2] for s in samples[w:])
        print(f"  rss_kb first {samples[0][1]} warm-up {rss0} last quarter {rss1}; "
              f"fds warm-up {fds0} later max {fds_max}; {len(samples)} samples "
              f"to round {samples[-1][0]}")
        if rss1 > rss0 + max(8192, rss0 // 10):
            print("  RSS grew after the warm-up")
            failed = True
        if fds_max > fds0:
            print("  open fds grew after the warm-up")
            failed = True
    all_kinds = set()
    for _, (_, out, _) in results.items():
        all_kinds |= set(re.findall(r"^round \d+ (RC|UC|UD) ", out, re.M))
    if all_kinds != {"RC", "UC", "UD"}:
        print(f"not every QP type ran: {sorted(all_kinds)}")
        failed = True
    print(f"{'FAIL' if failed else 'PASS'}: {pairs} pairs, {seconds} s asked, {elapsed:.0f} s run")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
