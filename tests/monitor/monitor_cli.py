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
from testlib import (expect, failures, finish, free_port, in_netns, wait_connected,  # noqa: E402
                     wait_for, wait_listening)

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

    def __init__(self, seconds=6, run_opts=(), extra=()):
        port = str(free_port())
        args = ["ib_write_bw", "-b", "-D", str(seconds), "-s", "65536", "-p", port, *extra]
        self.server = subprocess.Popen([softrdma, "run", *run_opts, "--", *args],
                                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                       text=True)
        wait_listening(port, proc=self.server)
        self.client = subprocess.Popen([softrdma, "run", *run_opts, "--", *args, "127.0.0.1"],
                                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                       text=True)
        self.pids = [self.server.pid, self.client.pid]

    def wait_connected(self, limit=10):
        """Waits until each side has an RC QP in RTS; returns {pid: qp row}."""
        return wait_connected(softrdma, self.pids, limit)

    def finish(self):
        for p in (self.client, self.server):
            note_exit(p)

    def stop(self):
        """Ends a pair that was given more time than the checks need."""
        for p in (self.client, self.server):
            p.terminate()
            p.communicate()


def note_exit(p):
    """Waits for pair program `p` (killed after 60 s) and notes a failed exit: what the pair
    itself does is judged in tests/verbs; here it is only watched."""
    code, out = finish(p, 60)
    if code != 0:
        print(f"note: ib_write_bw pid {p.pid} exit {code}:\n{out[-500:]}")


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
    # Its queries take 2-5 s on a loaded machine, and the client must outlive them: 30 s, ended
    # once the checks are done.
    pair = Pair(seconds=30)
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
            expect(16 <= q.get("loss-window", 0) <= 2048, "res qp has loss-window (RC)", q)
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
    client = mine(tool_json("stat"), pair.pids).get(pair.client.pid)
    expect(client is not None, "stat still lists the client (did it end early? see its exit "
           "below)", pair.client.poll())
    expect(client is None or (client["mr_count"] == len(mrs) and
                              client["mr_bytes"] == sum(m["mrlen"] for m in mrs)),
           "MR count and bytes match the MRs", (mrs, client))
    pair.stop()
elif case == "res_pkey":
    # perftest's --pkey_index=1 on the table --pkeys gives: each QP shows index 1 and its P_Key.
    pair = Pair(run_opts=("--pkeys", "0xffff,0x8001"), extra=("--pkey_index=1",))
    qps = pair.wait_connected()
    expect(len(qps) == 2, "each side has an RC QP in RTS", qps)
    for pid, q in qps.items():
        expect(q.get("pkey") == 0x8001 and q.get("pkey-index") == 1,
               f"pid {pid}: res qp --json has pkey 0x8001, pkey-index 1", q)
        rc, out, err = tool("res", "qp", "-p", str(pid))
        expect(rc == 0 and re.search(rf"^link softroce0/1 lqpn {q.get('lqpn')} .* comm ib_write_bw"
                                     r" pkey 0x8001 pkey-index 1 ", out, re.M),
               f"pid {pid}: res qp text shows pkey 0x8001 pkey-index 1", out + err)
    pair.finish()
    # Without --pkey_index: the default partition, index 0.
    pair = Pair()
    for pid, q in pair.wait_connected().items():
        expect(q.get("pkey") == 0xFFFF and q.get("pkey-index") == 0,
               f"pid {pid}: default pkey 0xffff, pkey-index 0", q)
    pair.finish()
