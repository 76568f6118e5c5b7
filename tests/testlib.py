"""What the test scripts share: checks that collect failures, skipping with ctest's
SKIP_RETURN_CODE (77, never a pass), free ports, and waiting on a condition with a deadline
instead of a fixed sleep.

A script imports it with its own directory's parent on sys.path:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
"""
import json
import random
import re
import socket
import subprocess
import sys
import time

SKIP = 77  # registered with set_tests_properties(... SKIP_RETURN_CODE 77)
failures = []  # what expect() found wrong, in order


def skip(why):
    """Ends the script as skipped (ctest: "Not Run (skipped)"), saying why."""
    print(f"SKIP: {why}")
    sys.exit(SKIP)


def expect(cond, what, output="", tail=3000):
    """Records `what` as a failure unless `cond`, with the last `tail` characters of `output`."""
    if not cond:
        failures.append(what)
        print("FAIL:", what)
        if output:
            print("---- output ----\n" + str(output)[-tail:] + "\n----------------")
    return cond


def free_port():
    """A TCP port of 127.0.0.1 that was free a moment ago, below Linux's ephemeral range (32768-
    60999): a port the kernel picked there could go to a connection of a test running at the same
    time before our server listened on it (perftest: "Couldn't listen to port")."""
    for _ in range(1000):
        port = random.randint(21000, 32700)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free TCP port in 21000-32700")


def low_port(lo=12000, hi=19999):
    # Below Linux's ephemeral range (32768-60999), where TCP connections of tests running at
    # the same time (iWARP) would take ports.
    return random.randint(lo, hi)


def wait_for(pred, timeout=30, interval=0.02, proc=None):
    """Polls `pred()` until it holds (True) or `timeout` seconds pass (False); also False as
    soon as `proc`, a Popen, has ended without it holding."""
    deadline = time.monotonic() + timeout
    while True:
        if pred():
            return True
        if time.monotonic() >= deadline or (proc is not None and proc.poll() is not None):
            return False
        time.sleep(interval)


def tcp_listening(port):
    """True when some socket listens on TCP `port` (/proc/net/tcp and tcp6, state 0A)."""
    for f in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(f) as fh:
                for line in fh.readlines()[1:]:
                    cols = line.split()
                    if cols[3] == "0A" and int(cols[1].rsplit(":", 1)[1], 16) == int(port):
                        return True
        except OSError:
            pass
    return False


def wait_listening(port, proc=None, timeout=30):
    """Waits until a server (perftest, ibv_*_pingpong, qperf) listens on its TCP `port`."""
    return wait_for(lambda: tcp_listening(port), timeout, proc=proc)


def rdma_cm_listening(port):
    """True when some process listens on rdma_cm port `port` over RoCE. softrdma's registry of
    bound ports is a set of abstract unix sockets (/proc/net/unix); the holder's CM agent
    answers a connection with 24 bytes, byte 4 saying whether it listens."""
    with open("/proc/net/unix") as f:
        names = [m.group(1) for line in f
                 if (m := re.search(rf"@(softrdma-cm/\d+/[^/]+/{port})$", line.strip()))]
    for name in names:
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(2)
                s.connect("\0" + name)
                answer = s.recv(24)
                if len(answer) >= 5 and answer[4] == 1:
                    return True
        except OSError:
            pass
    return False


def run_case(namespace, case):
    """Runs function `case_<case>` of `namespace` (a script's globals()), then exits: 1 when
    expect() found failures, 2 for an unknown case, else 0 after printing "ok"."""
    cases = {name[5:]: fn for name, fn in namespace.items() if name.startswith("case_")}
    if case not in cases:
        print("unknown case", case, "; known:", ", ".join(sorted(cases)))
        sys.exit(2)
    cases[case]()
    if failures:
        print(f"{len(failures)} failure(s)")
        sys.exit(1)
    print("ok")
    sys.exit(0)


def rts_qps(softrdma, pids):
    """{pid: `softrdma res qp` row} of the processes in `pids` that have an RC QP in RTS."""
    rows = {}
    for pid in pids:
        r = subprocess.run([softrdma, "res", "qp", "--json", "-p", str(pid)], capture_output=True,
                           text=True, timeout=30)
        if r.returncode == 0:
            for q in json.loads(r.stdout):
                if q.get("type") == "RC" and q.get("state") == "RTS":
                    rows[pid] = q
    return rows


