"""The verdict on ibv_xsrq_pingpong -c 3 and its three clients on one host, sharing the XRC domain
of /tmp/xrc_domain (tests/verbs/programs.py, tests/verbs/xrc_hosts.py)."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from testlib import expect, finish, run_stats  # noqa: E402


def finish_all(procs, timeout=120):
    """[(exit, output)] of each Popen of `procs`, in order; exit None for one killed at `timeout`."""
    outs = []
    for p in procs:
        rc, out = finish(p, timeout)
        outs.append((rc, out if rc is not None else out + "\n(timed out)"))
    return outs


def expect_xsrq_clients(outs, messages, names):
    """`outs`: the server's (exit, output), then the three clients', all under `softrdma run
    --stats`. Each exits 0 saying success. Client i's k-th message goes through target QP
    (i + k) % 3: each client's target passes the 2/3 of the others' messages on (4 packets each:
    4096 bytes at path MTU 1024), and as many of its own come through the others; no SRQ is
    refused. Returns the stats lines (None when one is missing)."""
    for (rc, out), who in zip(outs, ["server", *names]):
        expect(rc == 0 and "\nsuccess" in "\n" + out, f"xsrq_pingpong -c 3: {who} exit {rc}", out)
    lines = [run_stats(out) for _, out in outs]
    if not all(lines):
        expect(False, "a stats line from each program", "".join(o for _, o in outs))
        return None
    passed = 2 * messages // 3 * 4
    for st, (_, out), who in zip(lines[1:], outs[1:], names):
        expect(st["xrc_relayed"] == passed and st["xrc_proxied"] == passed,
               f"{who}: {passed} packets passed on and {passed} run for the others", out)
    expect(all(st["xrc_bad_srqn"] == 0 for st in lines), "no SRQ refused",
           "".join(o for _, o in outs))
    return lines
