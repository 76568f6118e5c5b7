#!/usr/bin/env python3
"""Acceptance: watching running softrdma devices (docs/monitoring.md).

usage: monitor_cli.py SOFTRDMA PROMTOOL CASE
Each CASE starts what it watches (an ib_write_bw pair through `softrdma run`, on a free TCP
port of its own) and checks what `softrdma stat`, `res`, `top` and `exporter` say about it.
Other tests may run devices at the same time: only the processes started here are judged."""
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from testlib import (expect, failures, free_port, wait_connected, wait_for,  # noqa: E402
                     wait_listening)

softrdma, promtool, case = sys.argv[1:4]


def tool(*args, timeout=30):
    r = subprocess.run([softrdma, *args], capture_output=True, text=True, timeout=timeout)
    return r.returncode, r.stdout, r.stderr


def tool_json(*args):
    rc, out, err = tool(*args, "--json")
    expect(rc == 0, f"{' '.join(args)} --json: exit {rc}", err)
    return json.loads(out) if rc == 0 else []


class Pair:
    """An ib_write_bw pair (bidirectional, so that both QPs reach RTS) for `seconds`."""

    def __init__(self, seconds=6):
        port = str(free_port())
        args = ["ib_write_bw", "-b", "-D", str(seconds), "-s", "65536", "-p", port]
        self.server = subprocess.Popen([softrdma, "run", "--", *args], stdout=subprocess.PIPE,
                                       stderr=subprocess.STDOUT, text=True)
        wait_listening(port, proc=self.server)
        self.client = subprocess.Popen([softrdma, "run", "--", *args, "127.0.0.1"],
                                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                       text=True)
        self.pids = [self.server.pid, self.client.pid]

    def wait_connected(self, limit=10):
        """Waits until each side has an RC QP in RTS; returns {pid: qp row}."""
        return wait_connected(softrdma, self.pids, limit)

    def finish(self):
        for p in (self.client, self.server):
            try:
                out, _ = p.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()
                out, _ = p.communicate()
            # What the pair itself does is judged in tests/verbs; here it is only watched.
            if p.returncode != 0:
                print(f"note: ib_write_bw pid {p.pid} exit {p.returncode}:\n{out[-500:]}")


def mine(rows, pids):
    return {r["pid"]: r for r in rows if r.get("pid") in pids and r.get("ifname") == "softroce0"}


if case == "stat":
    pair = Pair()
    expect(pair.wait_connected(), "both QPs reach RTS")
    first = mine(tool_json("stat"), pair.pids)
    second = {}

    def counters_moved():
        second.update(mine(tool_json("stat"), pair.pids))
        return all(second.get(pid, {}).get("counters", {}).get(k, 0) >
                   first.get(pid, {}).get("counters", {}).get(k, 0)
                   for pid in pair.pids for k in ("sent_pkts", "rcvd_pkts"))
    wait_for(counters_moved, 10, interval=0.1)
    expect(sorted(first) == sorted(pair.pids), f"stat lists both pids {pair.pids}", first)
    for pid in pair.pids:
        a, b = first.get(pid, {}), second.get(pid, {})
        expect(a.get("comm") == "ib_write_bw", f"pid {pid}: comm ib_write_bw", a)
        for k in ("transport", "backend", "address", "start_time"):
            expect(k in a, f"pid {pid}: stat has {k}", a)
        ca, cb = a.get("counters", {}), b.get("counters", {})
        expect(cb.get("sent_pkts", 0) > ca.get("sent_pkts", 0),
               f"pid {pid}: sent_pkts grows ({ca.get('sent_pkts')} -> {cb.get('sent_pkts')})")
        expect(cb.get("rcvd_pkts", 0) > ca.get("rcvd_pkts", 0), f"pid {pid}: rcvd_pkts grows")
        expect(all(cb[k] >= ca[k] for k in ca), f"pid {pid}: no counter goes down", (ca, cb))
    # -w: rates over the interval, and the text form names both.
    rated = mine(tool_json("stat", "-w", "0.5"), pair.pids)
    for pid, row in rated.items():
        expect(row.get("rates", {}).get("sent_pkts", 0) > 0, f"pid {pid}: -w gives a rate", row)
        expect(0.4 < row.get("interval", 0) < 2, f"pid {pid}: interval about 0.5 s", row)
    rc, out, err = tool("stat", "-p", str(pair.client.pid))
    expect(rc == 0 and re.search(rf"^link softroce0/1 pid {pair.client.pid} comm ib_write_bw .* "
                                 r"sent_pkts \d+", out, re.M), "stat -p: the text line", out + err)
    pair.finish()
