#!/usr/bin/env python3
"""`cmake --install` into a staging DESTDIR, then softrdma used from the installed tree only:
--version and --help, `softrdma devices`, an ibv_rc_pingpong pair through `softrdma run`
(mapping the installed libibverbs, not the build tree's), sample-trace + lint, the man page;
and a program started without `softrdma run` still loads the system's libibverbs.

usage: check_install.py BUILD_DIR WORK_DIR VERSION"""
import os
import random
import re
import shutil
import subprocess
import sys
import time

build, work, version = sys.argv[1:4]
failures = []


def expect(cond, what, detail=""):
    if not cond:
        failures.append(what)
        print("FAIL:", what, ("\n" + detail) if detail else "")
    return cond


shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
dest = os.path.join(work, "dest")
prefix = "/opt/softrdma-check"
r = subprocess.run(["cmake", "--install", build, "--prefix", prefix], env={**os.environ, "DESTDIR": dest},
                   capture_output=True, text=True)
if not expect(r.returncode == 0, "cmake --install", r.stdout + r.stderr):
    sys.exit(1)
root = dest + prefix
softrdma = os.path.join(root, "bin", "softrdma")
installed = sorted(os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs)
print("installed:", ", ".join(installed))
libdir = [f for f in installed if f.endswith("/softrdma/libibverbs.so.1")]
expect(len(libdir) == 1, "libibverbs.so.1 in a private lib/.../softrdma/ directory", str(installed))
expect(not any(re.fullmatch(r"lib(/[a-z0-9_]+-linux-gnu[a-z0-9_]*)?/lib(ibverbs|rdmacm)\.so.*", f)
               for f in installed),
       "no drop-in library on a standard library path", str(installed))
expect(any(f.endswith("softrdma/librdmacm.so.1") for f in installed), "librdmacm.so.1 installed")
expect("share/man/man1/softrdma.1" in installed, "the man page installed")

# Nothing of the build tree on any path, and no library path of ours.
env = {k: v for k, v in os.environ.items() if not k.startswith("SOFTRDMA_") and k != "LD_LIBRARY_PATH"}
env["PATH"] = "/usr/sbin:/usr/bin:/sbin:/bin"

r = subprocess.run([softrdma, "--version"], env=env, capture_output=True, text=True)
expect(r.returncode == 0 and r.stdout.strip() == f"softrdma {version}", "--version", r.stdout + r.stderr)
for args in (["run", "--help"], ["help", "lint"], ["lint", "-h"], ["help"]):
    r = subprocess.run([softrdma, *args], env=env, capture_output=True, text=True)
    expect(r.returncode == 0 and r.stdout.startswith("usage: softrdma"), f"softrdma {' '.join(args)}",
           r.stdout + r.stderr)
r = subprocess.run([softrdma, "run", "--bogus"], env=env, capture_output=True, text=True)
expect(r.returncode == 2 and "unknown option" in r.stderr, "a bad option still exits 2", r.stderr)
page = os.path.join(root, "share/man/man1/softrdma.1")
r = subprocess.run(["man", "-l", page], env={**env, "MANPAGER": "cat", "MANWIDTH": "100"},
                   capture_output=True, text=True)
expect(r.returncode == 0 and "softrdma run" in r.stdout and f"softrdma {version}" in r.stdout,
       "man -l softrdma.1", r.stderr[-2000:])

r = subprocess.run([softrdma, "devices"], env=env, capture_output=True, text=True, timeout=30)
expect(r.returncode == 0 and "softroce0" in r.stdout, "softrdma devices", r.stdout + r.stderr)

# An ibv_rc_pingpong pair from the installed tree.
port = str(random.randint(12000, 19999))
srv = subprocess.Popen([softrdma, "run", "--", "ibv_rc_pingpong", "-g", "1", "-p", port, "-n", "200"],
                       env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
maps = ""
for _ in range(100):  # the server maps libibverbs once it opens the device, then waits
    try:
        with open(f"/proc/{srv.pid}/maps") as f:
            maps = f.read()
    except OSError:
        break
    if "libibverbs" in maps:
        break
    time.sleep(0.05)
time.sleep(0.3)
try:
    cli = subprocess.run([softrdma, "run", "--", "ibv_rc_pingpong", "-g", "1", "-p", port, "-n", "200",
                          "127.0.0.1"], env=env, capture_output=True, text=True, timeout=60)
    sout, _ = srv.communicate(timeout=60)
except subprocess.TimeoutExpired:
    srv.kill()
    expect(False, "ibv_rc_pingpong pair finishes")
    sys.exit(1)
expect(cli.returncode == 0 and "iters in" in cli.stdout, "ibv_rc_pingpong client", cli.stdout + cli.stderr)
expect(srv.returncode == 0 and "iters in" in sout, "ibv_rc_pingpong server", sout)
mapped = sorted({l.split()[-1] for l in maps.splitlines() if "libibverbs" in l})
expect(mapped and all(m.startswith(root + "/") for m in mapped),
       "the server mapped the installed libibverbs only", str(mapped))
tree = os.path.realpath(build) + "/"
outside = [l.split()[-1] for l in maps.splitlines()
           if l.split()[-1].startswith(tree) and not l.split()[-1].startswith(root + "/")]
expect(not outside, "nothing of the build tree mapped (the staging tree aside)", str(outside))

# Traces and lint from the installed tree.
cap = os.path.join(work, "sample.pcap")
r = subprocess.run([softrdma, "sample-trace", cap], env=env, capture_output=True, text=True)
expect(r.returncode == 0, "sample-trace", r.stderr)
r = subprocess.run([softrdma, "lint", cap], env=env, capture_output=True, text=True)
expect(r.returncode == 0, "lint of the sample trace exits 0", r.stdout + r.stderr)

# Without `softrdma run`, a program keeps the system's libibverbs.
r = subprocess.run(["ldd", shutil.which("ibv_devices", path=env["PATH"])], env=env, capture_output=True,
                   text=True)
line = next((l for l in r.stdout.splitlines() if "libibverbs.so.1" in l), "")
expect(line and root not in line and tree not in line,
       "ibv_devices alone loads the system's libibverbs", line)

if failures:
    print(f"{len(failures)} failure(s)")
    sys.exit(1)
print("ok")