elif case == "res_iwarp":
    # An ib_write_bw -R pair over softiwarp0 (MPA rev 2 with CRC): its objects in res, with the
    # field names softroce0's have, and what an iWARP QP has instead of PSNs.
    port = str(free_port())
    args = ["ib_write_bw", "-R", "-D", "8", "-s", "65536", "-p", port]
    opts = ["--transport", "iwarp", "--mpa", "rev=2,crc"]
    srv = subprocess.Popen([softrdma, "run", *opts, "--", *args], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
    wait_listening(port, proc=srv)
    cli = subprocess.Popen([softrdma, "run", *opts, "--", *args, "127.0.0.1"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    pids = [srv.pid, cli.pid]

    def iw_rows(kind, pid):
        rc, out, err = tool("res", kind, "--json", "-p", str(pid))
        return [r for r in json.loads(out) if r.get("ifname") == "softiwarp0"] if rc == 0 else []
    qps = {}

    def in_rts():
        for pid in pids:
            rows = [q for q in iw_rows("qp", pid) if q.get("state") == "RTS"]
            if rows:
                qps[pid] = rows[0]
        return len(qps) == 2
    expect(wait_for(in_rts, 30, interval=0.1), "each side has a softiwarp0 QP in RTS", qps)
    if len(qps) == 2:
        s, c = qps[srv.pid], qps[cli.pid]
        expect(s.get("local") == c.get("peer") and c.get("local") == s.get("peer") and
               s.get("local", "").startswith("127.0.0.1:"), "the TCP ends cross", qps)
        for q in (s, c):
            for k, v in (("type", "RC"), ("mpa-rev", 2), ("mpa-crc", True), ("comm", "ib_write_bw"),
                         ("port", 1)):
                expect(q.get(k) == v, f"iWARP QP: {k} {v}", q)
            for k in ("lqpn", "pdn", "send-cqn", "recv-cqn", "sq-wrs", "rq-wrs", "ird", "ord",
                      "tx-fpdus", "rx-fpdus", "tx-bytes", "rx-bytes", "crc-errors",
                      "terminates-sent", "terminates-rcvd", "pid"):
                expect(k in q, f"iWARP QP has {k}", q)
            for k in ("sq-psn", "rq-psn", "rqpn", "pkey", "retransmits", "seq-naks-sent"):
                expect(k not in q, f"iWARP QP has no {k}", q)
        moved = wait_for(lambda: any(q.get("tx-fpdus", 0) > c.get("tx-fpdus", 0)
                                     for q in iw_rows("qp", cli.pid)), 10, interval=0.1)
        expect(moved, "the client's tx-fpdus grows")
        rc, out, err = tool("res", "qp", "-p", str(cli.pid))
        expect(rc == 0 and re.search(rf"^link softiwarp0/1 lqpn {c['lqpn']} type RC state RTS "
                                     rf"pdn \d+ pid {cli.pid} comm ib_write_bw local \S+ peer "
                                     r"127\.0\.0\.1:\d+ .*mpa-rev 2 mpa-crc true", out, re.M),
               "res qp text: the iWARP QP", out + err)
    for pid in pids:
        for kind, key in (("cq", "cqn"), ("mr", "lkey"), ("pd", "pdn")):
            rows = iw_rows(kind, pid)
            expect(rows and all(key in r and r.get("pid") == pid for r in rows),
                   f"pid {pid}: res {kind} lists softiwarp0's", rows)
        mrs = iw_rows("mr", pid)
        dev = [d for d in tool_json("stat") if d.get("pid") == pid and
               d.get("ifname") == "softiwarp0"]
        expect(dev and dev[0].get("mr_count") == len(mrs), f"pid {pid}: softiwarp0 mr_count", dev)
    for p in (cli, srv):
        note_exit(p)
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
    ep_dir = f"/tmp/.softrdma-mon-{os.geteuid()}"
    ep_path = f"{ep_dir}/{os.getpid()}"
    os.makedirs(ep_dir, mode=0o700, exist_ok=True)
    ep = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    ep.bind(ep_path)
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
    os.unlink(ep_path)
    # An entry that never answers: a clear message within the timeout, exit 2.
    mute = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    mute.bind(ep_path)
    mute.listen(8)
    start = time.time()
    rc, out, err = tool("stat", "-p", str(os.getpid()))
    expect(rc == 2 and "did not answer" in err, "a silent entry: exit 2", err)
    expect(time.time() - start < 5, "a silent entry: no hang")
    mute.close()
    os.unlink(ep_path)
    # A file left behind by a killed process is not listed: this one's socket is closed.
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(ep_path)
    stale.close()
    rc, out, err = tool("stat", "--json")
    expect(rc == 0 and os.getpid() not in [r["pid"] for r in json.loads(out or "[]")],
           "a stale entry is not listed", out + err)
    rc, out, err = tool("stat", "-p", str(os.getpid()))
    expect(rc == 2 and "runs no softrdma device" in err, "stat -p of a stale entry: exit 2", err)
    if os.path.exists(ep_path):
        os.unlink(ep_path)
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
elif case == "top_cnp":
    # The server's port marks ECN above 10 KB queued: it sends CNPs (notification point), the
    # client handles them (reaction point); top shows both per device and per QP.
    port = str(free_port())
    args = ["ib_write_bw", "-D", "8", "-s", "65536", "-p", port]
    srv = subprocess.Popen([softrdma, "run", "--switch", "rate=1G,buffer=4M,ecn=10K:20K:1",
                            "--", *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True)
    wait_listening(port, proc=srv)
    cli = subprocess.Popen([softrdma, "run", "--", *args, "127.0.0.1"], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
    head = re.compile(r"^PID .* RETX/S\s+NAKS/S\s+CNPTX/S\s+CNPRX/S$", re.M)
    frame = {"out": ""}

    def col(out, pid, n):
        m = re.search(rf"^{pid}\s+ib_write_bw\s+softroce0\s+roce\s+\S+((?:\s+[\d.]+){{6}})$",
                      out, re.M)
        return float(m.group(1).split()[n]) if m else 0.0

    def qp_cnps(out, pid, n):
        """The QP lines under `pid`'s device line: whether one has CNP column `n` above 0."""
        m = re.search(rf"^{pid} .*\n((?:  qp .*\n)+)", out, re.M)
        rates = [re.search(r"((?:\s+[\d.]+){5})  sq-wrs", q) for q in
                 (m.group(1).splitlines() if m else [])]
        return any(r and float(r.group(1).split()[n]) > 0 for r in rates)

    def cnps_flow():  # (a frame whose first sample came before the QPs has no QP rates)
        rc, out, err = tool("top", "--once", "-d", "0.5")
        frame["out"] = out
        return (col(out, srv.pid, 4) > 0 and col(out, cli.pid, 5) > 0 and
                qp_cnps(out, srv.pid, 3) and qp_cnps(out, cli.pid, 4))
    wait_for(cnps_flow, 20, interval=0)
    out = frame["out"]
    expect(head.search(out), "top --once: CNPTX/S and CNPRX/S columns", out)
    expect(col(out, srv.pid, 4) > 0, f"server {srv.pid}: CNPs sent per second", out)
    expect(col(out, cli.pid, 5) > 0, f"client {cli.pid}: CNPs handled per second", out)
    expect(col(out, srv.pid, 5) == 0 and col(out, cli.pid, 4) == 0,
           "no CNPs the other way (the client's port does not mark)", out)
    # The server's QP sends CNPs, the client's handles them.
    expect(qp_cnps(out, srv.pid, 3), f"server {srv.pid}: a QP sending CNPs per second", out)
    expect(qp_cnps(out, cli.pid, 4), f"client {cli.pid}: a QP handling CNPs per second", out)
    for p in (cli, srv):
        finish(p, 60)
elif case == "netns":
    # An ib_write_bw pair in two network namespaces (smon-a, smon-b: two containers of one host),
    # watched from the root namespace; and a root-namespace program watched from smon-a.
    NS = {"smon-a": ("smon-va", "10.77.17.1", "fd77:17::1"),
          "smon-b": ("smon-vb", "10.77.17.2", "fd77:17::2")}

    def ip(*args):
        return subprocess.run(["ip", *args], capture_output=True, text=True).returncode == 0

    def delete_netns():
        for ns in NS:
            ip("netns", "del", ns)
    delete_netns()
    if os.geteuid() != 0 or not ip("netns", "add", "smon-a"):
        print("SKIP: cannot make network namespaces (needs root and ip netns)")
        sys.exit(77)
    procs = []
    try:
        ok = ip("netns", "add", "smon-b") and ip("link", "add", "smon-va", "netns", "smon-a",
                                                 "type", "veth", "peer", "name", "smon-vb",
                                                 "netns", "smon-b")
        for ns, (dev, a4, a6) in NS.items():
            ok = ok and ip("-n", ns, "addr", "add", a4 + "/24", "dev", dev)
            ok = ok and ip("-n", ns, "addr", "add", a6 + "/64", "dev", dev, "nodad")
            ok = ok and ip("-n", ns, "link", "set", dev, "up") and ip("-n", ns, "link", "set",
                                                                       "lo", "up")
        if not ok:
            print("SKIP: cannot set up the veth pair smon-va/smon-vb")
            sys.exit(77)

        def start(ns, *args):
            pre = ["ip", "netns", "exec", ns, softrdma, "run", "--netdev",
                   "udp:" + NS[ns][1]] if ns else [softrdma, "run"]
            p = subprocess.Popen([*pre, "--", *args], stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, text=True)
            procs.append(p)
            return p
        port = str(free_port())
        bw = ["ib_write_bw", "-b", "-D", "8", "-s", "65536", "-p", port]
        srv = start("smon-a", *bw)
        expect(wait_for(lambda: in_netns("smon-a", "tcp_listening", port), 30, interval=0.1,
                        proc=srv), "the server listens in smon-a")
        cli = start("smon-b", *bw, "10.77.17.1")
        pair = [srv.pid, cli.pid]
        # From the root namespace: both found, their QPs in RTS facing each other.
        qps = wait_connected(softrdma, pair)
        expect(len(qps) == 2, "root namespace: res qp shows both RC QPs in RTS", qps)
        if len(qps) == 2:
            expect(qps[srv.pid].get("peer") == "10.77.17.2" and
                   qps[cli.pid].get("peer") == "10.77.17.1", "each QP's peer is the other", qps)
        rows = mine(tool_json("stat"), pair)
        expect(sorted(rows) == sorted(pair) and rows.get(srv.pid, {}).get("address") ==
               "10.77.17.1" and rows.get(cli.pid, {}).get("address") == "10.77.17.2",
               "root namespace: stat lists both with their namespaces' addresses", rows)
        rc, out, err = tool("top", "--once", "-d", "0.2")
        expect(all(re.search(rf"^{p}\s+ib_write_bw\s+softroce0", out, re.M) for p in pair),
               "root namespace: top shows both", out + err)
        # The other way round: a program of the root namespace, watched from smon-a.
        port2 = str(free_port())
        root = start(None, "ib_write_bw", "-p", port2)
        expect(wait_for(lambda: root.pid in mine(tool_json("stat"), [root.pid]), 10,
                        interval=0.1, proc=root), "the root-namespace server is listed")

        def seen_from(ns, pids):
            r = subprocess.run(["ip", "netns", "exec", ns, softrdma, "stat", "--json"],
                               capture_output=True, text=True, timeout=30)
            return sorted(mine(json.loads(r.stdout), pids)) if r.returncode == 0 else None
        expect(seen_from("smon-a", [root.pid, cli.pid]) == sorted([root.pid, cli.pid]),
               "smon-a: stat lists the root namespace's program and smon-b's")
        # Gone when it goes (killed): from both sides.
        root.kill()
        root.wait()
        expect(seen_from("smon-a", [root.pid]) == [], "smon-a: the killed program is gone")
        expect(not mine(tool_json("stat"), [root.pid]), "root: the killed program is gone")
        # Limited to the same user: another user sees none of root's devices.
        r = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                            softrdma, "stat", "--json"], capture_output=True, text=True,
                           timeout=30)
        if r.returncode == 0:
            expect(not mine(json.loads(r.stdout), pair), "user nobody sees none of them",
                   r.stdout)
        else:
            print(f"note: cannot run softrdma as nobody here: {r.stderr.strip()[:200]}")
        for p in (cli, srv):
            finish(p, 60)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        delete_netns()
else:
    sys.exit(f"unknown case {case}")

print(f"{case}: {len(failures)} failures")
sys.exit(1 if failures else 0)