elif case == "res_qp":
    pair = Pair()
    qps = pair.wait_connected()
    expect(len(qps) == 2, "each side has an RC QP in RTS", qps)
    if len(qps) == 2:
        s, c = qps[pair.server.pid], qps[pair.client.pid]
        expect(s["rqpn"] == c["lqpn"] and c["rqpn"] == s["lqpn"], "lqpn and rqpn cross", qps)
        stat = mine(tool_json("stat"), pair.pids)
        expect(s.get("peer") == stat[pair.client.pid]["address"] and
               c.get("peer") == stat[pair.server.pid]["address"], "each peer is the other", qps)
        for q in (s, c):
            for k in ("sq-psn", "rq-psn", "pdn", "sq-wrs", "rq-wrs", "retransmits",
                      "seq-naks-sent", "rnr-naks-rcvd", "comm"):
                expect(k in q, f"res qp has {k}", q)
    for kind in ("cq", "mr", "pd"):
        rows = [r for r in tool_json("res", kind) if r["pid"] in pair.pids]
        expect(len(rows) >= 2, f"res {kind}: rows of both processes", rows)
    # Watched since wait_connected: the CQs measure post-to-poll latency of the WRITEs.
    def cqs_of(pid):
        return [r for r in tool_json("res", "cq") if r["pid"] == pid]
    wait_for(lambda: all(c["latency-samples"] > 0 for pid in pair.pids for c in cqs_of(pid)),
             10, interval=0.1)
    for pid in pair.pids:
        cqs = cqs_of(pid)
        expect(cqs and all(c["latency-samples"] > 0 and
                           0 < c["latency-p50-ns"] <= c["latency-p99-ns"] for c in cqs),
               f"pid {pid}: its CQ has latency samples, p50 <= p99", cqs)
    mrs = [r for r in tool_json("res", "mr") if r["pid"] == pair.client.pid]
    stat = mine(tool_json("stat"), pair.pids)
    expect(stat[pair.client.pid]["mr_count"] == len(mrs) and
           stat[pair.client.pid]["mr_bytes"] == sum(m["mrlen"] for m in mrs),
           "MR count and bytes match the MRs", (mrs, stat))
    pair.finish()
elif case == "exporter":
    pair = Pair()
    expect(pair.wait_connected(), "both QPs reach RTS")
    port = free_port()
    exp = subprocess.Popen([softrdma, "exporter", "--listen", f"127.0.0.1:{port}"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        text = before = after = None

        def scraped():
            global text, before, after
            try:
                before = mine(tool_json("stat"), pair.pids)
                text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics",
                                              timeout=5).read().decode()
                after = mine(tool_json("stat"), pair.pids)
                return True
            except OSError:
                return False
        wait_for(scraped, 10, interval=0.1)
        expect(text is not None, "the exporter answers on /metrics")
        if text:
            r = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True,
                               text=True)
            expect(r.returncode == 0 and not r.stdout.strip() and not r.stderr.strip(),
                   "promtool check metrics passes", r.stdout + r.stderr)
            for pid in pair.pids:
                for name in ("sent_pkts", "rcvd_pkts", "retransmits"):
                    m = re.search(rf'^softrdma_{name}_total\{{device="softroce0",pid="{pid}",'
                                  rf'comm="ib_write_bw"\}} (\d+)$', text, re.M)
                    expect(m, f"/metrics has softrdma_{name}_total of pid {pid}", text[:2000])
                    if m and pid in before and pid in after:
                        v = int(m.group(1))
                        lo, hi = before[pid]["counters"][name], after[pid]["counters"][name]
                        expect(lo <= v <= hi, f"pid {pid}: {name} {v} within stat's {lo}..{hi}")
                expect(re.search(rf'^softrdma_qp_state\{{device="softroce0",pid="{pid}",'
                                 r'comm="ib_write_bw",qpn="\d+",type="RC"\} 3$', text, re.M),
                       f"pid {pid}: a QP in state 3 (RTS)")
                expect(re.search(rf'^# TYPE softrdma_sent_pkts_total counter$', text, re.M),
                       "counters are typed counter")
            # The same port again: in use, a clear message and exit 2.
            rc, out, err = tool("exporter", "--listen", f"127.0.0.1:{port}", timeout=10)
            expect(rc == 2 and "Address already in use" in err, "a port in use: exit 2", err)
    finally:
        exp.send_signal(signal.SIGTERM)
        out, _ = exp.communicate(timeout=10)
        expect(exp.returncode == 0, f"the exporter ends on SIGTERM (exit {exp.returncode})", out)
    pair.finish()
