"""What the install tests do with an installed softrdma (check_install.py, check_deb.py): an
environment with nothing of the build tree, an ibv_rc_pingpong pair through `softrdma run`
(with what the server mapped), and the failure list both report."""
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from testlib import wait_for, wait_listening  # noqa: E402
import testlib  # noqa: E402

failures = []


def expect(cond, what, detail=""):
    """Records a failure (and prints it) when `cond` is false; returns cond."""
    if not cond:
        failures.append(what)
        print("FAIL:", what, ("\n" + detail) if detail else "")
    return cond


def clean_env():
    """The environment without SOFTRDMA_* and LD_LIBRARY_PATH, PATH the system's only."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SOFTRDMA_") and k != "LD_LIBRARY_PATH"}
    env["PATH"] = "/usr/sbin:/usr/bin:/sbin:/bin"
    return env


def free_port():
    return str(testlib.free_port())


def pingpong_pair(softrdma, env, run_opts=(), iters=200):
    """Runs `softrdma run [run_opts] -- ibv_rc_pingpong -g 1` as server and client on this host.
    Returns (server output, server status, client result, the server's /proc/PID/maps once it
    mapped libibverbs), server status None when the pair did not finish within a minute."""
    port = free_port()
    cmd = [softrdma, "run", *run_opts, "--", "ibv_rc_pingpong", "-g", "1", "-p", port, "-n", str(iters)]
    srv = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    maps = ""

    def mapped():  # the server maps libibverbs once it opens the device, then listens
        nonlocal maps
        try:
            with open(f"/proc/{srv.pid}/maps") as f:
                maps = f.read()
        except OSError:
            return True  # it has ended
        return "libibverbs" in maps
    wait_for(mapped, 5, interval=0.05)
    wait_listening(port, proc=srv)
    try:
        cli = subprocess.run(cmd + ["127.0.0.1"], env=env, capture_output=True, text=True, timeout=60)
        sout, _ = srv.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        return "", None, None, maps
    finally:  # also when interrupted: no server left behind
        if srv.poll() is None:
            srv.kill()
            srv.communicate()
    return sout, srv.returncode, cli, maps


def check_pingpong_pair(softrdma, env, root, run_opts=()):
    """pingpong_pair, its results checked: both sides finish, and the server mapped only the
    libibverbs under `root` (the installed tree). Returns the server's mapped files."""
    sout, status, cli, maps = pingpong_pair(softrdma, env, run_opts)
    mapped = sorted({l.split()[-1] for l in maps.splitlines() if len(l.split()) >= 6})
    if not expect(status is not None, "ibv_rc_pingpong pair finishes within a minute"):
        return mapped
    expect(cli.returncode == 0 and "iters in" in cli.stdout, "ibv_rc_pingpong client", cli.stdout + cli.stderr)
    expect(status == 0 and "iters in" in sout, "ibv_rc_pingpong server", sout)
    verbs = [m for m in mapped if "libibverbs" in m]
    expect(verbs and all(m.startswith(root.rstrip("/") + "/") for m in verbs),
           f"the server mapped the libibverbs under {root} only", str(verbs))
    return mapped


def system_libibverbs(env):
    """The libibverbs.so.1 line of `ldd ibv_devices`: what a program not started through softrdma
    loads."""
    r = subprocess.run(["ldd", "/usr/bin/ibv_devices"], env=env, capture_output=True, text=True)
    return next((l.strip() for l in r.stdout.splitlines() if "libibverbs.so.1" in l), "")
