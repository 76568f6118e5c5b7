#!/usr/bin/env python3
"""Acceptance: UCX, Open MPI and MPICH from Debian's packages over softrdma, unmodified.

usage: ucx_mpi.py SOFTRDMA MPI_CHECK_OPENMPI MPI_CHECK_MPICH CASE
Every program runs under `softrdma run --stats` and nothing else. Each case checks what the
programs print and exit with, and that softrdma really carried the data: UCX names the
transport it chose (UCX_LOG_LEVEL=info prints "ep_cfg[..]: tag(rc_verbs/softroce0:1)") and
each process's device counts the packets it sent and received."""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from testlib import failures, low_port, skip, wait_listening  # noqa: E402
import testlib  # noqa: E402

softrdma, mpi_openmpi, mpi_mpich, case = sys.argv[1:5]


def expect(cond, what, output=""):
    return testlib.expect(cond, what, output, tail=4000)


def port():
    return low_port(20000, 29999)


def wait_tcp(p, timeout=20):
    return wait_listening(p, timeout=timeout)


def finish(proc, timeout=120):
    return testlib.finish(proc, timeout)


def stats(out):
    """The `--stats` line of each process in `out`: a list of {counter: value}."""
    found = []
    for m in re.finditer(r"^softrdma: stats \S+ \S+: (.*)$", out, re.M):
        found.append({k: int(v) for k, v in (kv.split("=") for kv in m.group(1).split())})
    return found