elif case == "killed":
    port = str(free_port())
    srv = subprocess.Popen([softrdma, "run", "--", "ib_write_bw", "-p", port],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    # It listens for a client; its device starts first.
    seen = wait_for(lambda: srv.pid in mine(tool_json("stat"), [srv.pid]), 10, interval=0.1)
    expect(seen, "the waiting server is listed")
    srv.send_signal(signal.SIGKILL)
    srv.wait()
    rows = mine(tool_json("stat"), [srv.pid])
    expect(not rows, "a killed program is not listed", rows)
    rc, out, err = tool("stat", "-p", str(srv.pid))
    expect(rc == 2 and f"no process {srv.pid}" in err, "stat -p of the killed pid: exit 2",
           out + err)
elif case == "bad_input":
    # No such process; a process without a device (this script).
    rc, out, err = tool("stat", "-p", "4194304")
    expect(rc == 2 and "no process 4194304" in err, "unknown PID: exit 2", err)
    rc, out, err = tool("res", "qp", "-p", str(os.getpid()))
    expect(rc == 2 and "runs no softrdma device" in err, "a PID without a device: exit 2", err)
    # A corrupt entry: this process holds its endpoint name and answers garbage.
    ep = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    ep.bind(f"\0softrdma-mon/{os.getpid()}")
    ep.listen(8)
    answers = [b"{\"version\": 1, \"pid\": ", b"not json at all"]
    stop = False

    def serve():
        n = 0
        while not stop:
            try:
                c, _ = ep.accept()
            except OSError:
                return
            c.sendall(answers[n % len(answers)])
            n += 1
            c.close()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    for args in (["stat", "-p", str(os.getpid())], ["stat"], ["res", "qp", "-p", str(os.getpid())]):
        start = time.time()
        rc, out, err = tool(*args)
        expect(rc == 2 and f"entry of pid {os.getpid()}" in err and "corrupt" in err,
               f"{' '.join(args)}: a corrupt entry names it, exit 2", err)
        expect(time.time() - start < 5, f"{' '.join(args)}: no hang")
    stop = True
    ep.shutdown(socket.SHUT_RDWR)  # wakes the accept, so that the name is free again
    t.join()
    ep.close()
    # An entry that never answers: a clear message within the timeout, exit 2.
    mute = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    mute.bind(f"\0softrdma-mon/{os.getpid()}")
    mute.listen(8)
    start = time.time()
    rc, out, err = tool("stat", "-p", str(os.getpid()))
    expect(rc == 2 and "did not answer" in err, "a silent entry: exit 2", err)
    expect(time.time() - start < 5, "a silent entry: no hang")
    mute.close()
    # Bad usage.
    for args in (["stat", "-w", "0"], ["stat", "-p", "x"], ["res", "bogus"], ["stat", "--bogus"],
                 ["exporter", "--listen", "nowhere"], ["top", "-d", "-1"]):
        rc, out, err = tool(*args)
        expect(rc == 2 and err.strip(), f"{' '.join(args)}: exit 2 with a message", err)
elif case == "top":
    pair = Pair()
    expect(pair.wait_connected(), "both QPs reach RTS")
    rc, out, err = tool("top", "--once", "-d", "0.5")
    expect(rc in (0, 2), f"top --once: exit {rc}", err)
    for pid in pair.pids:
        m = re.search(rf"^{pid}\s+ib_write_bw\s+softroce0\s+roce\s+\S+\s+(\d+)", out, re.M)
        expect(m and int(m.group(1)) > 0, f"top --once: pid {pid} with packets/s", out)
    expect(re.search(r"^  qp \d+\s+RC\s+RTS\s+peer ", out, re.M), "top --once: the QPs", out)
    pair.finish()
else:
    sys.exit(f"unknown case {case}")

print(f"{case}: {len(failures)} failures")
sys.exit(1 if failures else 0)