def wait_connected(softrdma, pids, timeout=30):
    """Waits until each process of `pids` has an RC QP in RTS; returns {pid: qp row}, or {}."""
    rows = {}

    def all_in_rts():
        rows.update(rts_qps(softrdma, pids))
        return len(rows) == len(pids)
    return rows if wait_for(all_in_rts, timeout, interval=0.1) else {}


def finish(p, timeout=60):
    """The exit code and output of Popen `p`; (None, output) when it had to be killed."""
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, _ = p.communicate()
        return None, out
    return p.returncode, out


def expect_relisten(name, client_rc, client_out, server_rc, server_out, client_err=""):
    """The verdict on a tests/lwtcp/cm_relisten.c pair: the client connected twice, though the
    server listened again only after the gap it prints ("gap N ms"). Beyond 200 ms of its 50 ms
    sleep the machine stalled past the CM's 250 ms of retries: no verdict then."""
    gap = [float(line.split()[1]) for line in server_out.splitlines() if line.startswith("gap ")]
    expect(gap != [], f"{name}: the server's gap", server_out)
    if gap and gap[0] < 200:
        expect(client_rc == 0 and "connected twice" in client_out,
               f"{name}: connected twice (exit {client_rc}, gap {gap[0]:.0f} ms)",
               client_out + client_err + server_out)
        expect(server_rc == 0, f"{name}: server exits 0 (got {server_rc})", server_out)


def lint_json(softrdma, capture):
    """`softrdma lint --json CAPTURE`: (exit status, the report as a dict or None, output)."""
    r = subprocess.run([softrdma, "lint", "--json", capture], capture_output=True, text=True)
    try:
        doc = json.loads(r.stdout)
    except ValueError:
        doc = None
    return r.returncode, doc, r.stdout + r.stderr


def run_stats(text, device="softroce0"):
    """The counters of `softrdma run --stats`'s line for `device` in `text`, as {name: int}, or
    None. The line need not start a line: perftest may end its last line without a newline."""
    m = re.search(rf"softrdma: stats {device} \S+:((?: \w+=\d+)+)$", text, re.M)
    return {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", m.group(1))} if m else None


def run_pair(softrdma, server, client, server_opts=(), client_opts=None, timeout=120):
    """Runs `server` under `softrdma run SERVER_OPTS --`, then, once it listens on its TCP port
    (`-p PORT` in `server`), `client` under `softrdma run CLIENT_OPTS --` (the server's options
    when None). Returns ((exit, output), (exit, output)); an exit is None for a program that had
    to be killed after `timeout` seconds."""
    client_opts = server_opts if client_opts is None else client_opts
    srv = subprocess.Popen([softrdma, "run", *server_opts, "--", *server], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
    wait_listening(server[server.index("-p") + 1], proc=srv)
    try:
        c = subprocess.run([softrdma, "run", *client_opts, "--", *client], capture_output=True,
                           text=True, timeout=timeout)
        client_result = (c.returncode, c.stdout + c.stderr)
    except subprocess.TimeoutExpired as e:
        out = e.stdout or b""
        out = out.decode(errors="replace") if isinstance(out, bytes) else out
        return finish(srv, 0), (None, out + "\n(timed out)")
    return finish(srv, timeout), client_result


def in_netns(ns, pred_name, *args):
    """`pred_name(*args)` (a predicate of this module) evaluated inside network namespace `ns`,
    where /proc/net and abstract unix sockets are that namespace's own."""
    cmd = ["ip", "netns", "exec", ns, sys.executable, __file__, pred_name, *map(str, args)]
    return subprocess.run(cmd, capture_output=True).returncode == 0


if __name__ == "__main__":  # what in_netns() runs: exit 0 when the predicate holds
    sys.exit(0 if {"tcp_listening": tcp_listening,
                   "rdma_cm_listening": rdma_cm_listening}[sys.argv[1]](*sys.argv[2:]) else 1)