def run(args, env=None, prefix=(), opts=()):
    return subprocess.Popen([*prefix, softrdma, "run", "--stats", *opts, "--", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env)


def clean(name, s, out):
    """No retransmission, timeout or unknown-QP drop: a loopback run is clean."""
    for k in ("retransmits", "retry_exceeded_err", "retry_rnr_exceeded_err", "drop_unknown_qp",
              "drop_malformed", "icrc_err"):
        expect(s.get(k, 0) == 0, f"{name}: {k}={s.get(k)}", out)


def ucx_env(tls):
    env = dict(os.environ, UCX_LOG_LEVEL="info")
    env.pop("UCX_TLS", None)
    if tls:
        env["UCX_TLS"] = tls
    return env


def ucx_pair(name, tls, args, min_pkts, transport=None, prefix=()):
    """ucx_perftest server and client over 127.0.0.1; each device sends >= min_pkts packets."""
    p = str(port())
    env = ucx_env(tls)
    srv = run(["ucx_perftest", "-p", p], env, prefix)
    expect(wait_tcp(p), f"{name}: server listening")
    cli = run(["ucx_perftest", "-p", p, "127.0.0.1", *args], env, prefix)
    crc, cout = finish(cli)
    src, sout = finish(srv)
    expect(crc == 0, f"{name}: client exit {crc}", cout)
    expect(src == 0, f"{name}: server exit {src}", sout)
    expect(re.search(r"^Final:\s+\d+", cout, re.M), f"{name}: no figures", cout)
    if transport:
        chosen = re.findall(r"ep_cfg\[\d+\]: (.*)", cout + sout)
        expect(any(transport in c for c in chosen),
               f"{name}: UCX did not use {transport} (chose {chosen})", cout)
    # The client's requests (messages, or reads for get) reach the server: each device
    # counts them; the other way goes at least something (replies, acknowledgements).
    counted = {}
    for side, out in (("client", cout), ("server", sout)):
        s = stats(out)
        expect(len(s) == 1, f"{name}: {side} printed no device counters", out)
        if s:
            counted[side] = s[0]
            clean(f"{name} {side}", s[0], out)
    if len(counted) == 2:
        c, v = counted["client"], counted["server"]
        expect(c["sent_pkts"] >= min_pkts and v["rcvd_pkts"] >= min_pkts,
               f"{name}: client sent {c['sent_pkts']}, server received {v['rcvd_pkts']} "
               f"packets; expected >= {min_pkts}", cout)
        expect(v["sent_pkts"] > 0 and c["rcvd_pkts"] > 0, f"{name}: nothing came back", sout)
    return cout


UCP_TESTS = [  # (test, options, packets each way at least)
    ("tag_lat", ["-n", "2000"], 2000),
    ("tag_bw", ["-s", "65536", "-n", "500"], 100),
    ("ucp_put_bw", ["-s", "65536", "-n", "500"], 100),
    ("ucp_put_lat", ["-n", "2000"], 2000),
    ("ucp_get", ["-s", "4096", "-n", "300"], 300),
    ("stream_bw", ["-s", "65536", "-n", "500"], 100),
    ("ucp_am_lat", ["-n", "2000"], 2000),
]


def ucp_matrix(tls, transport):
    for test, opts, pkts in UCP_TESTS:
        ucx_pair(f"{tls} {test}", tls, ["-t", test, *opts], pkts, transport)


def case_ucx_info():
    """ucx_info -d lists rc_verbs and ud_verbs on softroce0:1 (through the view softrdma run
    gives it of /dev/infiniband and /sys/class/infiniband); without the view it lists none."""
    host = [os.path.exists(p) for p in ("/dev/infiniband", "/sys/class/infiniband")]
    r = subprocess.run([softrdma, "run", "--", "ucx_info", "-d"], capture_output=True,
                       text=True, timeout=60)
    out = r.stdout + r.stderr
    expect(r.returncode == 0, f"ucx_info exit {r.returncode}", out)
    devices = re.findall(r"Transport: (\S+)\s*\n#\s+Device: (\S+)", out)
    for tl in ("rc_verbs", "ud_verbs"):
        expect((tl, "softroce0:1") in devices, f"ucx_info lists no {tl} on softroce0:1", out)
    r = subprocess.run([softrdma, "run", "--view", "off", "--", "ucx_info", "-d"],
                       capture_output=True, text=True, timeout=60)
    expect("softroce0" not in r.stdout, "--view off: UCX still sees softroce0", r.stdout)
    # The view is the program's own: nothing appeared outside it.
    expect([os.path.exists(p) for p in ("/dev/infiniband", "/sys/class/infiniband")] == host,
           "the view leaked into the host's /dev or /sys")


def as_nobody():
    if os.geteuid() != 0:
        return ()  # already a normal user
    return ("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups")


def case_ucx_nonroot():
    """A normal user: softrdma run builds the view in a user namespace of its own."""
    prefix = as_nobody()
    r = subprocess.run([*prefix, softrdma, "run", "--view", "on", "--", "ucx_info", "-d"],
                       capture_output=True, text=True, timeout=60)
    out = r.stdout + r.stderr
    if r.returncode == 2 and "user namespace" in out:
        skip("no user namespaces for a normal user here: " + out.strip())
    expect(r.returncode == 0 and "softroce0:1" in out, "nobody: ucx_info lists softroce0:1", out)
    ucx_pair("nobody rc_verbs tag_lat", "rc_verbs,ud_verbs", ["-t", "tag_lat", "-n", "2000"],
             2000, "rc_verbs/softroce0:1", prefix)
    # A user's runs share one user namespace, so direct placement between them still works.
    p = str(port())
    srv = run(["ib_write_lat", "-p", p, "-n", "2000"], prefix=prefix)
    expect(wait_tcp(p), "nobody ib_write_lat: server listening")  # perftest's own TCP port
    cli = run(["ib_write_lat", "-p", p, "-n", "2000", "127.0.0.1"], prefix=prefix)
    crc, cout = finish(cli)
    src, sout = finish(srv)
    expect(crc == 0 and src == 0, f"nobody ib_write_lat: exits {crc}, {src}", cout + sout)
    for side, out in (("client", cout), ("server", sout)):
        s = stats(out)
        expect(s and s[0]["placed_sent"] > 1000 and s[0]["placed_refused"] == 0,
               f"nobody ib_write_lat {side}: WRITEs not placed across the runs", out)


def case_ucx_rc():
    ucp_matrix("rc_verbs,ud_verbs", "rc_verbs/softroce0:1")


def case_ucx_ud():
    ucp_matrix("ud_verbs", "ud_verbs/softroce0:1")


def case_ucx_uct():
    """UCT-level tests on one transport and device. ud_verbs has no put or get in UCX (UD
    carries no RDMA), so it runs active messages only."""
    for tl, tests in (("rc_verbs", [("am_lat", ["-n", "2000"], 2000),
                                    ("put_bw", ["-s", "65536", "-D", "zcopy", "-n", "300"], 300),
                                    ("get", ["-s", "65536", "-D", "zcopy", "-n", "300"], 300),
                                    ("am_bw", ["-s", "4096", "-D", "bcopy", "-n", "2000"], 500)]),
                      ("ud_verbs", [("am_lat", ["-n", "2000"], 2000),
                                    ("am_bw", ["-s", "1024", "-D", "bcopy", "-n", "2000"], 500)])):
        for test, opts, pkts in tests:
            ucx_pair(f"uct {tl} {test}", tl, ["-t", test, "-d", "softroce0:1", "-x", tl, *opts],
                     pkts)


def case_ucx_default():
    """UCX's own choice (no UCX_TLS): between two processes of one host it takes shared memory
    for small messages and, as with a RoCE NIC, rc_verbs as a lane for large ones."""
    ucx_pair("default tag_bw", None, ["-t", "tag_bw", "-s", "1048576", "-n", "200"], 1000,
             "rc_verbs/softroce0:1")


def mpi(name, launcher, binary, np, extra=()):
    env = dict(os.environ, UCX_TLS="rc_verbs,ud_verbs", UCX_LOG_LEVEL="info")
    proc = run([launcher, *extra, "-np", str(np), binary], env)
    rc, out = finish(proc, 240)
    expect(rc == 0, f"{name}: exit {rc}", out)
    for r in range(np):
        expect(f"mpi_check: rank {r} of {np} ok" in out, f"{name}: rank {r} not ok", out)
    s = stats(out)
    # One device per rank (mpirun itself opens none), each of which carried the messages.
    expect(len(s) == np, f"{name}: {len(s)} devices for {np} ranks", out)
    for i, c in enumerate(s):
        expect(c["sent_pkts"] >= 300 and c["rcvd_pkts"] >= 300,
               f"{name}: device {i} moved only {c['sent_pkts']}/{c['rcvd_pkts']} packets", out)
        clean(f"{name} device {i}", c, out)
    expect("rc_verbs/softroce0:1" in out, f"{name}: UCX did not use rc_verbs", out)


def case_openmpi():
    if not os.path.exists(mpi_openmpi):
        skip("mpi_check was not built (no mpicc.openmpi)")
    extra = ["--mca", "pml", "ucx", "-x", "UCX_TLS", "-x", "UCX_LOG_LEVEL"]
    if os.geteuid() == 0:
        extra.append("--allow-run-as-root")
    mpi("Open MPI 2 ranks", "mpirun.openmpi", mpi_openmpi, 2, extra)
    mpi("Open MPI 4 ranks", "mpirun.openmpi", mpi_openmpi, 4, [*extra, "--oversubscribe"])


def case_mpich():
    if not os.path.exists(mpi_mpich):
        skip("mpi_check was not built (no mpicc.mpich)")
    mpi("MPICH 2 ranks", "mpirun.mpich", mpi_mpich, 2)
    mpi("MPICH 4 ranks", "mpirun.mpich", mpi_mpich, 4)


globals()["case_" + case]()
if failures:
    print(f"{len(failures)} failure(s)")
    sys.exit(1)
print("ok")
